//! The WebSocket gateway, against a real `clawbus up` child and the scripted model, driven by a
//! client written from the protocol description (OpenClaw's frames, version 4): challenge,
//! connect, requests and events, errors and closes; and `clawbus chat` over it.

use super::ws_client::{Client, Up};
use crate::support::{Project, last_user, run_cmd};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::process::Stdio;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

fn project(server: &ScriptedServer, extra: &str, agent: &str) -> Project {
    let p = Project::new();
    p.with_mock_and(&server.base_url(), extra)
        .write("agents.d/echo.toml", agent);
    p
}

#[actix_rt::test]
async fn a_run_streams_lifecycle_deltas_and_final_in_order_and_agent_wait_answers_its_text() {
    let server = ScriptedServer::start(vec![Turn::text_chunks(vec!["Hel", "lo, ", "world"])]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, hello) = Client::connect(&up, &up.token).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let h = &hello["payload"];
    assert_eq!(h["type"], "hello-ok");
    assert_eq!(h["protocol"], 4);
    let methods = h["features"]["methods"].as_array().unwrap();
    for m in [
        "health",
        "agent",
        "agent.wait",
        "chat.send",
        "cron.add",
        "exec.approval.resolve",
    ] {
        assert!(methods.contains(&json!(m)), "hello-ok must list {m}: {h}");
    }
    assert!(
        h["features"]["events"]
            .as_array()
            .unwrap()
            .contains(&json!("tick"))
    );
    assert_eq!(h["policy"]["maxPayload"], 1024 * 1024);
    assert_eq!(h["policy"]["tickIntervalMs"], 30_000);
    assert!(h["snapshot"]["uptimeMs"].is_u64(), "{h}");

    let agents = c.call("agents.list", json!({})).await;
    assert_eq!(agents["agents"][0]["id"], "echo", "{agents}");

    let params = json!({ "message": "greet", "agentId": "echo", "sessionKey": "s1", "idempotencyKey": "run-1" });
    let accepted = c.call("agent", params.clone()).await;
    assert_eq!(accepted["status"], "accepted", "{accepted}");
    assert!(accepted["acceptedAt"].as_u64().unwrap() > 0);
    assert_eq!(accepted["sessionKey"], "agent:echo:ws:direct:s1");
    let run = accepted["runId"].as_str().unwrap().to_string();

    let of_run = |p: &Value| p["runId"] == run.as_str();
    c.event_where("chat", |p| of_run(p) && p["state"] == "final")
        .await;
    // Everything of this run, in the order it came.
    let mine: Vec<(String, String)> = c
        .events
        .iter()
        .filter(|e| of_run(&e["payload"]))
        .filter(|e| e["event"] == "agent")
        .map(|e| {
            let d = &e["payload"]["data"];
            let what = if e["payload"]["stream"] == "assistant" {
                d["delta"].as_str().unwrap().to_string()
            } else {
                d["phase"].as_str().unwrap_or_default().to_string()
            };
            (e["payload"]["stream"].as_str().unwrap().to_string(), what)
        })
        .collect();
    let pairs: Vec<(&str, &str)> = mine.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("lifecycle", "start"),
            ("lifecycle", "model"),
            ("assistant", "Hel"),
            ("assistant", "lo, "),
            ("assistant", "world"),
            ("lifecycle", "end"),
        ],
        "agent events in order"
    );
    let last_delta = c
        .events
        .iter()
        .rfind(|e| e["event"] == "agent" && e["payload"]["stream"] == "assistant")
        .unwrap();
    assert_eq!(
        last_delta["payload"]["data"]["text"], "Hello, world",
        "text is the text so far"
    );
    assert_eq!(
        last_delta["payload"]["sessionKey"],
        "agent:echo:ws:direct:s1"
    );
    assert_eq!(last_delta["payload"]["agentId"], "echo");
    let seqs: Vec<u64> = c
        .events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "event seq grows: {seqs:?}"
    );

    let waited = c
        .call("agent.wait", json!({ "runId": run, "timeoutMs": 20_000 }))
        .await;
    assert_eq!(waited["status"], "ok", "{waited}");
    assert_eq!(waited["text"], "Hello, world");
    assert_eq!(waited["stopReason"], "stop");
    assert!(waited["endedAt"].as_u64() >= waited["startedAt"].as_u64());

    // The same idempotency key: the same run, answered, nothing runs again.
    let again = c.call("agent", params).await;
    assert_eq!(again["runId"], run.as_str());
    assert_eq!(again["duplicate"], true);
    assert_eq!(
        server.request_count(),
        1,
        "one model call for one idempotency key"
    );

    let task = c.call("tasks.get", json!({ "taskId": run })).await;
    assert_eq!(task["state"], "succeeded", "{task}");
    let history = c
        .call(
            "chat.history",
            json!({ "sessionKey": "agent:echo:ws:direct:s1" }),
        )
        .await;
    assert!(
        history["messages"].as_array().unwrap().len() >= 2,
        "{history}"
    );
}

#[actix_rt::test]
async fn a_wrong_token_is_refused_and_closed_with_1008_and_the_reason() {
    let server = ScriptedServer::start(vec![]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, res) = Client::connect(&up, "not-the-token").await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{res}");
    let (code, reason) = c.closed().await;
    assert_eq!(code, u16::from(CloseCode::Policy), "{reason}");
    assert!(reason.contains("wrong gateway token"), "{reason}");
}

#[actix_rt::test]
async fn a_request_before_connect_gets_an_error_then_the_connection_closes() {
    let server = ScriptedServer::start(vec![]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, challenge) = Client::open(&up).await;
    assert!(challenge["payload"]["nonce"].as_str().unwrap().len() >= 16);
    assert!(challenge["payload"]["ts"].as_u64().unwrap() > 0);
    let id = c.send("health", json!({})).await;
    let res = c.frame().await;
    assert_eq!(
        (res["type"].as_str(), res["id"].as_str()),
        (Some("res"), Some(id.as_str()))
    );
    assert_eq!(res["ok"], false);
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first request must be \"connect\"")
    );
    let (code, reason) = c.closed().await;
    assert_eq!(code, 1008, "{reason}");
}

#[actix_rt::test]
async fn unknown_methods_and_malformed_frames_get_errors_and_the_connection_stays_usable() {
    let server = ScriptedServer::start(vec![]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, hello) = Client::connect(&up, &up.token).await;
    assert_eq!(hello["ok"], true);

    let id = c.send("no.such.method", json!({})).await;
    let res = c.answer(&id).await;
    assert_eq!(res["ok"], false);
    assert_eq!(res["error"]["code"], "METHOD_NOT_FOUND", "{res}");
    assert_eq!(res["error"]["details"]["method"], "no.such.method");

    c.send_text("{not json".into()).await;
    let res = c.frame().await;
    assert_eq!(
        (res["type"].as_str(), res["ok"].as_bool()),
        (Some("res"), Some(false))
    );
    assert!(res["id"].is_null(), "no id could be read: {res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("frame: not JSON"),
        "{res}"
    );

    let id = c.send("agent.wait", json!({ "timeoutMs": 5 })).await;
    let res = c.answer(&id).await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert!(
        res["error"]["message"].as_str().unwrap().contains("runId"),
        "{res}"
    );

    let id = c
        .send("tasks.get", json!({ "taskId": uuid::Uuid::now_v7() }))
        .await;
    let res = c.answer(&id).await;
    assert_eq!(res["error"]["code"], "NOT_FOUND", "{res}");
    assert_eq!(res["error"]["details"]["code"], "unknown_task");

    let health = c.call("health", json!({})).await;
    assert_eq!(health["ok"], true, "{health}");
    let status = c.call("status", json!({})).await;
    assert_eq!(status["heartbeat"]["defaultAgentId"], "echo", "{status}");
    assert_eq!(
        status["sessions"]["byAgent"][0]["agentId"], "echo",
        "{status}"
    );
}

#[actix_rt::test]
async fn a_frame_over_max_payload_closes_the_connection_with_1009() {
    let server = ScriptedServer::start(vec![]).await;
    let p = project(
        &server,
        "[gateway]\nmax_body = 4096\nws_max_connections = 1\n",
        "",
    );
    let up = Up::start(&p).await;
    let (mut c, hello) = Client::connect(&up, &up.token).await;
    assert_eq!(hello["payload"]["policy"]["maxPayload"], 4096);
    // One connection at most: the next upgrade is refused.
    match tokio_tungstenite::connect_async(up.ws_url()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
        other => panic!("a second connection must be refused with 503: {other:?}"),
    }
    let big = json!({ "type": "req", "id": "big", "method": "health", "params": { "pad": "x".repeat(5000) } });
    c.send_text(big.to_string()).await;
    let (code, reason) = c.closed().await;
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("maxPayload"), "{reason}");
    // Its place is given back.
    crate::support::eventually("a new connection is accepted", async || {
        tokio_tungstenite::connect_async(up.ws_url()).await.is_ok()
    })
    .await;
}

#[actix_rt::test]
async fn an_exec_approval_reaches_the_client_and_is_resolved_over_the_socket() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "touch approved.txt" })),
        Turn::text("done"),
    ])
    .await;
    let ask = "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n";
    let p = project(&server, "", ask);
    let up = Up::start(&p).await;
    let (mut c, _) = Client::connect(&up, &up.token).await;
    let run = c
        .call(
            "agent",
            json!({ "message": "make the file", "agentId": "echo" }),
        )
        .await;
    let asked = c.event_where("exec.approval.requested", |_| true).await;
    let id = asked["payload"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        asked["payload"]["request"]["command"], "touch approved.txt",
        "{asked}"
    );
    assert_eq!(asked["payload"]["request"]["agentId"], "echo");
    let pending = c.call("exec.approval.list", json!({})).await;
    assert_eq!(pending[0]["id"], id.as_str(), "{pending}");
    assert_eq!(pending[0]["request"]["command"], "touch approved.txt");

    let resolved = c
        .call(
            "exec.approval.resolve",
            json!({ "id": id, "decision": "allow-once" }),
        )
        .await;
    assert_eq!(resolved["approval"]["state"], "allowed", "{resolved}");
    let waited = c
        .call(
            "agent.wait",
            json!({ "runId": run["runId"], "timeoutMs": 20_000 }),
        )
        .await;
    assert_eq!(waited["status"], "ok", "{waited}");
    assert_eq!(waited["text"], "done");
    assert!(p.state_dir().join("workspaces/echo/approved.txt").exists());
    let again = c
        .send(
            "exec.approval.resolve",
            json!({ "id": id, "decision": "deny" }),
        )
        .await;
    let res = c.answer(&again).await;
    assert_eq!(
        res["error"]["code"], "CONFLICT",
        "an answered request stays answered: {res}"
    );
}

#[actix_rt::test]
async fn clawbus_chat_streams_each_answer_and_keeps_the_conversation() {
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let mut cmd = p.clawbus();
    cmd.args([
        "chat",
        "--agent",
        "echo",
        "--session",
        "cli",
        "--url",
        &up.url,
    ])
    .stdin(Stdio::piped());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"first\nsecond\n/exit\n").unwrap();
    }
    let out = tokio::task::spawn_blocking(move || crate::support::wait_output(child))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("re: first\n"), "{stdout}");
    assert!(stdout.contains("re: second\n"), "{stdout}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains("re: first"),
        "one session: the second turn sees the first: {second}"
    );

    // EOF ends it too, and a wrong token is a usage error (exit 2).
    let mut cmd = p.clawbus();
    cmd.args(["chat", "--agent", "echo", "--url", &up.url])
        .env("CLAWBUS_TOKEN", "wrong")
        .stdin(Stdio::null());
    let out = run_cmd(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong gateway token"));
}

#[actix_rt::test]
async fn operator_methods_abort_runs_and_manage_cron_jobs_sessions_and_tasks() {
    let server = ScriptedServer::start(vec![
        Turn::hang(),
        Turn::text("cron done"),
        Turn::text("sent"),
    ])
    .await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, _) = Client::connect(&up, &up.token).await;

    // A run that hangs in the model, aborted by its session.
    let held = c
        .call(
            "chat.send",
            json!({ "message": "wait", "agentId": "echo", "sessionKey": "hold" }),
        )
        .await;
    assert_eq!(held["status"], "started");
    let run = held["runId"].as_str().unwrap().to_string();
    c.event_where("agent", |p| {
        p["runId"] == run.as_str() && p["data"]["phase"] == "model"
    })
    .await;
    let aborted = c
        .call(
            "chat.abort",
            json!({ "sessionKey": "hold", "agentId": "echo" }),
        )
        .await;
    assert_eq!(aborted["aborted"], true, "{aborted}");
    assert_eq!(aborted["runIds"], json!([run]));
    c.event_where("chat", |p| {
        p["runId"] == run.as_str() && p["state"] == "aborted"
    })
    .await;
    let waited = c.call("agent.wait", json!({ "runId": run })).await;
    assert_eq!(
        (waited["status"].as_str(), waited["stopReason"].as_str()),
        (Some("error"), Some("aborted"))
    );

    // Cron, in OpenClaw's shapes: add, list, status, update, run, runs, remove.
    let job = c
        .call(
            "cron.add",
            json!({
                "agentId": "echo", "name": "hourly", "enabled": true,
                "schedule": { "kind": "every", "everyMs": 3_600_000 },
                "sessionTarget": "isolated", "wakeMode": "now",
                "payload": { "kind": "agentTurn", "message": "report" },
                "delivery": { "mode": "none", "channel": "last" },
            }),
        )
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["schedule"]["everyMs"], 3_600_000, "{job}");
    let listed = c
        .call("cron.list", json!({ "limit": 200, "offset": 0 }))
        .await;
    let jobs = listed["jobs"].as_array().unwrap();
    assert!(jobs.iter().any(|j| j["id"] == id.as_str()), "{listed}");
    assert_eq!(listed["total"], jobs.len(), "{listed}");
    assert_eq!(listed["hasMore"], false, "{listed}");
    let status = c.call("cron.status", json!({})).await;
    assert!(status["nextWakeAtMs"].as_u64().is_some(), "{status}");
    let changed = c
        .call(
            "cron.update",
            json!({ "id": id, "patch": { "name": "renamed" } }),
        )
        .await;
    assert_eq!(changed["name"], "renamed", "{changed}");
    let fired = c.call("cron.run", json!({ "id": id })).await;
    let task = fired["runId"].as_str().unwrap().to_string();
    c.event_where("cron", |p| {
        p["job_id"] == id.as_str() && p["kind"] == "finished"
    })
    .await;
    let waited = c.call("agent.wait", json!({ "runId": task })).await;
    assert_eq!(waited["text"], "cron done", "{waited}");
    let runs = c.call("cron.runs", json!({ "id": id })).await;
    assert_eq!(runs["entries"][0]["status"], "ok", "{runs}");
    c.call("cron.remove", json!({ "id": id })).await;
    let id2 = c.send("cron.run", json!({ "id": id })).await;
    let gone = c.answer(&id2).await;
    assert_eq!(gone["error"]["code"], "NOT_FOUND", "{gone}");

    // Sessions and tasks.
    let sent = c
        .call(
            "sessions.send",
            json!({ "key": "agent:echo:ws:direct:hold", "message": "again" }),
        )
        .await;
    let waited = c
        .call("agent.wait", json!({ "runId": sent["runId"] }))
        .await;
    assert_eq!(waited["text"], "sent", "{waited}");
    let sessions = c.call("sessions.list", json!({ "agentId": "echo" })).await;
    let keys: Vec<&str> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"agent:echo:ws:direct:hold"), "{keys:?}");
    let tasks = c.call("tasks.list", json!({ "agentId": "echo" })).await;
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 3, "{tasks}");
    let late = c
        .call("tasks.cancel", json!({ "taskId": sent["runId"] }))
        .await;
    assert_eq!(
        late["cancelled"], false,
        "an ended task is not cancelled: {late}"
    );
}

/// `connect` params with a device identity signed over `nonce` (OpenClaw's `v3` payload) by
/// `key`, asking for `scopes`.
fn signed_connect(
    token: &str,
    nonce: &str,
    key: &ring::signature::Ed25519KeyPair,
    scopes: &[&str],
) -> Value {
    use base64::Engine as _;
    use ring::signature::KeyPair as _;
    use sha2::Digest as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw = key.public_key().as_ref();
    let id: String = sha2::Sha256::digest(raw)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let signed_at = chrono::Utc::now().timestamp_millis();
    let payload = format!(
        "v3|{id}|cli|cli|operator|{}|{signed_at}|{token}|{nonce}|linux|linux",
        scopes.join(",")
    );
    json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": { "id": "cli", "version": "2026.9.6", "platform": "linux", "deviceFamily": "Linux", "mode": "cli" },
        "role": "operator", "scopes": scopes,
        "auth": { "token": token },
        "device": {
            "id": id, "publicKey": b64.encode(raw),
            "signature": b64.encode(key.sign(payload.as_bytes()).as_ref()),
            "signedAt": signed_at, "nonce": nonce,
        },
    })
}

#[actix_rt::test]
async fn a_device_identity_signed_over_the_challenge_is_verified_and_a_bad_one_refused() {
    let server = ScriptedServer::start(vec![]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let rng = ring::rand::SystemRandom::new();
    let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let key = ring::signature::Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap();

    // Signed over this connection's nonce: accepted; scopes only within the token's.
    let (mut c, challenge) = Client::open(&up).await;
    let nonce = challenge["payload"]["nonce"].as_str().unwrap().to_string();
    let params = signed_connect(&up.token, &nonce, &key, &["operator.admin", "node.invoke"]);
    let id = c.send("connect", params).await;
    let hello = c.answer(&id).await;
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(
        hello["payload"]["auth"]["scopes"],
        json!(["operator.admin"]),
        "a scope the token does not allow is not granted: {hello}"
    );

    // Signed over another connection's nonce: refused, and closed.
    let (mut c, _) = Client::open(&up).await;
    let id = c
        .send(
            "connect",
            signed_connect(&up.token, &nonce, &key, &["operator.admin"]),
        )
        .await;
    let res = c.answer(&id).await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(
        res["error"]["details"]["code"], "DEVICE_AUTH_NONCE_MISMATCH",
        "{res}"
    );
    let (code, _) = c.closed().await;
    assert_eq!(code, u16::from(CloseCode::Policy));

    // A signature that does not match what was sent: refused.
    let (mut c, challenge) = Client::open(&up).await;
    let nonce = challenge["payload"]["nonce"].as_str().unwrap().to_string();
    let mut params = signed_connect(&up.token, &nonce, &key, &["operator.read"]);
    params["scopes"] = json!(["operator.admin"]);
    let id = c.send("connect", params).await;
    let res = c.answer(&id).await;
    assert_eq!(res["error"]["message"], "device signature invalid", "{res}");
    assert_eq!(
        res["error"]["details"]["code"],
        "DEVICE_AUTH_SIGNATURE_INVALID"
    );
    let (code, _) = c.closed().await;
    assert_eq!(code, u16::from(CloseCode::Policy));
}

#[actix_rt::test]
async fn each_method_needs_its_openclaw_scope_and_a_refusal_names_the_missing_one() {
    let server = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let connect_with = async |scopes: Value| {
        let (mut c, _) = Client::open(&up).await;
        let mut params = super::ws_client::connect_params(&up.token);
        params["scopes"] = scopes;
        let id = c.send("connect", params).await;
        assert_eq!(c.answer(&id).await["ok"], true);
        c
    };
    let mut reader = connect_with(json!(["operator.read"])).await;
    let id = reader.send("sessions.list", json!({})).await;
    assert_eq!(reader.answer(&id).await["ok"], true, "read reads");
    let id = reader
        .send(
            "chat.send",
            json!({ "sessionKey": "main", "message": "hi" }),
        )
        .await;
    let refused = reader.answer(&id).await;
    assert_eq!(refused["error"]["code"], "FORBIDDEN", "{refused}");
    assert_eq!(refused["error"]["message"], "missing scope: operator.write");
    assert_eq!(refused["error"]["details"]["code"], "MISSING_SCOPE");
    assert_eq!(server.requests().len(), 0, "nothing ran");

    let mut writer = connect_with(json!(["operator.write"])).await;
    let id = writer
        .send(
            "chat.send",
            json!({ "sessionKey": "main", "message": "hi" }),
        )
        .await;
    assert_eq!(writer.answer(&id).await["ok"], true, "write runs");
    let id = writer
        .send(
            "cron.add",
            json!({ "name": "x", "schedule": { "kind": "every", "everyMs": 60000 },
                    "sessionTarget": "isolated", "payload": { "kind": "agentTurn", "message": "m" } }),
        )
        .await;
    let refused = writer.answer(&id).await;
    assert_eq!(
        refused["error"]["message"], "missing scope: operator.admin",
        "{refused}"
    );
    let id = writer.send("exec.approval.list", json!({})).await;
    let refused = writer.answer(&id).await;
    assert_eq!(
        refused["error"]["message"], "missing scope: operator.approvals",
        "{refused}"
    );

    let mut none = connect_with(json!([])).await;
    let id = none.send("health", json!({})).await;
    assert_eq!(
        none.answer(&id).await["error"]["message"],
        "missing scope: operator.read",
        "a client that asked for no scope has none"
    );
}

#[actix_rt::test]
async fn skills_bins_lists_the_programs_every_agents_skills_need_once_each_sorted() {
    let server = ScriptedServer::start(Vec::new()).await;
    let p = project(&server, "", "");
    p.write("agents.d/other.toml", "").write(
        "skills/uvtool/SKILL.md",
        "---\nname: uvtool\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      bins: [uv-not-installed-here, git]\n---\n# Body\n",
    )
    .write(
        "skills/either/SKILL.md",
        "---\nname: either\ndescription: d\nmetadata: {\"openclaw\": {\"requires\": {\"anyBins\": [\"rg\", \"git\"]}}}\n---\n# Body\n",
    )
    .write(
        "skills/plain/SKILL.md",
        "---\nname: plain\ndescription: needs nothing\n---\n# Body\n",
    );
    let up = Up::start(&p).await;
    let (mut c, _) = Client::connect(&up, &up.token).await;
    let bins = c.call("skills.bins", json!({})).await;
    assert_eq!(
        bins,
        json!({ "bins": ["git", "rg", "uv-not-installed-here"] }),
        "OpenClaw's {{bins}}: all and any-of programs, once each, sorted"
    );
    let id = c.send("skills.bins", json!({ "agentId": "echo" })).await;
    let refused = c.answer(&id).await;
    assert_eq!(
        refused["ok"], false,
        "a field the schema does not define: {refused}"
    );
}

#[actix_rt::test]
async fn sessions_patch_many_archives_each_target_and_answers_an_outcome_for_each() {
    let server = ScriptedServer::start(vec![Turn::text("one"), Turn::text("two")]).await;
    let p = project(&server, "", "");
    let up = Up::start(&p).await;
    let (mut c, _) = Client::connect(&up, &up.token).await;
    let keys = ["agent:echo:ws:direct:a", "agent:echo:ws:direct:b"];
    for key in keys {
        let sent = c
            .call("sessions.send", json!({ "key": key, "message": "hi" }))
            .await;
        c.call("agent.wait", json!({ "runId": sent["runId"] }))
            .await;
    }
    let listed = |v: &Value| -> Vec<String> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["key"].as_str().unwrap().to_string())
            .collect()
    };
    let a = c.call("sessions.describe", json!({ "key": keys[0] })).await;
    let patched = c
        .call(
            "sessions.patchMany",
            json!({
                "targets": [
                    { "key": keys[0], "expectedSessionId": a["session"]["sessionId"] },
                    { "key": keys[1], "agentId": "echo" },
                    { "key": "agent:echo:ws:direct:none" },
                    { "key": keys[1], "expectedSessionId": "not-its-transcript" },
                ],
                "patch": { "archived": true, "pinned": true },
            }),
        )
        .await;
    let outcomes = patched["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 4, "{patched}");
    assert_eq!(outcomes[0], json!({ "ok": true, "key": keys[0] }));
    assert_eq!(
        outcomes[1],
        json!({ "ok": true, "key": keys[1], "agentId": "echo" })
    );
    assert_eq!(outcomes[2]["ok"], false, "{patched}");
    assert_eq!(outcomes[2]["error"]["code"], "NOT_FOUND", "{patched}");
    assert_eq!(outcomes[3]["error"]["code"], "INVALID_REQUEST", "{patched}");
    let shown = c.call("sessions.list", json!({})).await;
    assert!(listed(&shown).is_empty(), "both archived: {shown}");
    let archived = c.call("sessions.list", json!({ "archived": true })).await;
    let mut both = listed(&archived);
    both.sort();
    assert_eq!(both, keys);

    let back = c
        .call(
            "sessions.patchMany",
            json!({ "targets": [{ "key": keys[1] }], "patch": { "archived": false } }),
        )
        .await;
    assert_eq!(back["outcomes"][0]["ok"], true, "{back}");
    let shown = c.call("sessions.list", json!({})).await;
    assert_eq!(listed(&shown), [keys[1]]);
    let id = c
        .send(
            "sessions.patchMany",
            json!({ "targets": [{ "key": keys[1] }], "patch": { "nickname": "n" } }),
        )
        .await;
    let refused = c.answer(&id).await;
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nickname"),
        "{refused}"
    );
}
