//! Opening one session with a server: its child process over stdio, or its URL over Streamable
//! HTTP (or the older HTTP+SSE when the server answers 404/405 to it, see `sse`); each with the
//! [`Handler`] that hears `notifications/tools/list_changed`.

use super::McpError;
use super::server::Server;
use clawbus_core::config::{SandboxDef, Set};
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use tokio::sync::oneshot;

/// The largest HTTP body (one JSON answer, one SSE event) taken from a server: as for stdio
/// lines ([`super::bounded::MAX_LINE_BYTES`]).
const MAX_HTTP_BODY: usize = super::bounded::MAX_LINE_BYTES;

/// The most of an HTTP error body kept for the error message.
const MAX_HTTP_ERROR_BODY: usize = 16 * 1024;

/// A running client session with a server.
pub(crate) type Client = RunningService<RoleClient, Handler>;

/// The client side of a session: says who we are, and has the server's tools listed again when
/// it says they changed.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) server: Weak<Server>,
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("clawbus", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            tracing::info!(server = %server.name, "MCP server says its tools changed; listing them again.");
            // Not on the session's own task: the listing is a request on that session.
            tokio::spawn(async move { server.refresh_tools().await });
        }
    }
}

/// The running child process of a stdio server: a task waits for its exit (and tells the server
/// it died) or for `kill`.
pub(crate) struct Process {
    /// Kills the process (also when dropped).
    pub(crate) kill: oneshot::Sender<()>,
    /// Resolves once the process has exited.
    pub(crate) exited: oneshot::Receiver<()>,
    /// Set when it sent a line over the bound.
    pub(crate) tripped: Arc<AtomicBool>,
    /// Its process id.
    pub(crate) pid: Option<u32>,
}

/// Starts `command` (see `spawn`: a clean environment, or the sandbox of `sandbox`) and runs
/// the MCP handshake over its stdio. The process goes to `server`'s slot before the handshake,
/// so a start that hangs can be killed; its sandbox run is finished (what is left killed, its
/// cgroups removed) once the process is gone.
pub(crate) async fn stdio(
    server: &Arc<Server>,
    command: &str,
    args: &[String],
    env: &[String],
    sandbox: Option<&Set<SandboxDef>>,
) -> Result<Client, McpError> {
    let super::spawn::Spawn {
        command: mut cmd,
        sandbox,
    } = super::spawn::command(&server.name, command, args, env, sandbox)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let spawn_error = |cause| McpError::Spawn {
        server: server.name.clone(),
        command: command.to_string(),
        cause,
    };
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(spawn_error(std::io::Error::other("no stdio pipes")));
    };
    let tripped = Arc::new(AtomicBool::new(false));
    let read = super::bounded::BoundedLines::new(stdout, server.max_line, tripped.clone());
    let transport = AsyncRwTransport::new_client(read, stdin);
    let (kill, kill_rx) = oneshot::channel();
    let (exited_tx, exited) = oneshot::channel();
    let pid = child.id();
    let watched = Arc::downgrade(server);
    tokio::spawn(async move {
        tokio::select! {
            status = child.wait() => {
                if let Some(server) = watched.upgrade() {
                    server.process_exited(pid, status.ok());
                }
            }
            _ = kill_rx => {
                if let Err(e) = child.kill().await {
                    tracing::warn!(pid, error = %e, "MCP server was not killed.");
                }
            }
        }
        if let Some(run) = sandbox
            && let Some(limit) = run.finish(crate::tools::sandbox::Ended::Code(0)).await
        {
            tracing::warn!(pid, %limit, "MCP server was stopped by its sandbox's limit.");
        }
        // The receiver is gone when no one waits for the exit.
        exited_tx.send(()).ok();
    });
    server.set_process(Process {
        kill,
        exited,
        tripped,
        pid,
    });
    server.handler().serve(transport).await.map_err(|e| {
        if server.over_the_bound() {
            return server.line_too_long();
        }
        server.protocol_error(e)
    })
}

/// The transport a session runs over (`clawbus mcp list`, the log).
pub(crate) const STDIO: &str = "stdio";
/// See [`STDIO`].
pub(crate) const STREAMABLE_HTTP: &str = "streamable-http";
/// See [`STDIO`]: the older HTTP+SSE, when the server answered 404/405 to Streamable HTTP.
pub(crate) const SSE: &str = "sse";

/// Opens a session with the server at `url` over Streamable HTTP, sending the value of each
/// variable of `headers_env` as its header; when its initialize POST is answered 404 or 405,
/// over the older HTTP+SSE transport at the same URL, with the same headers. Redirects are not
/// followed (the URL is the one the file names) and bodies are bounded. Also says which of the
/// two ([`STREAMABLE_HTTP`] or [`SSE`]) it runs over.
pub(crate) async fn http(
    server: &Arc<Server>,
    url: &str,
    headers_env: &BTreeMap<String, String>,
) -> Result<(Client, &'static str), McpError> {
    let mut headers = HashMap::new();
    for (header, var) in headers_env {
        let missing = || McpError::Config {
            server: server.name.clone(),
            problem: format!("header {header}: variable {var} is not set or not a header value"),
        };
        let value = std::env::var(var).map_err(|_| missing())?;
        let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| missing())?;
        value.set_sensitive(true);
        let name =
            reqwest::header::HeaderName::from_bytes(header.as_bytes()).map_err(|_| missing())?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| server.protocol_error(e))?;
    let legacy_headers: reqwest::header::HeaderMap = headers.clone().into_iter().collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_json_response_size(MAX_HTTP_BODY)
        .max_sse_event_size(MAX_HTTP_BODY)
        .max_error_response_size(MAX_HTTP_ERROR_BODY);
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    let e = match server.handler().serve(transport).await {
        Ok(c) => return Ok((c, STREAMABLE_HTTP)),
        Err(e) => e,
    };
    let Some(status) = super::sse::not_streamable(&e) else {
        return Err(server.protocol_error(e));
    };
    tracing::info!(server = %server.name, status, "MCP server answered Streamable HTTP's initialize with {status}; trying the older HTTP+SSE transport.");
    let transport = super::sse::open(
        &server.name,
        client,
        url,
        legacy_headers,
        MAX_HTTP_BODY,
        server.def.timeout,
    )
    .await
    .map_err(|e| server.protocol_error(e))?;
    let c = server
        .handler()
        .serve(transport)
        .await
        .map_err(|e| server.protocol_error(e))?;
    Ok((c, SSE))
}
