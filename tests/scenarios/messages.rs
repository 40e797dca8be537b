//! What the CLI and the API say, on a `clawbus up` child: exit codes, a transcript line that is
//! not UTF-8, the `tasks list` header, a session after a restart, the 401 OpenAI's SDKs read,
//! `tail 'agent.>'`, and the offline `clawbus tools`.

use super::system::{stop, up};
use super::ws_client::{Client, Up};
use crate::support::{NET, Project, first_line_async, get_json, post_task, run_cmd, succeeded};
use serde_json::{Value, json};
use std::io::Write;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_an_unknown_agent_is_a_usage_error() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let up = Up::start(&project).await;
    let mut cmd = project.clawbus();
    cmd.args(["chat", "--agent", "nobody", "--url", &up.url])
        .stdin(Stdio::null());
    let out = run_cmd(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"nobody\"") && stderr.contains("echo"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_line_that_is_not_utf8_is_skipped_and_reported() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let up = Up::start(&project).await;
    let body = json!({ "text": "first", "session": "s", "wait": true });
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/agents/echo/tasks", up.url))
        .bearer_auth(&up.token)
        .json(&body)
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let dir = project.state_dir().join("sessions").join("echo");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(b"{\"type\":\"message\",\"text\":\"caf\xe9\"}\n")
        .unwrap();
    drop(f);

    let key = "agent:echo:api:direct:s";
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{key}", up.url))
        .bearer_auth(&up.token)
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let shown: Value = resp.json().await.unwrap();
    let entries = shown["entries"].as_array().unwrap();
    let bad = entries.last().unwrap();
    assert_eq!(bad["type"], "unreadable", "{bad}");
    assert!(bad["error"].as_str().unwrap().contains("UTF-8"), "{bad}");
    assert!(
        entries.iter().any(|e| e["type"] == "message"),
        "the good lines stay"
    );

    let mut cmd = project.clawbus();
    cmd.args(["sessions", "show", key, "--url", &up.url]);
    let out = succeeded(&run_cmd(cmd).await);
    assert!(
        out.contains("first") && out.contains("unreadable, skipped"),
        "{out}"
    );

    let (mut c, _) = Client::connect(&up, &up.token).await;
    let history = c.call("chat.history", json!({ "sessionKey": key })).await;
    assert_eq!(
        history["unreadable"], 1,
        "chat.history counts the unreadable line: {history}"
    );
    assert_eq!(history["messages"][0]["content"][0]["text"], "first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_list_has_a_header_and_a_session_after_a_restart_is_idle() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = up(&project).await;
    let body = json!({ "text": "hi", "session": "s", "wait": true });
    let (status, _) = post_task(&daemon, "echo", body).await;
    assert_eq!(status, 200);
    let mut cmd = project.clawbus();
    cmd.args(["tasks", "list", "--url", &daemon.url]);
    let out = succeeded(&run_cmd(cmd).await);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.starts_with("TASK") && header.contains("STATE"),
        "{out}"
    );
    assert!(
        lines.next().unwrap_or_default().contains("succeeded"),
        "{out}"
    );
    stop(daemon).await;

    let daemon = up(&project).await;
    let listed = get_json(&daemon, "/v1/sessions").await;
    let row = &listed["sessions"][0];
    assert_eq!(row["key"], "agent:echo:api:direct:s", "{listed}");
    assert_eq!(row["state"], "idle", "{listed}");
    assert_eq!(row["live"], false, "{listed}");
    stop(daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_endpoint_401_has_openais_type_and_bearer_is_taken_in_any_case() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = up(&project).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", daemon.url);
    let body = json!({ "model": "echo", "messages": [{ "role": "user", "content": "hi" }] });
    for auth in [None, Some("Bearer wrong".to_string())] {
        let mut req = http.post(&url).json(&body).timeout(NET);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401);
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
        assert!(answer["error"]["message"].as_str().is_some(), "{answer}");
    }
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let resp = http
            .get(format!("{}/v1/models", daemon.url))
            .header("authorization", format!("{scheme} {}", daemon.token))
            .timeout(NET)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{scheme}");
    }
    stop(daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_of_agent_topics_shows_the_task_messages() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = up(&project).await;
    let mut cmd = project.clawbus();
    cmd.args(["tail", "agent.>", "--url", &daemon.url])
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let first = tokio::spawn(first_line_async(child.stdout.take().unwrap()));
    // The tail subscribes once it connects: post until it has printed a line (bounded).
    for i in 0..100 {
        if first.is_finished() {
            break;
        }
        let (status, _) = post_task(&daemon, "echo", json!({ "text": format!("t{i}") })).await;
        assert_eq!(status, 202);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let line = first.await.unwrap();
    let message: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(message["topic"], "agent.echo", "{line}");
    assert_eq!(message["kind"], "task", "{line}");
    assert!(
        message["payload"]["text"]
            .as_str()
            .unwrap()
            .starts_with('t'),
        "{line}"
    );
    let _ = child.kill();
    let _ = child.wait();
    stop(daemon).await;
}

#[test]
fn offline_tools_explains_agent_call_without_a_bus() {
    let project = Project::new();
    project
        .write(
            "agents.d/a.toml",
            "may_call = [\"b\"]\n[tools]\nprofile = \"full\"\n",
        )
        .write("agents.d/b.toml", "");
    let out = crate::support::output({
        let mut cmd = project.clawbus();
        cmd.args(["tools", "--agent", "a"]);
        cmd
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("no bus in this process"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("agent_call"))
        .unwrap_or_else(|| panic!("agent_call is listed: {stdout}"));
    assert!(line.contains("offered when the daemon runs"), "{line}");
}
