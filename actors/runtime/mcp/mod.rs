//! MCP servers as tool sources: each `[mcp.servers.<name>]` is a child process spoken to over
//! its stdio, or a URL spoken to over Streamable HTTP, with the official SDK (`rmcp`, client
//! side), and its tools join every agent's registry as `mcp__<server>__<tool>` with the server's
//! JSON schemas ([`McpTool`]).
//!
//! - [`McpServers`]: the handle on every configured server (start, tools, stop).
//! - `server`: one server's session, listed tools and restarts (with `backoff`).
//! - `connect`: opening a session over stdio or HTTP; `notifications/tools/list_changed` has the
//!   tools listed again.
//! - `sse`: the older HTTP+SSE transport, for a server that answers 404/405 to Streamable HTTP.
//! - `bounded`: a stdio server's stdout read with a bound on one line (a longer one stops it).
//! - `tool`: [`McpTool`], the [`crate::tools::Tool`] that forwards a call and renders the result.
//!
//! Eager servers start with the daemon, lazy ones (`start = "lazy"`) on first use
//! ([`McpServers::ensure_started`], run before each agent run). A server that dies is started
//! again after a bounded exponential backoff on the process's clock. The tool list changes when a
//! server is (re)started or says its tools changed: [`McpServers::generation`] counts those
//! changes, and agents build their tool set again when it moved.
//!
//! Calls go through [`crate::tools::ToolSet::invoke`] like every built-in tool (policy, schema
//! check, secret redaction, output cap); results are framed as untrusted content. A server that
//! cannot start, times out or breaks the protocol gives the model a structured error naming it
//! and the operator a log line; the other tools keep working.
//!
//! A server that answers Streamable HTTP's initialize POST with 404 or 405 is spoken to over the
//! older HTTP+SSE transport at the same URL (`sse`: `rmcp` 3.11 has no client for it).

mod backoff;
mod bounded;
mod connect;
mod server;
mod spawn;
mod sse;
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
    /// It died or failed to start, and its next start waits for the backoff delay.
    #[error("MCP server {server:?}: not running; the next start is tried in {after:?}")]
    BackingOff {
        /// The server name.
        server: String,
        /// The wait left.
        after: Duration,
    },
    /// Its configuration cannot be used as it stands (a header variable that is not set).
    #[error("MCP server {server:?}: {problem}")]
    Config {
        /// The server name.
        server: String,
        /// What is wrong.
        problem: String,
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
    /// The transport of its session: `stdio`, `streamable-http` or `sse` (the older HTTP+SSE);
    /// `None` before one was opened.
    pub transport: Option<String>,
    /// The protocol version agreed.
    pub protocol: Option<String>,
    /// The server's own `name version`, when it gave one.
    pub version: Option<String>,
    /// Its tools as offered (`mcp__<server>__<tool>`).
    pub tools: Vec<String>,
}

/// Every configured MCP server, and the tools they offer now.
#[derive(Clone)]
pub struct McpServers {
    servers: Arc<Vec<Arc<Server>>>,
    /// Bumped whenever a server's tool list changes.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// The tools as last built, and the generation they were built at.
    tools: Arc<std::sync::Mutex<(u64, Arc<Vec<McpTool>>)>>,
}

impl Default for McpServers {
    fn default() -> Self {
        Self {
            servers: Arc::default(),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
            tools: Arc::default(),
        }
    }
}

impl McpServers {
    /// Starts every eager server of `def` and lists its tools, on the system clock.
    pub async fn start(def: &McpDef) -> Self {
        Self::start_with(def, Arc::new(bus::SystemClock)).await
    }

    /// Starts every eager server of `def` and lists its tools; lazy ones wait for their first
    /// use. A server that fails is logged (naming it and why) and offers no tools until a later
    /// start succeeds; the others are not held up. Restart delays run on `clock`.
    pub async fn start_with(def: &McpDef, clock: Arc<dyn bus::Clock>) -> Self {
        let changed = Arc::new(tokio::sync::watch::channel(0).0);
        let servers: Vec<Arc<Server>> = def
            .servers
            .iter()
            .map(|(name, d)| Server::new(name, d.clone(), clock.clone(), changed.clone()))
            .collect();
        let eager = servers.iter().filter(|s| s.eager());
        futures::future::join_all(eager.map(|s| s.ensure())).await;
        for s in servers.iter().filter(|s| s.eager()) {
            tokio::spawn(s.clone().keep());
        }
        Self {
            servers: Arc::new(servers),
            changed,
            tools: Arc::default(),
        }
    }

    /// Starts the lazy servers not started yet (their first use), each with its keeper.
    pub async fn ensure_started(&self) {
        let waiting: Vec<&Arc<Server>> = self.servers.iter().filter(|s| !s.started()).collect();
        if waiting.is_empty() {
            return;
        }
        futures::future::join_all(waiting.iter().map(|s| s.ensure())).await;
        for s in waiting {
            tokio::spawn(s.clone().keep());
        }
    }

    /// How many times a server's tool list changed: agents build their tools again when it moved.
    pub fn generation(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Told of every change of [`McpServers::generation`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// How each server stands, in name order.
    pub async fn status(&self) -> Vec<ServerStatus> {
        let offered = self.tools();
        let mut out = Vec::new();
        for s in self.servers.iter() {
            let (protocol, version) = s.info().await;
            let tools = offered
                .iter()
                .filter(|t| t.server() == s.name)
                .map(|t| t.name.to_string())
                .collect();
            let error = match s.last_error() {
                None if !s.started() => Some("not started yet (start = \"lazy\")".to_string()),
                e => e,
            };
            out.push(ServerStatus {
                name: s.name.clone(),
                error,
                transport: s.transport().map(str::to_string),
                protocol,
                version,
                tools,
            });
        }
        out
    }

    /// The tools every server offers now, in server then server-listed order.
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        let generation = self.generation();
        let Ok(mut cached) = self.tools.lock() else {
            return Arc::default();
        };
        if cached.0 != generation {
            let tools: Vec<McpTool> = self
                .servers
                .iter()
                .flat_map(|s| s.listed().into_iter().filter_map(|t| McpTool::new(s, t)))
                .collect();
            *cached = (generation, Arc::new(tools));
        }
        cached.1.clone()
    }

    /// The registry names of the tools (`mcp__<server>__<tool>`).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .map(|t| mcp_tool_name(t.server(), t.tool()))
            .collect()
    }

    /// The process id of server `name`'s live process (stdio servers), for tests and figures.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.servers.iter().find(|s| s.name == name)?.pid()
    }

    /// Ends every server's keeper, session and process.
    pub async fn stop(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
