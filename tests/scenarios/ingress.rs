//! Ingress hardening on a `clawbus up` child: request ids placed by session and lane, one name
//! validator (WebSocket session keys too), a quota for unauthenticated WebSocket connections,
//! `/healthz` through an idle-connection flood under a low descriptor limit, the port bound
//! before anything starts, and the port kept open (503) through the drain.

use super::system::{Child, spawn_up, stop, up};
use super::ws_client::{Client, Up, connect_params};
use crate::support::{NET, Project, eventually, post_task, run_cmd, send};
use clawbus::testkit::{ScriptedServer, Turn};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_reused_with_another_session_or_lane_is_a_conflict() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = up(&project).await;
    let first = json!({ "text": "hi", "request_id": "r-1", "session": "a", "wait": true });
    let (status, done) = post_task(&daemon, "echo", first.clone()).await;
    assert_eq!(status, 200, "{done}");
    let (status, again) = post_task(&daemon, "echo", first).await;
    assert_eq!(
        (status, &again["duplicate"]),
        (200, &json!(true)),
        "{again}"
    );

    let cases = [
        (
            json!({ "text": "hi", "request_id": "r-1", "session": "b" }),
            "session \"a\"",
        ),
        (
            json!({ "text": "hi", "request_id": "r-1" }),
            "session \"a\"",
        ),
        (
            json!({ "text": "hi", "request_id": "r-1", "session": "a", "lane": "cron" }),
            "lane \"main\"",
        ),
    ];
    for (body, words) in cases {
        let (status, answer) = post_task(&daemon, "echo", body.clone()).await;
        assert_eq!(status, 409, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "request_id_conflict", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{message}");
        assert!(
            message.contains(done["task_id"].as_str().unwrap()),
            "{message}"
        );
    }

    // A body request_id and an Idempotency-Key that differ: 400, nothing admitted.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/agents/echo/tasks", daemon.url))
        .bearer_auth(&daemon.token)
        .header("Idempotency-Key", "k-2")
        .json(&json!({ "text": "hi", "request_id": "r-2" }))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request_id", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"k-2\"")
    );
    let (_, listed) = send(&daemon, reqwest::Method::GET, "/v1/tasks?agent=echo", None).await;
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["request_id"].as_str())
        .collect();
    assert_eq!(ids, ["r-1"], "the refused posts admitted nothing");

    // The CLI prints the conflict and exits 2 (it took the 409 for a task before).
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.echo",
        "hi",
        "--request-id",
        "r-1",
        "--session",
        "b",
    ])
    .args(["--url", &daemon.url]);
    let out = run_cmd(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is taken by task") && stderr.contains("session"),
        "{stderr}"
    );
    assert!(!stderr.contains("invalid type"), "{stderr}");
    stop(daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_idempotency_key_reused_with_another_session_is_a_conflict_in_openais_shape() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = up(&project).await;
    let complete = |session: &'static str| {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", daemon.url))
            .bearer_auth(&daemon.token)
            .header("Idempotency-Key", "o-1")
            .header("X-Clawbus-Session", session)
            .json(&json!({ "model": "agent:echo",
                           "messages": [{ "role": "user", "content": "hi" }] }))
            .timeout(NET)
            .send()
    };
    let first = complete("a").await.unwrap();
    assert_eq!(first.status(), 200);
    let again = complete("a").await.unwrap();
    assert_eq!(
        again.status(),
        200,
        "the same key in the same session is answered"
    );
    let elsewhere = complete("b").await.unwrap();
    assert_eq!(elsewhere.status(), 409);
    let body: Value = elsewhere.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_id_conflict", "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let (_, listed) = send(&daemon, reqwest::Method::GET, "/v1/tasks?agent=echo", None).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    stop(daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_session_keys_go_through_the_one_name_validator() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let up = Up::start(&project).await;
    let (mut c, hello) = Client::connect(&up, &up.token).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let long = format!("agent:echo:ws:direct:{}", "x".repeat(20_000));
    let long_name = "y".repeat(129);
    for key in [
        "agent:echo:ws:direct:a\nforged log line",
        long.as_str(),
        "a\nb",
        "agent:echo:ws:direct:a b",
        long_name.as_str(),
    ] {
        for (method, params) in [
            ("chat.send", json!({ "message": "hi", "sessionKey": key })),
            ("chat.history", json!({ "sessionKey": key })),
        ] {
            let id = c.send(method, params).await;
            let res = c.answer(&id).await;
            assert_eq!(res["ok"], false, "{method} {key:?}: {res}");
            assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
            let message = res["error"]["message"].as_str().unwrap();
            assert!(
                message.len() < 400,
                "a long key is not echoed whole: {message}"
            );
        }
    }
    // The same alphabet as the HTTP API: a name with '@' and '+' is a session there and here.
    let ok = c
        .call(
            "chat.send",
            json!({ "message": "hi", "sessionKey": "bob@example.com+1" }),
        )
        .await;
    assert_eq!(ok["sessionKey"], "agent:echo:ws:direct:bob@example.com+1");
    let (status, _) =
        post_task_in(&up, json!({ "text": "hi", "session": "bob@example.com+1" })).await;
    assert_eq!(status, 202);
    let (status, refused) = post_task_in(&up, json!({ "text": "hi", "session": "a\nb" })).await;
    assert_eq!(status, 400, "{refused}");
    let sessions = reqwest::Client::new()
        .get(format!("{}/v1/sessions", up.url))
        .bearer_auth(&up.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !sessions.contains("forged") && !sessions.contains("xxxxxxxx"),
        "{sessions}"
    );
}

async fn post_task_in(up: &Up, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/agents/echo/tasks", up.url))
        .bearer_auth(&up.token)
        .json(&body)
        .timeout(NET)
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_websockets_cannot_keep_a_client_with_the_token_out() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let up = Up::start(&project).await;
    let quota = clawbus::gateway::ws::MAX_UNAUTHENTICATED;
    // Sockets that never send `connect` hold every unauthenticated place...
    let mut idle = Vec::new();
    for _ in 0..quota {
        idle.push(Client::open(&up).await.0);
    }
    // ... so one more without the token is refused at once,
    match tokio_tungstenite::connect_async(up.ws_url()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
        other => panic!("past the quota an upgrade without the token is refused: {other:?}"),
    }
    // ... while a client presenting the token on the upgrade gets in and is served.
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = up.ws_url().into_client_request().unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("bearer {}", up.token).parse().unwrap(),
    );
    let (mut ws, _) = tokio::time::timeout(NET, tokio_tungstenite::connect_async(request))
        .await
        .unwrap()
        .unwrap();
    let challenge = next_json(&mut ws).await;
    assert_eq!(challenge["event"], "connect.challenge");
    let connect = json!({ "type": "req", "id": "c", "method": "connect", "params": connect_params(&up.token) });
    ws.send(Message::Text(connect.to_string().into()))
        .await
        .unwrap();
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["ok"], true, "{hello}");
    // `clawbus chat` presents the token on the upgrade too.
    let mut cmd = project.clawbus();
    cmd.args(["chat", "--agent", "echo", "--url", &up.url])
        .stdin(std::process::Stdio::null());
    let out = run_cmd(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(idle);
}

async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Value {
    loop {
        match tokio::time::timeout(NET, ws.next()).await.unwrap() {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("expected a frame: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_through_a_flood_of_idle_connections_under_a_low_descriptor_limit() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(project.path())
        .env("RUST_LOG", "error")
        .arg("-c")
        .arg(format!(
            "ulimit -n 128 && exec {} up --port 0",
            env!("CARGO_BIN_EXE_clawbus")
        ));
    let daemon = spawn_up(&project, cmd).await;
    let addr = daemon.url.trim_start_matches("http://").to_string();
    // Three times the descriptor limit of connections that never send a request.
    let mut flood = Vec::new();
    for _ in 0..384 {
        if let Ok(s) = tokio::net::TcpStream::connect(&addr).await {
            flood.push(s);
        }
    }
    let health = reqwest::Client::new()
        .get(format!("{}/healthz", daemon.url))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.status(),
        200,
        "{}",
        health.text().await.unwrap_or_default()
    );
    let (status, answer) = post_task(&daemon, "echo", json!({ "text": "hi", "wait": true })).await;
    assert_eq!(
        (status, &answer["state"]),
        (200, &json!("succeeded")),
        "{answer}"
    );
    drop(flood);
    stop(daemon).await;
}

#[test]
fn up_on_a_port_in_use_fails_before_anything_starts() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = crate::support::output({
        let mut cmd = project.clawbus();
        cmd.args(["up", "--port", &port]);
        cmd
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    assert!(
        !project.state_dir().join("db").exists(),
        "the store was not opened: nothing started before the bind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_drain_healthz_answers_503_and_new_work_is_refused() {
    let server = ScriptedServer::start(vec![Turn::hang()]).await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[gateway]\nshutdown_grace = \"30s\"\n")
        .write("agents.d/chat.toml", "");
    let daemon: Child = up(&project).await;
    let (status, running) = post_task(&daemon, "chat", json!({ "text": "hold" })).await;
    assert_eq!(status, 202, "{running}");
    eventually("the turn reached the model", async || {
        server.request_count() == 1
    })
    .await;
    std::process::Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    let http = reqwest::Client::new();
    let mut last = String::new();
    eventually("/healthz answers 503 draining", async || {
        match http
            .get(format!("{}/healthz", daemon.url))
            .timeout(NET)
            .send()
            .await
        {
            Ok(r) => {
                let status = r.status().as_u16();
                last = r.text().await.unwrap_or_default();
                status == 503 && last.contains("draining")
            }
            Err(e) => panic!("the listener must stay open through the drain: {e} (last {last})"),
        }
    })
    .await;
    let (status, refused) = post_task(&daemon, "chat", json!({ "text": "late" })).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "draining", "{refused}");
    // A second signal ends the drain at once (the hanging turn runs again on the next start).
    std::process::Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    let exit = crate::support::wait_child_async(daemon.child).await;
    assert_eq!(exit.code(), Some(130));
}
