//! One MCP server: its session (over a child's stdio or over HTTP), the tools it listed, and its
//! restarts. A dead server is started again by its keeper after the [`Backoff`] delay (at once
//! after a good run), or by the next call once that delay has passed; a call before then fails at
//! once, naming the server and the wait.

use super::McpError;
use super::backoff::Backoff;
use super::connect::{Client, Handler, Process};
use clawbus_core::config::{McpServerDef, McpStart, McpTransport};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::ServiceError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::{Mutex, Notify};
use tokio::time::timeout;

/// The least time a start (process, handshake, first `tools/list`) gets, whatever the per-call
/// `timeout`: an interpreter loading its SDK on a busy host takes seconds.
const MIN_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// One configured server and its connection.
pub(crate) struct Server {
    /// The name in `[mcp.servers.<name>]`.
    pub(crate) name: String,
    pub(crate) def: McpServerDef,
    me: Weak<Server>,
    clock: Arc<dyn bus::Clock>,
    /// The live session; `None` before the first start or after it was found dead. Calls hold
    /// a clone of the `Arc`, so a restart never cuts off a call still running on the old one.
    conn: Mutex<Option<Arc<Client>>>,
    /// The values of the variables it is given, redacted from what is logged of its errors.
    secrets: crate::secrets::Secrets,
    /// The live process of a stdio server.
    process: std::sync::Mutex<Option<Process>>,
    /// The longest line it may send ([`super::bounded::MAX_LINE_BYTES`]; less in tests).
    pub(crate) max_line: usize,
    backoff: std::sync::Mutex<Backoff>,
    /// The tools it listed last (empty until it first started), and what to tell when they change.
    listed: std::sync::Mutex<Vec<rmcp::model::Tool>>,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// The last start's error, for `clawbus mcp list`.
    last_error: std::sync::Mutex<Option<String>>,
    /// The transport of the last session opened (`connect::STDIO` …).
    via: std::sync::Mutex<Option<&'static str>>,
    /// Wakes the keeper: the session died, or the daemon stops.
    wake: Notify,
    stopping: AtomicBool,
    /// Set when the live process exited, until the keeper has dropped its session.
    died: AtomicBool,
    /// Whether it was ever started (eager servers with the daemon, lazy ones on first use).
    kept: AtomicBool,
    /// Whether its keeper runs (one at most).
    keeper: AtomicBool,
}

impl Server {
    /// A server not yet started; `changed` is bumped whenever its tool list changes.
    pub(crate) fn new(
        name: &str,
        def: McpServerDef,
        clock: Arc<dyn bus::Clock>,
        changed: Arc<tokio::sync::watch::Sender<u64>>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            secrets: crate::secrets::Secrets::default().with_names(def.secret_names()),
            name: name.to_string(),
            def,
            me: me.clone(),
            clock,
            conn: Mutex::new(None),
            process: std::sync::Mutex::new(None),
            max_line: super::bounded::MAX_LINE_BYTES,
            backoff: Default::default(),
            listed: Default::default(),
            changed,
            last_error: Default::default(),
            via: Default::default(),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            died: AtomicBool::new(false),
            kept: AtomicBool::new(false),
            keeper: AtomicBool::new(false),
        })
    }

    /// Whether it starts with the daemon.
    pub(crate) fn eager(&self) -> bool {
        self.def.start == McpStart::Eager
    }

    /// An error's text for the log, with the values of the server's variables redacted (a server
    /// may echo them in its errors).
    pub(crate) fn log_text(&self, e: &McpError) -> String {
        self.secrets.redact(&e.to_string()).into_owned()
    }

    pub(crate) fn handler(&self) -> Handler {
        Handler {
            server: self.me.clone(),
        }
    }

    /// The tools it listed last.
    pub(crate) fn listed(&self) -> Vec<rmcp::model::Tool> {
        self.listed.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Whether it has ever been started (a lazy one is not until its first use).
    pub(crate) fn started(&self) -> bool {
        self.kept.load(Ordering::Relaxed)
    }

    /// The transport of the last session opened, once one was.
    pub(crate) fn transport(&self) -> Option<&'static str> {
        self.via.lock().ok().and_then(|v| *v)
    }

    /// The last start's error, redacted; `None` after a good start.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    pub(crate) fn set_process(&self, p: Process) {
        if let Ok(mut slot) = self.process.lock() {
            // The last process (dead, or cut off for a long line) is killed as it is replaced.
            *slot = Some(p);
        }
    }

    /// The process id of the live stdio process.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.lock().ok()?.as_ref()?.pid
    }

    /// Told by the task that waits on process `pid`: it exited.
    pub(crate) fn process_exited(
        &self,
        pid: Option<u32>,
        status: Option<std::process::ExitStatus>,
    ) {
        if self.stopping.load(Ordering::Relaxed) || pid != self.pid() {
            return;
        }
        self.died.store(true, Ordering::Relaxed);
        tracing::warn!(server = %self.name, pid, status = ?status, "MCP server exited; it is restarted.");
        self.wake.notify_one();
    }

    /// True when the live process sent a line over the bound; that process is killed.
    pub(crate) fn over_the_bound(&self) -> bool {
        let Ok(mut p) = self.process.lock() else {
            return false;
        };
        let over = p
            .as_ref()
            .is_some_and(|p| p.tripped.load(Ordering::Relaxed));
        if over && let Some(p) = p.take() {
            // The waiting task kills it; a closed channel means it has already exited.
            p.kill.send(()).ok();
            tracing::error!(server = %self.name, max = self.max_line, "MCP server sent a line over the bound; it was stopped.");
        }
        over
    }

    pub(crate) fn line_too_long(&self) -> McpError {
        McpError::LineTooLong {
            server: self.name.clone(),
            max: self.max_line,
        }
    }

    pub(crate) fn protocol_error(
        &self,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> McpError {
        McpError::Protocol {
            server: self.name.clone(),
            source: Box::new(e),
        }
    }

    /// Opens a session, within `timeout` (at least [`MIN_START_TIMEOUT`]).
    async fn connect(&self) -> Result<Client, McpError> {
        let Some(me) = self.me.upgrade() else {
            return Err(McpError::Closed {
                server: self.name.clone(),
            });
        };
        let limit = self.def.timeout.max(MIN_START_TIMEOUT);
        let started = async {
            match &self.def.transport {
                McpTransport::Stdio { command, args, env } => {
                    super::connect::stdio(&me, command, args, env, self.def.sandbox.as_ref())
                        .await
                        .map(|c| (c, super::connect::STDIO))
                }
                McpTransport::Http { url, headers_env } => {
                    super::connect::http(&me, url, headers_env).await
                }
            }
        };
        let (client, via) = timeout(limit, started)
            .await
            .map_err(|_| McpError::Timeout {
                server: self.name.clone(),
                what: "the start (initialize)".to_string(),
                after: limit,
            })??;
        let protocol = client.peer_info().map(|i| i.protocol_version.to_string());
        tracing::info!(server = %self.name, protocol = ?protocol, transport = via, "MCP server started.");
        if let Ok(mut v) = self.via.lock() {
            *v = Some(via);
        }
        Ok(client)
    }

    /// The live session, started (again) when there is none or the last one closed, unless the
    /// backoff says to wait. A new session lists the tools before it is handed out.
    async fn client(&self) -> Result<Arc<Client>, McpError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.peer().is_transport_closed() {
                return Ok(c.clone());
            }
            tracing::warn!(server = %self.name, "MCP server connection closed; restarting it.");
        }
        *slot = None;
        let now = self.clock.now();
        if let Some(after) = self.backoff.lock().ok().and_then(|b| b.wait_left(now)) {
            return Err(McpError::BackingOff {
                server: self.name.clone(),
                after,
            });
        }
        self.kept.store(true, Ordering::Relaxed);
        let started = match self.connect().await {
            Ok(c) => Arc::new(c),
            Err(e) => return Err(self.start_failed(e)),
        };
        match timeout(self.def.timeout, started.list_all_tools()).await {
            Ok(Ok(tools)) => self.set_listed(tools),
            Ok(Err(e)) => return Err(self.start_failed(self.call_error(e))),
            Err(_) => return Err(self.start_failed(self.timed_out("tools/list"))),
        }
        if let Ok(mut b) = self.backoff.lock() {
            b.succeeded();
        }
        if let Ok(mut e) = self.last_error.lock() {
            *e = None;
        }
        *slot = Some(started.clone());
        Ok(started)
    }

    fn start_failed(&self, e: McpError) -> McpError {
        let e = if self.over_the_bound() {
            self.line_too_long()
        } else {
            e
        };
        let now = self.clock.now();
        let delay = self
            .backoff
            .lock()
            .map(|mut b| b.failed(now))
            .unwrap_or_default();
        let text = self.log_text(&e);
        tracing::error!(server = %self.name, error = %text, retry_in = ?delay, "MCP server failed to start.");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(text);
        }
        e
    }

    fn set_listed(&self, tools: Vec<rmcp::model::Tool>) {
        tracing::info!(server = %self.name, tools = tools.len(), "MCP server tools listed.");
        if let Ok(mut l) = self.listed.lock() {
            *l = tools;
        }
        self.changed.send_modify(|g| *g += 1);
    }

    /// Starts the session if there is none (the first use of a lazy server, or a dead one whose
    /// backoff has passed); the error says why not.
    pub(crate) async fn ensure(&self) -> Result<(), McpError> {
        self.client().await.map(|_| ())
    }

    /// Lists the tools again (after `notifications/tools/list_changed`).
    pub(crate) async fn refresh_tools(&self) {
        let Ok(c) = self.client().await else { return };
        match timeout(self.def.timeout, c.list_all_tools()).await {
            Ok(Ok(tools)) => self.set_listed(tools),
            Ok(Err(e)) => {
                let e = self.call_error(e);
                tracing::warn!(server = %self.name, error = %self.log_text(&e), "MCP server tools could not be listed again.");
            }
            Err(_) => tracing::warn!(server = %self.name, "MCP server tools/list timed out."),
        }
    }

    /// Keeps the server running until [`Server::stop`]: starts it, and after it died or failed
    /// to start, starts it again once the backoff delay has passed on the clock.
    pub(crate) async fn keep(self: Arc<Self>) {
        if self.keeper.swap(true, Ordering::SeqCst) {
            return;
        }
        self.kept.store(true, Ordering::Relaxed);
        loop {
            let woken = self.wake.notified();
            if self.stopping.load(Ordering::Relaxed) {
                return;
            }
            let live = {
                let mut slot = self.conn.lock().await;
                if self.died.swap(false, Ordering::Relaxed) {
                    *slot = None;
                }
                slot.as_ref()
                    .is_some_and(|c| !c.peer().is_transport_closed())
            };
            if live {
                woken.await;
                continue;
            }
            let not_before = self.backoff.lock().ok().and_then(|b| b.not_before());
            if let Some(at) = not_before {
                tokio::select! {
                    () = self.clock.sleep_until(at) => {}
                    () = woken => continue,
                }
            }
            if self.stopping.load(Ordering::Relaxed) {
                return;
            }
            // A failure is logged and sets the next delay.
            if self.client().await.is_ok() {
                continue;
            }
        }
    }

    /// Forgets `dead` if it is still the current session, so the next call starts a new one.
    async fn forget(&self, dead: &Arc<Client>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, dead)) {
            *slot = None;
        }
        self.wake.notify_one();
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

    /// Ends the keeper, the session and the process.
    pub(crate) async fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.wake.notify_one();
        let client = self.conn.lock().await.take();
        if let Some(c) = client.and_then(|c| Arc::try_unwrap(c).ok())
            && let Err(e) = c.cancel().await
        {
            tracing::warn!(server = %self.name, error = %e, "MCP server did not stop cleanly.");
        }
        let process = self.process.lock().ok().and_then(|mut p| p.take());
        if let Some(mut p) = process {
            // Its stdin is closed with the session: most servers exit on that; the rest are killed.
            if tokio::time::timeout(std::time::Duration::from_secs(2), &mut p.exited)
                .await
                .is_err()
            {
                p.kill.send(()).ok();
                p.exited.await.ok();
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
