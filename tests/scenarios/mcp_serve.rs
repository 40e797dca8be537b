//! `clawbus mcp serve` driven by the official MCP Python SDK's stdio client
//! (`tests/scenarios/testdata/mcp_serve_client.py`, run by `CLAWBUS_TEST_MCP_PYTHON`) against a
//! `clawbus up` child on the scripted model; skipped without it, failed under `CI=true`.

use super::mcp::python;
use super::system::{Child, spawn_up_logging, stop};
use crate::support::{Project, run_cmd};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::process::Stdio;

/// Runs the Python client against `clawbus mcp serve` for `child`: lists the tools, makes the
/// `plan`'s calls in order, and returns `{tools, calls: [{error, text}]}`.
pub(super) async fn drive(
    py: &str,
    p: &Project,
    child: &Child,
    plan: Value,
    token: Option<&str>,
) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios/testdata/mcp_serve_client.py"
    );
    let mut cmd = std::process::Command::new(py);
    cmd.args([
        script,
        env!("CARGO_BIN_EXE_clawbus"),
        p.path().to_str().unwrap(),
        &child.url,
        &plan.to_string(),
    ]);
    cmd.env_remove("CLAWBUS_TOKEN");
    if let Some(token) = token {
        cmd.env("CLAWBUS_TOKEN", token);
    }
    let out = run_cmd(cmd).await;
    assert!(
        out.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A call's `(error, text)`.
fn answer(call: &Value) -> (bool, &str) {
    (
        call["error"].as_bool().unwrap(),
        call["text"].as_str().unwrap(),
    )
}

async fn up(p: &Project) -> Child {
    let mut cmd = p.clawbus();
    cmd.args(["up", "--port", "0"]);
    spawn_up_logging(p, cmd, Stdio::null()).await
}

#[actix_rt::test]
async fn mcp_serve_hands_tasks_to_the_exposed_agents_with_progress_and_a_repeated_request_id_runs_once()
 {
    let Some(py) = python() else { return };
    let model = ScriptedServer::start(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ])
    .await;
    let p = Project::new();
    p.with_mock_and(&model.base_url(), "[mcp.serve]\nagents = [\"a\"]\n")
        .write("agents.d/a.toml", "description = \"answers questions\"\n")
        .write("agents.d/hidden.toml", "");
    let child = up(&p).await;
    let plan = json!([
        ["list_agents", {}],
        ["ask_a", { "task": "one", "request_id": "r1" }],
        // Progress comes from the task's events, replayed from the start.
        ["ask_a", { "task": "one", "request_id": "r1" }, "progress"],
        ["ask_a", { "task": "two", "request_id": "r2", "wait": false }],
        // The same request id again, waiting: the task already posted, not a new one.
        ["ask_a", { "task": "two", "request_id": "r2" }, "progress"],
        ["task_status", { "task_id": "$task_id" }],
        ["task_result", { "task_id": "$task_id" }],
        ["task_result", { "task_id": "no-such-task" }],
        ["ask_a", { "task": " " }],
    ]);
    let out = drive(&py, &p, &child, plan, None).await;
    stop(child).await;

    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["ask_a", "list_agents", "task_status", "task_result"],
        "only the [mcp.serve] agents are tools"
    );
    let calls = out["calls"].as_array().unwrap();
    let agents: Value = serde_json::from_str(calls[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1, "{agents}");
    assert_eq!(agents["agents"][0]["id"], "a", "{agents}");
    assert_eq!(agents["agents"][0]["description"], "answers questions");
    assert_eq!(answer(&calls[1]), (false, "first answer"));
    assert_eq!(answer(&calls[2]), (false, "first answer"));
    assert_eq!(calls[1]["progress"], json!([]), "no progress unless asked");
    let progress = calls[2]["progress"].as_array().unwrap();
    assert!(
        progress.first() == Some(&json!("queued")) && progress.last() == Some(&json!("terminal")),
        "{progress:?}"
    );
    assert!(progress.contains(&json!("model_call")), "{progress:?}");
    let queued: Value = serde_json::from_str(calls[3]["text"].as_str().unwrap()).unwrap();
    assert!(
        queued["task_id"].as_str().is_some_and(|t| !t.is_empty()),
        "{queued}"
    );
    assert_eq!(answer(&calls[4]), (false, "second answer"));
    assert!(
        calls[4]["progress"]
            .as_array()
            .unwrap()
            .contains(&json!("terminal")),
        "{}",
        calls[4]
    );
    let status: Value = serde_json::from_str(calls[5]["text"].as_str().unwrap()).unwrap();
    assert_eq!(status["task_id"], queued["task_id"], "{status}");
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(answer(&calls[6]), (false, "second answer"));
    assert_eq!(calls[7]["error"], true, "{}", calls[7]);
    assert_eq!(calls[8]["error"], true, "{}", calls[8]);
    assert!(
        calls[8]["text"]
            .as_str()
            .unwrap()
            .contains("task: missing or empty"),
        "{}",
        calls[8]
    );
    assert_eq!(
        model.requests().len(),
        2,
        "each request id ran once: two model calls for four asks"
    );
}

#[actix_rt::test]
async fn mcp_serve_with_a_wrong_token_answers_each_call_with_the_gateways_refusal() {
    let Some(py) = python() else { return };
    let p = Project::new();
    p.write("clawbus.toml", "[mcp.serve]\nagents = [\"a\"]\n")
        .write("agents.d/a.toml", "");
    let child = up(&p).await;
    let plan = json!([["list_agents", {}], ["ask_a", { "task": "hi" }]]);
    let out = drive(&py, &p, &child, plan, Some("not-the-token")).await;
    let task_count = crate::support::get_json(&child, "/v1/tasks").await;
    stop(child).await;
    for call in out["calls"].as_array().unwrap() {
        let (error, text) = answer(call);
        assert!(error && text.contains("401"), "{call}");
    }
    assert_eq!(
        task_count["tasks"].as_array().map(Vec::len),
        Some(0),
        "{task_count}"
    );
}
