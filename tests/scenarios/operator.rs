//! What a real `clawbus up` tells its operator about model calls, read from its stderr and its
//! CLI: a failed turn logs its cause, task id and request id at WARN; a tool call the model wrote
//! as text (a small local model's habit) ends the turn with that text, after one model call, and
//! is logged once; `clawbus status` and `/metrics` show the circuit breakers.

use super::system::{Child, spawn_up_logging, stop};
use crate::support::{Project, get_text, last_user, post_task};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

const JSON_CALL: &str = r#"{"name": "read", "arguments": {"path": "a.txt"}}"#;
const TAGGED_CALL: &str =
    "<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>";

async fn post(child: &Child, text: &str, request_id: &str) -> Value {
    let body = json!({ "text": text, "request_id": request_id, "wait": true });
    post_task(child, "chat", body).await.1
}

#[actix_rt::test]
async fn prose_tool_calls_end_the_turn_and_a_failed_turn_logs_its_cause_with_its_ids() {
    let server = ScriptedServer::with_responder(|req| match last_user(req).as_str() {
        "json" => Turn::text(JSON_CALL),
        "tagged" => Turn::text(TAGGED_CALL),
        _ => Turn::http_error(400),
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", "[tools]\nprofile = \"minimal\"\n")
        .write("agents.d/chat/a.txt", "alpha\n");
    let log_path = project.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]).env("RUST_LOG", "info");
    let child = spawn_up_logging(&project, cmd, log.into()).await;

    let mut answered = Vec::new();
    for (text, request_id, expected) in [
        ("json", "prose-1", JSON_CALL),
        ("tagged", "prose-2", TAGGED_CALL),
    ] {
        let done = post(&child, text, request_id).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(
            done["result"]["text"], expected,
            "the text is the answer: {done}"
        );
        answered.push(done["task_id"].as_str().unwrap().to_string());
    }
    assert_eq!(
        server.request_count(),
        2,
        "one model call per turn, no retry"
    );
    let failed = post(&child, "break", "broken-1").await;
    assert_eq!(failed["state"], "failed", "{failed}");
    let failed_id = failed["task_id"].as_str().unwrap().to_string();
    stop(child).await;

    let log = std::fs::read_to_string(&log_path).unwrap();
    let warns: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    for (task_id, request_id) in [(&answered[0], "prose-1"), (&answered[1], "prose-2")] {
        let lines: Vec<&&str> = warns
            .iter()
            .filter(|l| {
                l.contains("tool call as text") && l.contains(&format!("task_id={task_id}"))
            })
            .collect();
        assert_eq!(lines.len(), 1, "logged once for {request_id}:\n{log}");
        assert!(
            lines[0].contains(&format!("request_id=\"{request_id}\"")),
            "{log}"
        );
        assert!(lines[0].contains("tool=read"), "{log}");
    }
    let cause: Vec<&&str> = warns
        .iter()
        .filter(|l| l.contains("Turn failed.") && l.contains(&format!("task_id={failed_id}")))
        .collect();
    assert_eq!(cause.len(), 1, "{log}");
    assert!(
        cause[0].contains("request_id=\"broken-1\"") && cause[0].contains("HTTP 400"),
        "the cause and both ids: {log}"
    );
}

#[actix_rt::test]
async fn clawbus_status_and_metrics_show_a_breaker_opened_by_five_failures() {
    let down = ScriptedServer::with_responder(|_| Turn::http_error(503)).await;
    let backup = ScriptedServer::with_responder(|_| Turn::text("from the backup")).await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.down]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\n\
                 [providers.backup]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n",
                down.base_url(),
                backup.base_url()
            ),
        )
        .write(
            "agents.d/chat.toml",
            "model = \"down/m\"\nfallbacks = [\"backup/m\"]\n",
        );
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]);
    let child = spawn_up_logging(&project, cmd, std::process::Stdio::null()).await;
    for i in 0..6 {
        let done = post(&child, "hi", &format!("b-{i}")).await;
        assert_eq!(done["result"]["text"], "from the backup", "{done}");
    }
    assert_eq!(
        down.request_count(),
        5,
        "open after five: the sixth went straight to the backup"
    );

    let status = |json: bool| {
        let mut cmd = project.clawbus();
        cmd.args(["status", "--url", &child.url])
            .env("CLAWBUS_TOKEN", &child.token);
        if json {
            cmd.arg("--json");
        }
        cmd
    };
    let out = crate::support::run_cmd(status(true)).await;
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let breaker = |name: &str| {
        answer["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["provider"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no breaker {name}: {answer}"))
    };
    assert_eq!(breaker("down")["state"], "open", "{answer}");
    assert_eq!(breaker("down")["failures"], 5, "{answer}");
    assert!(breaker("down")["retry_in_ms"].as_u64().unwrap() <= 30_000);
    assert_eq!(breaker("backup")["state"], "closed", "{answer}");
    assert_eq!(answer["agents"][0]["fallbacks"][0], "backup/m", "{answer}");
    let out = crate::support::run_cmd(status(false)).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.contains("down")
            && l.contains("open")
            && l.contains("5 consecutive failures")),
        "{text}"
    );

    let metrics = get_text(&child, "/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "clawbus_model_breaker_state{provider=\"down\"} 2"),
        "{metrics}"
    );
    stop(child).await;
}
