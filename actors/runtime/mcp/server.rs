//! One MCP server: its child process, the `rmcp` client over its stdio, and the restart of a
//! dead one on the next call.

use super::McpError;
use clawbus_core::config::McpServerDef;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;
use tokio::time::timeout;

/// The least time a start (process, handshake, first `tools/list`) gets, whatever the per-call
/// `timeout`: an interpreter loading its SDK on a busy host takes seconds.
const MIN_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A running client session with a server.
type Client = RunningService<RoleClient, ()>;

/// One configured server and its connection, started on demand and again after it died.
pub(crate) struct Server {
    /// The name in `[mcp.servers.<name>]`.
    pub(crate) name: String,
    def: McpServerDef,
    /// The live session; `None` before the first start or after it was found dead. Calls hold
    /// a clone of the `Arc`, so a restart never cuts off a call still running on the old one.
    conn: Mutex<Option<Arc<Client>>>,
    /// The values of the variables it is given, redacted from what is logged of its errors.
    secrets: crate::secrets::Secrets,
    /// The live process (killed when dropped) and whether it sent a line over the bound.
    process: std::sync::Mutex<Option<(tokio::process::Child, Arc<AtomicBool>)>>,
    /// The sandbox run of the live process (`sandbox = true`): its cgroups, removed when the
    /// process is replaced or stopped.
    sandbox: std::sync::Mutex<Option<crate::tools::sandbox::Prepared>>,
    /// The longest line it may send ([`super::bounded::MAX_LINE_BYTES`]; less in tests).
    pub(crate) max_line: usize,
}

impl Server {
    /// An error's text for the log, with the values of the server's variables redacted (a server
    /// may echo them in its errors).
    pub(crate) fn log_text(&self, e: &McpError) -> String {
        self.secrets.redact(&e.to_string()).into_owned()
    }

    pub(crate) fn new(name: &str, def: McpServerDef) -> Self {
        Self {
            secrets: crate::secrets::Secrets::default().with_names(&def.env),
            name: name.to_string(),
            def,
            conn: Mutex::new(None),
            process: std::sync::Mutex::new(None),
            sandbox: std::sync::Mutex::new(None),
            max_line: super::bounded::MAX_LINE_BYTES,
        }
    }

    /// True when the live process sent a line over the bound; that process is killed.
    fn over_the_bound(&self) -> bool {
        let Ok(mut p) = self.process.lock() else {
            return false;
        };
        let over = p
            .as_ref()
            .is_some_and(|(_, tripped)| tripped.load(Ordering::Relaxed));
        if over && let Some((mut child, _)) = p.take() {
            if let Err(e) = child.start_kill() {
                tracing::warn!(server = %self.name, error = %e, "MCP server was not killed.");
            }
            tracing::error!(server = %self.name, max = self.max_line, "MCP server sent a line over the bound; it was stopped.");
        }
        over
    }

    fn line_too_long(&self) -> McpError {
        McpError::LineTooLong {
            server: self.name.clone(),
            max: self.max_line,
        }
    }

    /// Starts the process (see `spawn`: a clean environment, or the sandbox) and runs the MCP
    /// handshake, within `timeout` (at least [`MIN_START_TIMEOUT`]).
    async fn connect(&self) -> Result<Client, McpError> {
        self.end_sandbox().await;
        let super::spawn::Spawn {
            command: mut cmd,
            sandbox,
        } = super::spawn::command(&self.name, &self.def)?;
        if let Ok(mut s) = self.sandbox.lock() {
            *s = sandbox;
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let spawn_error = |cause| McpError::Spawn {
            server: self.name.clone(),
            command: self.def.command.clone(),
            cause,
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(spawn_error(std::io::Error::other("no stdio pipes")));
        };
        let tripped = Arc::new(AtomicBool::new(false));
        let read = super::bounded::BoundedLines::new(stdout, self.max_line, tripped.clone());
        let transport = AsyncRwTransport::new_client(read, stdin);
        // The last process (dead, or cut off for a long line) is killed as it is replaced.
        if let Ok(mut p) = self.process.lock() {
            *p = Some((child, tripped));
        }
        let client = timeout(self.def.timeout.max(MIN_START_TIMEOUT), ().serve(transport))
            .await
            .map_err(|_| McpError::Timeout {
                server: self.name.clone(),
                what: "the start (initialize)".to_string(),
                after: self.def.timeout.max(MIN_START_TIMEOUT),
            })?
            .map_err(|e| {
                if self.over_the_bound() {
                    return self.line_too_long();
                }
                McpError::Protocol {
                    server: self.name.clone(),
                    source: Box::new(e),
                }
            })?;
        let protocol = client.peer_info().map(|i| i.protocol_version.to_string());
        tracing::info!(server = %self.name, protocol = ?protocol, "MCP server started.");
        Ok(client)
    }

    /// The live session, started (again) when there is none or the last one closed.
    async fn client(&self) -> Result<Arc<Client>, McpError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.peer().is_transport_closed() {
                return Ok(c.clone());
            }
            tracing::warn!(server = %self.name, "MCP server connection closed; restarting it.");
        }
        *slot = None;
        let c = Arc::new(self.connect().await?);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Forgets `dead` if it is still the current session, so the next call starts a new one.
    async fn forget(&self, dead: &Arc<Client>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, dead)) {
            *slot = None;
        }
    }

    /// Every tool the server offers (`tools/list`, all pages), starting it if needed.
    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let c = self.client().await?;
        match timeout(self.def.timeout, c.list_all_tools()).await {
            Err(_) => Err(self.timed_out("tools/list")),
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => {
                self.forget(&c).await;
                if self.over_the_bound() {
                    return Err(self.line_too_long());
                }
                Err(self.call_error(e))
            }
        }
    }

    /// Calls `tool` with `args` within `timeout`. A call that finds the server dead (it
    /// exited since the last call) is sent once more to a fresh start: the dead process cannot
    /// have run it.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        match self.call_once(tool, args.clone()).await {
            Err(McpError::Closed { .. }) => self.call_once(tool, args).await,
            other => other,
        }
    }

    async fn call_once(&self, tool: &str, args: JsonObject) -> Result<CallToolResult, McpError> {
        let c = self.client().await?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        match timeout(self.def.timeout, c.call_tool(params)).await {
            Err(_) => Err(self.timed_out(&format!("tool {tool:?}"))),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => {
                if self.over_the_bound() {
                    self.forget(&c).await;
                    return Err(self.line_too_long());
                }
                if c.peer().is_transport_closed()
                    || matches!(
                        e,
                        ServiceError::TransportClosed | ServiceError::TransportSend(_)
                    )
                {
                    self.forget(&c).await;
                    return Err(McpError::Closed {
                        server: self.name.clone(),
                    });
                }
                Err(self.call_error(e))
            }
        }
    }

    /// The protocol version agreed and the server's `name version`, of the live session.
    pub(crate) async fn info(&self) -> (Option<String>, Option<String>) {
        let slot = self.conn.lock().await;
        let info = slot.as_ref().and_then(|c| c.peer_info());
        let protocol = info.as_ref().map(|i| i.protocol_version.to_string());
        let version = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|s| format!("{} {}", s.name, s.version).trim().to_string());
        (protocol, version)
    }

    /// Ends the session and the process.
    pub(crate) async fn stop(&self) {
        let client = self.conn.lock().await.take();
        if let Some(c) = client.and_then(|c| Arc::try_unwrap(c).ok())
            && let Err(e) = c.cancel().await
        {
            tracing::warn!(server = %self.name, error = %e, "MCP server did not stop cleanly.");
        }
        let process = self.process.lock().ok().and_then(|mut p| p.take());
        if let Some((mut child, _)) = process {
            // Its stdin is closed with the session: most servers exit on that; the rest are killed.
            if tokio::time::timeout(std::time::Duration::from_secs(2), child.wait())
                .await
                .is_err()
                && let Err(e) = child.kill().await
            {
                tracing::warn!(server = %self.name, error = %e, "MCP server was not killed.");
            }
        }
        self.end_sandbox().await;
    }

    /// Kills what is left of the last sandboxed process and removes its cgroups.
    async fn end_sandbox(&self) {
        let last = self.sandbox.lock().ok().and_then(|mut s| s.take());
        if let Some(run) = last {
            if let Some(limit) = run.finish(crate::tools::sandbox::Ended::Code(0)).await {
                tracing::warn!(server = %self.name, %limit, "MCP server was stopped by its sandbox's limit.");
            }
        }
    }

    fn timed_out(&self, what: &str) -> McpError {
        McpError::Timeout {
            server: self.name.clone(),
            what: what.to_string(),
            after: self.def.timeout,
        }
    }

    fn call_error(&self, e: ServiceError) -> McpError {
        match e {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Closed {
                server: self.name.clone(),
            },
            other => McpError::Protocol {
                server: self.name.clone(),
                source: Box::new(other),
            },
        }
    }
}
