//! The MCP client's tests: against the official Python SDK's server (`testdata/server.py`, run by
//! the Python that `CLAWBUS_TEST_MCP_PYTHON` names; `.ci/run` installs the `mcp` package in a venv)
//! over stdio (`python`), Streamable HTTP (`http`) and the older HTTP+SSE (`sse`), and against a
//! small server written here on `rmcp`'s server side (`rust_server`, `restart`). Without the
//! Python SDK its tests say they were skipped, and fail when `CI=true`.

mod figures;
mod http;
mod python;
mod restart;
mod rust_server;
mod sandboxed;
mod sse;

use super::McpServers;
use crate::tools::{ToolContext, ToolSet};
use clawbus_core::config::{Config, LoadOptions, load};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A safety net for the waits below; never a synchronisation device.
const BOUND: Duration = Duration::from_secs(60);

/// The Python with the MCP SDK, or `None` (the test is skipped; a failure under `CI=true`).
fn python() -> Option<String> {
    clawbus_testkit::mcp_python_or_skip()
}

fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/testdata/server.py")
}

/// `[mcp.servers.t]` running the test server, with `timeout` and the variables in `env`.
fn mcp_toml(python: &str, timeout: &str, env: &[&str]) -> String {
    format!(
        "[mcp.servers.t]\ncommand = {python:?}\nargs = [{:?}]\nenv = {env:?}\ntimeout = {timeout:?}\n",
        server_script().display().to_string()
    )
}

/// A project folder with `clawbus.toml` = `toml` and agent `a` = `agent`, loaded.
fn project(toml: &str, agent: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("agents.d")).unwrap();
    std::fs::write(dir.path().join("agents.d/a.toml"), agent).unwrap();
    std::fs::write(dir.path().join("clawbus.toml"), toml).unwrap();
    let config = load(&LoadOptions::in_folder(dir.path())).unwrap();
    (dir, config)
}

fn ctx(dir: &Path) -> ToolContext {
    let workspace = dir.canonicalize().unwrap();
    ToolContext {
        workspace,
        agent: clawbus_core::ids::AgentId::new("a"),
        session: clawbus_core::ids::SessionKey::parse("agent:a:test").unwrap(),
        channel: "api".into(),
        run: None,
    }
}

/// The agent's tools with the MCP servers of `config`.
fn tools(config: &Config, mcp: &McpServers) -> ToolSet {
    let services = crate::agent::tools::ToolServices {
        mcp: Some(mcp.clone()),
        ..Default::default()
    };
    crate::agent::tools::agent_tools(&config.agents[0], config, &services)
}

async fn call(set: &ToolSet, dir: &Path, name: &str, args: Value) -> crate::tools::ToolOutput {
    tokio::time::timeout(
        BOUND,
        set.invoke(&ctx(dir), name, &args.to_string(), 100_000),
    )
    .await
    .expect("the call ends within the bound")
}

fn pid_in(text: &str) -> i32 {
    text.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("a pid in {text}"))
}

/// Runs one task for agent `a` of `config` on the whole system, waits for it to succeed, and
/// stops the system.
async fn run_agent(config: Config, task: &str) {
    let opts = crate::system::SystemOptions {
        shards: Some(1),
        ..Default::default()
    };
    let system = crate::system::Clawbus::start(config, opts).await.unwrap();
    let ingress = crate::ingress::Ingress::routed(system.bus().clone(), system.router().clone());
    let request = crate::ingress::Request::new(
        crate::ingress::Target::Agent(clawbus_core::ids::AgentId::new("a")),
        bus::RequestId::random(),
        task,
        "test",
        crate::origin::Origin::api(),
    );
    ingress.submit(request.clone()).await.unwrap();
    let done = system.bus().wait(&request.request_id, BOUND).await.unwrap();
    assert_eq!(done.state, bus::TaskState::Succeeded, "{done:?}");
    system.shutdown(BOUND).await;
}

/// The first agent's tools as a run builds them (starting lazy servers), following `mcp`.
fn live_tools(config: &Config, mcp: &McpServers) -> ToolSet {
    let services = crate::agent::tools::ToolServices {
        mcp: Some(mcp.clone()),
        ..Default::default()
    };
    crate::agent::tools::live_agent_tools(
        &config.agents[0],
        config,
        &services,
        std::sync::Arc::default(),
    )
}

/// The names of the tools offered in one model request.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
