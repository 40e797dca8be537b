//! MCP servers as tool sources: each `[mcp.servers.<name>]` is started with the daemon as a
//! child process spoken to over its stdio with the official SDK (`rmcp`, client side only),
//! and its tools join every agent's registry as `mcp__<server>__<tool>` with the server's JSON
//! schemas ([`McpTool`]).
//!
//! - [`McpServers`]: the handle on every configured server (start, tools, stop).
//! - `server`: one server's process and session; a dead one is started again on the next call.
//! - `bounded`: its stdout read with a bound on one line (a longer one stops that server).
//! - `tool`: [`McpTool`], the [`crate::tools::Tool`] that forwards a call and renders the result.
//!
//! Calls go through [`crate::tools::ToolSet::invoke`] like every built-in tool (policy, schema
//! check, secret redaction, output cap); results are framed as untrusted content. A server that
//! cannot start, times out or breaks the protocol gives the model a structured error naming it
//! and the operator a log line; the other tools keep working.

mod bounded;
mod server;
mod spawn;
#[cfg(test)]
mod tests;
mod tool;

pub use tool::McpTool;

use clawbus_core::config::{McpDef, mcp_tool_name};
use server::Server;
use std::sync::Arc;
use std::time::Duration;

/// Why an MCP server could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// Its command could not be started.
    #[error("MCP server {server:?}: cannot start {command:?}: {cause}")]
    Spawn {
        /// The server name.
        server: String,
        /// The configured command.
        command: String,
        /// What the OS said.
        #[source]
        cause: std::io::Error,
    },
    /// `sandbox = true`, and its sandbox cannot be set up: it was not started (fails closed).
    #[error("MCP server {server:?}: not started, its sandbox cannot be set up: {source}")]
    Sandbox {
        /// The server name.
        server: String,
        /// What the sandbox lacks.
        #[source]
        source: crate::tools::sandbox::SandboxError,
    },
    /// It did not answer within its `timeout`.
    #[error("MCP server {server:?}: {what} did not answer within {after:?}")]
    Timeout {
        /// The server name.
        server: String,
        /// What was waited for (`tool "add"`, `tools/list`).
        what: String,
        /// Its `timeout`.
        after: Duration,
    },
    /// It sent a line (one message) longer than the bound: the connection was closed and the
    /// process stopped.
    #[error("MCP server {server:?}: sent a line longer than {max} bytes; it was stopped")]
    LineTooLong {
        /// The server name.
        server: String,
        /// The bound.
        max: usize,
    },
    /// Its process exited or closed its stdio.
    #[error("MCP server {server:?}: the connection closed (the server exited)")]
    Closed {
        /// The server name.
        server: String,
    },
    /// It answered something the protocol does not allow, or an error.
    #[error("MCP server {server:?}: {source}")]
    Protocol {
        /// The server name.
        server: String,
        /// The SDK's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What became of one server's start (`clawbus mcp list`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServerStatus {
    /// The name in `[mcp.servers.<name>]`.
    pub name: String,
    /// `None` when it started and listed its tools; else why not.
    pub error: Option<String>,
    /// The protocol version agreed.
    pub protocol: Option<String>,
    /// The server's own `name version`, when it gave one.
    pub version: Option<String>,
    /// Its tools as offered (`mcp__<server>__<tool>`).
    pub tools: Vec<String>,
}

/// Every configured MCP server, and the tools each offered when it started.
#[derive(Clone, Default)]
pub struct McpServers {
    /// The tools of every server that started, in server then server-listed order.
    tools: Arc<Vec<McpTool>>,
    servers: Arc<Vec<Arc<Server>>>,
    /// How each start went, in name order.
    status: Arc<Vec<ServerStatus>>,
}

impl McpServers {
    /// Starts every server of `def` and lists its tools. A server that fails is logged (naming
    /// it and why) and offers no tools until the daemon starts again; the others are not held up.
    pub async fn start(def: &McpDef) -> Self {
        let servers: Vec<Arc<Server>> = def
            .servers
            .iter()
            .map(|(name, d)| Arc::new(Server::new(name, d.clone())))
            .collect();
        let listed = futures::future::join_all(servers.iter().map(|s| s.list_tools())).await;
        let mut tools = Vec::new();
        let mut status = Vec::new();
        for (server, result) in servers.iter().zip(listed) {
            let mut entry = ServerStatus {
                name: server.name.clone(),
                error: None,
                protocol: None,
                version: None,
                tools: Vec::new(),
            };
            match result {
                Ok(list) => {
                    tracing::info!(server = %server.name, tools = list.len(), "MCP server tools listed.");
                    let own: Vec<McpTool> = list
                        .into_iter()
                        .filter_map(|t| McpTool::new(server, t))
                        .collect();
                    entry.tools = own.iter().map(|t| t.name.to_string()).collect();
                    (entry.protocol, entry.version) = server.info().await;
                    tools.extend(own);
                }
                Err(e) => {
                    let text = server.log_text(&e);
                    tracing::error!(server = %server.name, error = %text, "MCP server failed to start; its tools are not offered.");
                    entry.error = Some(text);
                }
            }
            status.push(entry);
        }
        Self {
            tools: Arc::new(tools),
            servers: Arc::new(servers),
            status: Arc::new(status),
        }
    }

    /// How each server's start went, in name order.
    pub fn status(&self) -> &[ServerStatus] {
        &self.status
    }

    /// The tools of every server that started.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// The registry names of the tools (`mcp__<server>__<tool>`).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| mcp_tool_name(t.server(), t.tool()))
            .collect()
    }

    /// Ends every server's session and process.
    pub async fn stop(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
