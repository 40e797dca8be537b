//! MCP servers as tool sources, against a server on the official Python SDK (`testdata/server.py`)
//! over stdio.

use super::*;
use crate::mcp::McpServers;
use serde_json::{Value, json};
use std::path::Path;

#[tokio::test]
async fn mcp_tools_are_listed_offered_by_policy_and_called_with_untrusted_results() {
    let Some(py) = python() else { return };
    let (dir, config) = project(
        &mcp_toml(&py, "30s", &[]),
        "[tools]\nallow = [\"group:mcp:t\"]\ndeny = [\"mcp__t__rm\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let names = mcp.tool_names();
    for expected in ["mcp__t__add", "mcp__t__pid", "mcp__t__hang", "mcp__t__rm"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} listed: {names:?}"
        );
    }
    let status = &mcp.status().await[0];
    assert_eq!(status.error, None);
    assert_eq!(
        status.version.as_deref(),
        Some("clawbus-test"),
        "{status:?}"
    );
    assert!(status.protocol.is_some(), "{status:?}");
    assert_eq!(status.tools, names);
    let set = tools(&config, &mcp);
    assert!(set.names().contains(&"mcp__t__add"), "{:?}", set.names());
    assert!(
        !set.names().contains(&"mcp__t__rm"),
        "a denied tool is never offered"
    );
    let schema = set
        .schemas()
        .into_iter()
        .find(|(n, _, _)| n == "mcp__t__add")
        .unwrap()
        .2;
    assert_eq!(
        schema["required"],
        json!(["a", "b"]),
        "the server's schema: {schema}"
    );
    let out = call(&set, dir.path(), "mcp__t__add", json!({"a": 2, "b": 3})).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("sum=5"), "{}", out.text);
    assert!(
        out.text.starts_with(crate::untrusted::BEGIN_MARKER),
        "MCP results are framed as untrusted: {}",
        out.text
    );
    let bad = call(&set, dir.path(), "mcp__t__add", json!({"a": "two"})).await;
    assert!(
        bad.is_error && bad.text.contains("invalid_arguments"),
        "{}",
        bad.text
    );
    let denied = call(&set, dir.path(), "mcp__t__rm", json!({"path": "x"})).await;
    assert!(denied.is_error, "{}", denied.text);
    assert!(denied.text.contains("policy_denied"), "{}", denied.text);
    mcp.stop().await;
}

#[tokio::test]
async fn a_server_gets_a_clean_environment_and_its_secrets_are_redacted() {
    let Some(py) = python() else { return };
    // Cargo sets CARGO_MANIFEST_DIR for the test process: passed by name, it is a secret.
    let (dir, config) = project(
        &mcp_toml(&py, "30s", &["CARGO_MANIFEST_DIR"]),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let secrets = crate::secrets::Secrets::from_config(&config).with_names(["CARGO_MANIFEST_DIR"]);
    let set = tools(&config, &mcp).with_secrets(std::sync::Arc::new(secrets));
    let names = call(&set, dir.path(), "mcp__t__env_names", json!({})).await;
    assert!(names.text.contains("CARGO_MANIFEST_DIR"), "{}", names.text);
    assert!(
        !names.text.contains("CARGO_PKG_NAME"),
        "no variable it was not given: {}",
        names.text
    );
    let value = call(
        &set,
        dir.path(),
        "mcp__t__getenv",
        json!({"name": "CARGO_MANIFEST_DIR"}),
    )
    .await;
    assert!(
        value.text.contains("[REDACTED:CARGO_MANIFEST_DIR]"),
        "{}",
        value.text
    );
    assert!(
        !value.text.contains(env!("CARGO_MANIFEST_DIR")),
        "{}",
        value.text
    );
    mcp.stop().await;
}

#[tokio::test]
async fn a_killed_server_is_restarted_on_the_next_call() {
    let Some(py) = python() else { return };
    let (dir, config) = project(
        &mcp_toml(&py, "30s", &[]),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let set = tools(&config, &mcp);
    let first = call(&set, dir.path(), "mcp__t__pid", json!({})).await;
    let pid = pid_in(&first.text);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let again = call(&set, dir.path(), "mcp__t__pid", json!({})).await;
    assert!(
        !again.is_error,
        "the next call restarts the server: {}",
        again.text
    );
    assert_ne!(pid_in(&again.text), pid, "a new process answered");
    let sum = call(&set, dir.path(), "mcp__t__add", json!({"a": 1, "b": 1})).await;
    assert!(sum.text.contains("sum=2"), "{}", sum.text);
    mcp.stop().await;
}

#[tokio::test]
async fn a_hanging_tool_times_out_with_a_structured_error_and_others_keep_working() {
    let Some(py) = python() else { return };
    let (dir, config) = project(
        &mcp_toml(&py, "3s", &[]),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let set = tools(&config, &mcp);
    let out = call(&set, dir.path(), "mcp__t__hang", json!({})).await;
    assert!(out.is_error, "{}", out.text);
    let err: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(err["error"]["type"], "timeout", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server \"t\""),
        "names the server: {message}"
    );
    let sum = call(&set, dir.path(), "mcp__t__add", json!({"a": 4, "b": 5})).await;
    assert!(sum.text.contains("sum=9"), "{}", sum.text);
    mcp.stop().await;
}

#[tokio::test]
async fn a_server_that_prints_garbage_on_stdout_is_not_fatal() {
    let Some(py) = python() else { return };
    let script = server_script().display().to_string();
    let garbage = format!(
        "print('this is not JSON-RPC', flush=True); import runpy; runpy.run_path({script:?}, run_name='__main__')"
    );
    let toml = format!(
        "{}\n[mcp.servers.noisy]\ncommand = {py:?}\nargs = [\"-c\", {garbage:?}]\ntimeout = \"10s\"\n",
        mcp_toml(&py, "30s", &[])
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    let mcp = tokio::time::timeout(BOUND, McpServers::start(&config.mcp))
        .await
        .unwrap();
    // The SDK skips a stdout line that is not JSON-RPC: the server still starts and answers.
    let status = mcp.status().await;
    let noisy = status.iter().find(|s| s.name == "noisy").unwrap();
    assert_eq!(noisy.error, None, "{noisy:?}");
    let set = tools(&config, &mcp);
    for tool in ["mcp__t__add", "mcp__noisy__add"] {
        let sum = call(&set, dir.path(), tool, json!({"a": 1, "b": 2})).await;
        assert!(sum.text.contains("sum=3"), "{tool}: {}", sum.text);
    }
    mcp.stop().await;
}

#[tokio::test]
async fn a_server_sending_an_endless_line_is_cut_off_and_the_next_call_restarts_it() {
    let Some(py) = python() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/testdata/hostile.py");
    let toml = format!(
        "[mcp.servers.h]\ncommand = {py:?}\nargs = [{:?}]\ntimeout = \"30s\"\n",
        script.display().to_string()
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    let mcp = McpServers::start(&config.mcp).await;
    let set = tools(&config, &mcp);
    let before = call(&set, dir.path(), "mcp__h__pid", json!({})).await;
    let pid = pid_in(&before.text);
    // `flood` writes an endless line on stdout: the read stops at the bound, the call fails at
    // once (not at its 30 s timeout) with an error naming the server, and that process is killed.
    let out = call(&set, dir.path(), "mcp__h__flood", json!({})).await;
    assert!(out.is_error, "{}", out.text);
    let err: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(err["error"]["type"], "mcp_server_error", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server \"h\"") && message.contains("longer than 8388608 bytes"),
        "{message}"
    );
    let after = call(&set, dir.path(), "mcp__h__pid", json!({})).await;
    assert_ne!(
        pid_in(&after.text),
        pid,
        "a new process answers: {}",
        after.text
    );
    mcp.stop().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_offers_no_tools_and_holds_up_nothing() {
    let (_dir, config) = project(
        "[mcp.servers.gone]\ncommand = \"/nonexistent/mcp-server\"\ntimeout = \"5s\"\n",
        "",
    );
    let mcp = tokio::time::timeout(BOUND, McpServers::start(&config.mcp))
        .await
        .unwrap();
    assert!(mcp.tool_names().is_empty());
    let error = mcp.status().await[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("MCP server \"gone\"") && error.contains("/nonexistent/mcp-server"),
        "{error}"
    );
}

#[actix_rt::test]
async fn an_agent_on_the_scripted_model_calls_an_mcp_tool_and_never_sees_its_secret() {
    use clawbus_testkit::{ScriptedServer, Turn};
    let Some(py) = python() else { return };
    let model = ScriptedServer::start(vec![
        Turn::tool_call("mcp__t__add", json!({"a": 20, "b": 22})),
        Turn::tool_call("mcp__t__getenv", json!({"name": "CARGO_MANIFEST_DIR"})),
        Turn::text("the sum is 42"),
    ])
    .await;
    let toml = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n\n{}",
        model.base_url(),
        mcp_toml(&py, "30s", &["CARGO_MANIFEST_DIR"])
    );
    let (_dir, config) = project(
        &toml,
        "[tools]\nallow = [\"group:mcp\"]\ndeny = [\"mcp__t__rm\"]\n",
    );
    run_agent(config, "add 20 and 22").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let offered = offered(&requests[0]);
    assert!(offered.iter().any(|t| t == "mcp__t__add"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "mcp__t__rm"),
        "a denied tool is never offered: {offered:?}"
    );
    let sent = serde_json::to_string(&requests).unwrap();
    assert!(
        sent.contains("sum=42"),
        "the tool result reached the model: {sent}"
    );
    assert!(
        !sent.contains(env!("CARGO_MANIFEST_DIR")),
        "a value passed by env never reaches the model"
    );
    assert!(sent.contains("[REDACTED:CARGO_MANIFEST_DIR]"), "{sent}");
}

#[test]
fn what_is_logged_of_a_servers_error_has_its_variables_values_redacted() {
    // Cargo sets CARGO_MANIFEST_DIR for the test process: passed by name, it is a secret.
    let value = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let server = crate::mcp::server::Server::new(
        "t",
        clawbus_core::config::mcp::McpServerDef {
            transport: clawbus_core::config::McpTransport::Stdio {
                command: "none".into(),
                args: Vec::new(),
                env: vec!["CARGO_MANIFEST_DIR".into()],
            },
            timeout: std::time::Duration::from_secs(1),
            sandbox: None,
            start: clawbus_core::config::McpStart::Eager,
        },
        std::sync::Arc::new(bus::SystemClock),
        std::sync::Arc::new(tokio::sync::watch::channel(0).0),
    );
    let e = crate::mcp::McpError::Protocol {
        server: "t".into(),
        source: format!("bad request, key {value}").into(),
    };
    let text = server.log_text(&e);
    assert!(!text.contains(&value), "{text}");
    assert!(text.contains("[REDACTED:CARGO_MANIFEST_DIR]"), "{text}");
}
