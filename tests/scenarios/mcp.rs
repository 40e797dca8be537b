//! MCP servers as tool sources in the daemon and the CLI, against a server written on the
//! official Python SDK (`actors/runtime/mcp/testdata/server.py`) run by the Python that
//! `CLAWBUS_TEST_MCP_PYTHON` names; skipped without it, failed under `CI=true`.

use crate::support::{Project, offered_tools, post_task, run_cmd, tool_results};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// The Python with the MCP SDK, or `None` (the test is skipped; a failure under `CI=true`).
pub(super) fn python() -> Option<String> {
    clawbus::testkit::mcp_python_or_skip()
}

fn server_toml(python: &str) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/actors/runtime/mcp/testdata/server.py"
    );
    format!("[mcp.servers.py]\ncommand = {python:?}\nargs = [{script:?}]\ntimeout = \"30s\"\n")
}

#[actix_rt::test]
async fn an_agent_of_the_daemon_calls_an_mcp_tool_and_a_denied_one_is_never_offered() {
    let Some(py) = python() else { return };
    let model = ScriptedServer::start(vec![
        Turn::tool_call("mcp__py__add", json!({ "a": 40, "b": 2 })),
        Turn::text("it is 42"),
    ])
    .await;
    let p = Project::new();
    p.with_mock_and(&model.base_url(), &server_toml(&py)).write(
        "agents.d/a.toml",
        "[tools]\nallow = [\"group:mcp:py\"]\ndeny = [\"mcp__py__rm\"]\n",
    );
    let daemon = p.start().await;
    let (status, body) = post_task(&daemon, "a", json!({ "text": "add", "wait": true })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["text"], "it is 42", "{body}");
    let requests = model.requests();
    let offered = offered_tools(&requests[0]);
    assert!(offered.iter().any(|t| t == "mcp__py__add"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "mcp__py__rm"),
        "denied: {offered:?}"
    );
    let results = tool_results(&requests[1]);
    assert!(results.iter().any(|r| r.contains("sum=42")), "{results:?}");
}

#[actix_rt::test]
async fn mcp_list_prints_each_servers_state_versions_and_tools() {
    let Some(py) = python() else { return };
    let p = Project::new();
    p.write("clawbus.toml", &server_toml(&py))
        .write("agents.d/a.toml", "");
    let out = run_cmd({
        let mut cmd = p.clawbus();
        cmd.args(["mcp", "list", "--json"]);
        cmd
    })
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "py", "{v}");
    assert_eq!(v[0]["error"], Value::Null, "{v}");
    assert_eq!(v[0]["version"], "clawbus-test", "{v}");
    let tools: Vec<&str> = v[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"mcp__py__add"), "{tools:?}");
    p.write(
        "clawbus.toml",
        &format!(
            "{}\n[mcp.servers.gone]\ncommand = \"/nonexistent/server\"\n",
            server_toml(&py)
        ),
    );
    let out = run_cmd({
        let mut cmd = p.clawbus();
        cmd.args(["mcp", "list"]);
        cmd
    })
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a server that did not start: {stdout}"
    );
    assert!(
        stdout.contains("gone: failed: MCP server \"gone\""),
        "{stdout}"
    );
    assert!(stdout.contains("py: started"), "{stdout}");
}

#[actix_rt::test]
async fn clawbus_tools_shows_mcp_tools_and_the_layer_that_removed_each() {
    let Some(py) = python() else { return };
    let p = Project::new();
    p.write("clawbus.toml", &server_toml(&py)).write(
        "agents.d/a.toml",
        "[tools]\nallow = [\"group:mcp\"]\ndeny = [\"mcp__py__rm\"]\n",
    );
    let out = run_cmd({
        let mut cmd = p.clawbus();
        cmd.args(["tools", "--agent", "a", "--json"]);
        cmd
    })
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let offered: Vec<&str> = v["offered"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(offered.contains(&"mcp__py__add"), "{offered:?}");
    let rm = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "mcp__py__rm")
        .unwrap_or_else(|| panic!("rm listed as removed: {v}"));
    assert_eq!(rm["layer"], "deny", "{rm}");
}

#[test]
fn check_reports_a_bad_mcp_section_in_place() {
    let p = Project::new();
    p.write(
        "clawbus.toml",
        "[mcp.servers.files]\ncommand = \"x\"\nenv = [\"not a name\"]\n",
    )
    .write("agents.d/a.toml", "");
    let out = p.clawbus().arg("check").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "clawbus.toml:3:8: field \"mcp.servers.files.env\": not an environment variable name"
        ),
        "{text}"
    );
}
