//! What a turn logs at WARN, read from a real `clawbus up`'s stderr: a failed turn names its
//! cause, task id and request id; a tool call the model wrote as text (a small local model's
//! habit) ends the turn with that text, after one model call, and is logged once.

use super::system::{spawn_up_logging, stop};
use crate::support::{NET, Project, last_user};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

const JSON_CALL: &str = r#"{"name": "read", "arguments": {"path": "a.txt"}}"#;
const TAGGED_CALL: &str =
    "<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>";

async fn post(url: &str, token: &str, text: &str, request_id: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{url}/v1/agents/chat/tasks"))
        .bearer_auth(token)
        .json(&json!({ "text": text, "request_id": request_id, "wait": true }))
        .timeout(NET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
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
        let done = post(&child.url, &child.token, text, request_id).await;
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
    let failed = post(&child.url, &child.token, "break", "broken-1").await;
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
