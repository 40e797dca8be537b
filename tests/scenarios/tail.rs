//! `clawbus tail PATTERN`: bus traffic matching the pattern, one JSON line per message.

use crate::support::{Project, first_line_async, line_async, post_task, wait_child_async};
use serde_json::{Value, json};
use std::process::Stdio;

#[actix_rt::test]
async fn tail_prints_task_events_as_json_lines() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let mut cmd = project.clawbus();
    cmd.args(["tail", "events.task.>", "--url", &daemon.url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    // The tail says on stderr when its subscription is live; only then is the task posted.
    let _stderr = line_async(stderr, "tail: subscribed to 'events.task.>'").await;
    let (status, body) = post_task(&daemon, "echo", json!({ "text": "t" })).await;
    assert_eq!(status, 202, "{body}");
    let line = first_line_async(stdout).await;
    let message: Value = serde_json::from_str(line.trim()).unwrap();
    let topic = message["topic"].as_str().unwrap();
    assert!(topic.starts_with("events.task."), "{line}");
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    wait_child_async(child).await;
    daemon.shutdown().await;
}
