//! Sessions, the session lane, transcripts, cancellation, eviction and compaction, end to end.

use crate::support::{
    NET, Project, eventually, get_json, in_fresh_system, last_user, post_task, succeeded,
};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// A model that never answers the message `word` (or, with `prefix`, any message starting with
/// it) and answers the rest with `re: <message>` (`echo`) or `ok`.
async fn hang_on(word: &'static str, prefix: bool, echo: bool) -> ScriptedServer {
    ScriptedServer::with_responder(move |req| {
        let user = last_user(req);
        let hang = if prefix {
            user.starts_with(word)
        } else {
            user == word
        };
        match (hang, echo) {
            (true, _) => Turn::hang(),
            (false, true) => Turn::text(format!("re: {user}")),
            (false, false) => Turn::text("ok"),
        }
    })
    .await
}

/// Answers every request with `re: <last user message>`.
async fn echo_server() -> ScriptedServer {
    ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await
}

fn project_on(server: &ScriptedServer) -> Project {
    let p = Project::new();
    p.with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", "");
    p
}

async fn wait_task(daemon: &clawbus::daemon::Daemon, task_id: &str, state: &str) -> Value {
    let rid = daemon
        .bus()
        .task(task_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap()
        .request_id;
    let rec = daemon.bus().wait(&rid, NET).await.unwrap();
    assert_eq!(rec.state.as_str(), state, "{rec:?}");
    get_json(daemon, &format!("/v1/tasks/{task_id}")).await
}

#[actix_rt::test]
async fn hundred_tasks_on_one_session_run_one_at_a_time_in_arrival_order() {
    let server = echo_server().await;
    let project = project_on(&server);
    let daemon = project.start().await;
    let mut ids = Vec::new();
    for i in 0..100 {
        // Each post is journaled and acknowledged before the next: that is the arrival order.
        let (status, body) = post_task(
            &daemon,
            "chat",
            json!({ "text": format!("msg {i}"), "session": "one" }),
        )
        .await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["task_id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        wait_task(&daemon, id, "succeeded").await;
    }
    assert_eq!(
        server.max_concurrency(),
        1,
        "one session runs one turn at a time"
    );
    let order: Vec<String> = server.requests().iter().map(last_user).collect();
    let expected: Vec<String> = (0..100).map(|i| format!("msg {i}")).collect();
    assert_eq!(order, expected, "runs happen in arrival order");
    let last = server.requests().pop().unwrap();
    assert_eq!(
        last["messages"].as_array().unwrap().len(),
        1 + 99 * 2 + 1,
        "the session's history is sent"
    );
    let sessions = get_json(&daemon, "/v1/sessions?agent=chat").await;
    let row = &sessions["sessions"][0];
    assert_eq!(row["key"], "agent:chat:api:direct:one");
    assert_eq!(row["turns"], 100);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn cancel_removes_a_queued_run_at_once_and_stops_a_running_one() {
    // The first request hangs (a model that never answers); later ones echo.
    let server = hang_on("slow", false, true).await;
    let project = project_on(&server);
    let daemon = project.start().await;
    let post =
        |text: &'static str| post_task(&daemon, "chat", json!({ "text": text, "session": "c" }));
    let (_, slow) = post("slow").await;
    let (_, queued) = post("queued").await;
    let (_, after) = post("after").await;
    // Wait until the slow turn is really at the model.
    eventually("the model has 1 request", async || {
        server.request_count() >= 1
    })
    .await;
    let http = reqwest::Client::new();
    let cancel = |id: &str| {
        http.post(format!("{}/v1/tasks/{id}/cancel", daemon.url()))
            .bearer_auth(daemon.token())
            .timeout(NET)
            .send()
    };
    let r: Value = cancel(queued["task_id"].as_str().unwrap())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        r["state"], "cancelled",
        "a queued run is cancelled at once: {r}"
    );
    let r: Value = cancel(slow["task_id"].as_str().unwrap())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["state"], "cancelled", "{r}");
    let done = wait_task(&daemon, after["task_id"].as_str().unwrap(), "succeeded").await;
    assert_eq!(
        done["result"]["text"], "re: after",
        "the run behind them proceeds"
    );
    let users: Vec<String> = server.requests().iter().map(last_user).collect();
    assert!(
        !users.contains(&"queued".to_string()),
        "the cancelled queued run never reached the model: {users:?}"
    );
    let r = cancel(slow["task_id"].as_str().unwrap()).await.unwrap();
    assert_eq!(r.status(), 409, "cancelling an ended task is a conflict");
    let shown = get_json(&daemon, "/v1/sessions/agent:chat:api:direct:c").await;
    let ended: Vec<&Value> = shown["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "run_ended")
        .collect();
    assert_eq!(
        ended.len(),
        1,
        "the transcript records the cancelled running turn: {shown}"
    );
    assert_eq!(ended[0]["outcome"], "cancelled");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_torn_transcript_line_is_set_aside_and_the_session_continues() {
    let server = echo_server().await;
    let project = project_on(&server);
    // The first life of the process runs in its own actix System, which is gone (and the state
    // dir released) when it returns, like a process that ended.
    let config = project.load();
    let first = in_fresh_system(move || async move {
        let daemon =
            clawbus::daemon::Daemon::start(config, clawbus::daemon::StartOptions::free_port())
                .await
                .unwrap();
        let (_, first) = post_task(
            &daemon,
            "chat",
            json!({ "text": "remember the tulips", "session": "t", "wait": true }),
        )
        .await;
        daemon.shutdown().await;
        first
    })
    .await;
    assert_eq!(first["state"], "succeeded", "{first}");

    let dir = project.state_dir().join("sessions/chat");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let lines_before = std::fs::read_to_string(&file).unwrap().lines().count();
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(br#"{"id":"01930000-0000-7000-8000-000000000000","ts":5,"type":"message","message":{"role":"assi"#).unwrap();
    drop(f);

    let daemon = project.start().await;
    let (_, second) = post_task(
        &daemon,
        "chat",
        json!({ "text": "what flowers?", "session": "t", "wait": true }),
    )
    .await;
    assert_eq!(second["state"], "succeeded", "{second}");
    let last = server.requests().pop().unwrap();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"remember the tulips"),
        "history from before the crash is intact: {contents:?}"
    );
    let corrupt = file.with_extension("jsonl.corrupt");
    assert!(std::fs::read_to_string(corrupt).unwrap().contains("assi"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().count() > lines_before);
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "no torn line is left behind"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn evicted_sessions_reload_with_their_history() {
    let server = echo_server().await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[sessions]\nmax_live = 10\n")
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    for round in 0..2 {
        for s in 0..30 {
            let (_, r) = post_task(&daemon, "chat", json!({ "text": format!("round {round} in s{s}"), "session": format!("s{s}"), "wait": true })).await;
            assert_eq!(r["state"], "succeeded", "{r}");
            let live = get_json(&daemon, "/v1/sessions?agent=chat").await["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["live"] == true)
                .count();
            assert!(live <= 10, "at most 10 live sessions, saw {live}");
        }
    }
    let reqs = server.requests();
    for s in 0..30 {
        let second = reqs
            .iter()
            .find(|r| last_user(r) == format!("round 1 in s{s}"))
            .unwrap();
        let contents: Vec<&str> = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect();
        assert!(
            contents.contains(&format!("round 0 in s{s}").as_str()),
            "session s{s} came back with its history: {contents:?}"
        );
    }
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn compaction_runs_a_flush_turn_then_summarises_and_keeps_every_line() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        if user.starts_with("[memory flush]") {
            Turn::text("NO_REPLY")
        } else if req["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Summarise the conversation")
        {
            Turn::text("SUMMARY: the user talked about numbers")
        } else {
            Turn::text(format!("re: {user} {}", "x".repeat(400)))
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", "[session]\ncontext_window = 1000\ncompaction_threshold = 0.75\nkeep_recent_messages = 2\n");
    let daemon = project.start().await;
    let mut turn = 0;
    let mut last = Value::Null;
    while !server
        .requests()
        .iter()
        .any(|r| last_user(r).starts_with("[memory flush]"))
    {
        assert!(
            turn < 20,
            "compaction must trigger within 20 turns of ~100 tokens in a 1000-token window"
        );
        let (_, r) = post_task(
            &daemon,
            "chat",
            json!({ "text": format!("number {turn}"), "session": "long", "wait": true }),
        )
        .await;
        assert_eq!(r["state"], "succeeded", "{r}");
        last = r;
        turn += 1;
    }
    let reqs = server.requests();
    let flush_at = reqs
        .iter()
        .position(|r| last_user(r).starts_with("[memory flush]"))
        .unwrap();
    let summary_at = reqs
        .iter()
        .position(|r| {
            r["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Summarise")
        })
        .unwrap();
    assert_eq!(
        summary_at,
        flush_at + 1,
        "the flush turn runs first, then the summary"
    );
    // The compacting task's usage counts the flush and summary calls with its own.
    let reported: u64 = reqs[flush_at..]
        .iter()
        .map(|r| (r["messages"].to_string().len() / 4) as u64)
        .sum();
    assert_eq!(reqs.len(), flush_at + 3, "flush, summary, the turn's call");
    assert_eq!(last["result"]["usage"]["prompt_tokens"], reported, "{last}");
    let after = &reqs[summary_at + 1];
    assert!(
        after["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY: the user talked about numbers"),
        "the model now sees the summary"
    );
    assert!(
        after["messages"].as_array().unwrap().len()
            < reqs[flush_at]["messages"].as_array().unwrap().len()
    );

    let shown = get_json(&daemon, "/v1/sessions/agent:chat:api:direct:long").await;
    let entries = shown["entries"].as_array().unwrap();
    let users: Vec<&str> = entries
        .iter()
        .filter(|e| {
            e["type"] == "message" && e["message"]["role"] == "user" && e["silent"].is_null()
        })
        .map(|e| e["message"]["content"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..turn).map(|i| format!("number {i}")).collect();
    assert_eq!(
        users, expected,
        "the transcript still holds every original message"
    );
    assert_eq!(
        entries.iter().filter(|e| e["type"] == "compaction").count(),
        1
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn sessions_and_tasks_from_the_cli() {
    let server = hang_on("hang", false, true).await;
    let project = project_on(&server);
    let daemon = project.start().await;
    let (_, r) = post_task(
        &daemon,
        "chat",
        json!({ "text": "hello", "session": "cli", "wait": true }),
    )
    .await;
    assert_eq!(r["state"], "succeeded");
    let (_, hung) = post_task(
        &daemon,
        "chat",
        json!({ "text": "hang", "session": "other" }),
    )
    .await;
    eventually("the model has 2 requests", async || {
        server.request_count() >= 2
    })
    .await;
    let url = daemon.url();
    let token = daemon.token().to_string();
    let run = move |args: Vec<String>| {
        let (url, token) = (url.clone(), token.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_clawbus"))
                .args(&args)
                .args(["--url", &url])
                .env("CLAWBUS_TOKEN", &token)
                .env("RUST_LOG", "warn")
                .output()
                .unwrap()
        })
    };
    let out = run(vec![
        "sessions".into(),
        "--agent".into(),
        "chat".into(),
        "--json".into(),
    ])
    .await
    .unwrap();
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"agent:chat:api:direct:cli")
            && keys.contains(&"agent:chat:api:direct:other"),
        "{keys:?}"
    );
    let other = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "agent:chat:api:direct:other")
        .unwrap();
    assert_eq!(other["state"], "processing");

    let out = run(vec![
        "sessions".into(),
        "show".into(),
        "agent:chat:api:direct:cli".into(),
    ])
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("user: hello") && text.contains("assistant: re: hello"),
        "readable transcript:\n{text}"
    );

    let out = run(vec![
        "tasks".into(),
        "cancel".into(),
        hung["task_id"].as_str().unwrap().into(),
    ])
    .await
    .unwrap();
    succeeded(&out);
    let out = run(vec![
        "tasks".into(),
        "cancel".into(),
        hung["task_id"].as_str().unwrap().into(),
    ])
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "cancelling an ended task fails");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_deadline_bounds_the_wait_for_a_lane_slot() {
    let server = hang_on("hog", false, false).await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[lanes]\nmain = 1\n")
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    post_task(&daemon, "chat", json!({ "text": "hog", "session": "a" })).await;
    eventually("the model has 1 request", async || {
        server.request_count() >= 1
    })
    .await;
    let (_, late) = post_task(
        &daemon,
        "chat",
        json!({ "text": "late", "session": "b", "deadline_ms": 100, "wait": true }),
    )
    .await;
    assert_eq!(
        late["state"], "timed_out",
        "the only main slot is held; the deadline ends the wait: {late}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "the late run never reached the model"
    );
    daemon.shutdown().await;
}

/// Polls the agent's session listing until `ok` holds for the row of `key`.
async fn until_session(daemon: &clawbus::daemon::Daemon, key: &str, ok: impl Fn(&Value) -> bool) {
    let what = format!("session {key} reaches the expected state");
    eventually(&what, async || {
        let rows = get_json(daemon, "/v1/sessions?agent=chat").await;
        rows["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .is_some_and(&ok)
    })
    .await;
}

#[actix_rt::test]
async fn a_task_cancelled_before_its_turn_does_not_wait_for_a_lane_slot() {
    let server = hang_on("hang", true, false).await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[lanes]\nmain = 1\n")
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    let b = "agent:chat:api:direct:b";
    let (_, first) = post_task(&daemon, "chat", json!({ "text": "hang 1", "session": "b" })).await;
    eventually("the model has 1 request", async || {
        server.request_count() >= 1
    })
    .await;
    let (_, queued) = post_task(&daemon, "chat", json!({ "text": "x", "session": "b" })).await;
    until_session(&daemon, b, |r| r["queued"] == 1).await;
    // Cancelled in the ledger, but its notice never reaches the session (as when it came first).
    let task_id: uuid::Uuid = queued["task_id"].as_str().unwrap().parse().unwrap();
    let rid = daemon
        .bus()
        .task(task_id)
        .await
        .unwrap()
        .unwrap()
        .request_id;
    let reason = "cancelled, notice missed".to_string();
    daemon
        .system()
        .ledger()
        .complete(&rid, bus::Outcome::Cancelled { reason })
        .await
        .unwrap();
    // Another session queues for the only main slot, then takes it and holds it.
    let (_, other) = post_task(&daemon, "chat", json!({ "text": "hang 2", "session": "c" })).await;
    let other_id: uuid::Uuid = other["task_id"].as_str().unwrap().parse().unwrap();
    eventually("the other session waits for the main lane", async || {
        daemon
            .lanes()
            .status()
            .await
            .unwrap()
            .iter()
            .any(|l| l.waiting.contains(&other_id))
    })
    .await;
    let cancelled = reqwest::Client::new()
        .post(format!(
            "{}/v1/tasks/{}/cancel",
            daemon.url(),
            first["task_id"].as_str().unwrap()
        ))
        .bearer_auth(daemon.token())
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    until_session(&daemon, b, |r| r["state"] == "idle" && r["queued"] == 0).await;
    let lanes = daemon.lanes().status().await.unwrap();
    let main = lanes.iter().find(|l| l.name == "main").unwrap();
    assert!(
        !main.waiting.contains(&task_id),
        "the cancelled task must not queue for a slot: {main:?}"
    );
    // The other session's run reaches the model once the first run's slot is free.
    eventually("the other session reaches the model", async || {
        server.request_count() >= 2
    })
    .await;
    assert_eq!(server.request_count(), 2, "it never reached the model");
    daemon.shutdown().await;
}

/// `POST /v1/sessions/{key}/compact`: a summary of the older turns that the next turn starts
/// from; a session with a run in progress is refused (409), as are an unknown session (404)
/// and `max_lines: 0` (400).
#[actix_rt::test]
async fn compact_over_http_summarises_between_runs_and_refuses_a_busy_or_unknown_session() {
    let server = ScriptedServer::with_responder(|req| {
        let system = req["messages"][0]["content"].as_str().unwrap_or_default();
        if system.starts_with("Summarise the conversation") {
            return Turn::text("the tulips were discussed");
        }
        match last_user(req).as_str() {
            "slow" => Turn::hang(),
            user => Turn::text(format!("re: {user}")),
        }
    })
    .await;
    let project = project_on(&server);
    let daemon = project.start().await;
    let say = |text: &'static str| {
        post_task(
            &daemon,
            "chat",
            json!({ "text": text, "session": "t", "wait": true }),
        )
    };
    for text in ["tulips", "more tulips"] {
        let (status, body) = say(text).await;
        assert_eq!(status, 200, "{body}");
    }
    let key = "agent:chat:api:direct:t";
    let path = format!("/v1/sessions/{key}/compact");
    let (status, body) = crate::support::post_json(&daemon, &path, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let c = &body["compaction"];
    assert_eq!(c["compacted"], true, "{body}");
    assert_eq!(c["kept"], 0, "a short session is summarised whole: {body}");
    assert_eq!(c["summary"], "the tulips were discussed", "{body}");
    assert!(
        c["tokens_after"].as_u64() < c["tokens_before"].as_u64(),
        "{body}"
    );
    let (_, next) = say("and now?").await;
    assert_eq!(next["state"], "succeeded", "{next}");
    let asked = server.requests().last().unwrap()["messages"].to_string();
    assert!(
        asked.contains("the tulips were discussed") && !asked.contains("more tulips"),
        "the next turn starts from the summary: {asked}"
    );

    let (status, body) = crate::support::post_json(&daemon, &path, json!({ "max_lines": 0 })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_body")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_lines"),
        "{body}"
    );
    let unknown = "/v1/sessions/agent:chat:api:direct:none/compact";
    let (status, body) = crate::support::post_json(&daemon, unknown, json!({})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("unknown_session")),
        "{body}"
    );

    let (_, slow) = post_task(&daemon, "chat", json!({ "text": "slow", "session": "b" })).await;
    let busy = "/v1/sessions/agent:chat:api:direct:b/compact";
    eventually("the slow turn is at the model", async || {
        server.requests().iter().any(|r| last_user(r) == "slow")
    })
    .await;
    let (status, body) = crate::support::post_json(&daemon, busy, json!({ "max_lines": 1 })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("session_busy")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has an active run"),
        "{body}"
    );
    let cancel = format!("/v1/tasks/{}/cancel", slow["task_id"].as_str().unwrap());
    let (status, body) = crate::support::post_json(&daemon, &cancel, json!({})).await;
    assert_eq!(status, 200, "{body}");
    daemon.shutdown().await;
}
