//! The filtering proxy of `network = "allow"`, run by the daemon outside the sandbox.
//!
//! The sandbox has a network namespace of its own with nothing but a loopback. Its only way out
//! is a unix socket bind-mounted into it, behind which this proxy speaks HTTP proxy (`CONNECT
//! host:port` for tunnels such as https, absolute-form `GET http://…` for plain http). Inside, the
//! forwarder (`super::forward`) listens on `127.0.0.1:`[`PROXY_PORT`] and pipes each connection to
//! the socket; `HTTP_PROXY` and friends point at it.
//!
//! Per request: the host must match `sandbox.allow_domains`; the name is resolved here, once, and
//! every address must be public (`web_fetch`'s guard: no loopback, private, link-local incl. the
//! cloud metadata address, …); the connection goes to the checked address. Heads are bounded
//! ([`head::MAX_HEAD_BYTES`], [`head::MAX_HEADERS`]), so are concurrent connections
//! ([`MAX_CONNECTIONS`]), and every refusal is logged with the host and the reason (never the
//! path, which may hold a token). One proxy runs per sandboxed command, and stops with it.

pub(crate) mod head;
#[cfg(test)]
mod tests;

use crate::tools::web::guard::{self, GuardError, Target};
use clawbus_core::config::SandboxDef;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{debug, warn};

/// The port the forwarder listens on inside the sandbox (its network namespace is its own).
pub(crate) const PROXY_PORT: u16 = 3128;
/// Connections one sandbox may hold open through the proxy at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the proxy turns a name into addresses.
#[derive(Debug, Clone, Default)]
pub(crate) enum Resolver {
    /// The system's resolver (`getaddrinfo`), then the guard.
    #[default]
    System,
    /// Tests only: fixed answers, so that a name can reach a server on loopback.
    #[cfg(test)]
    Fake(Arc<FakeDns>),
}

/// Fixed answers for tests; a name in neither list goes to the system's resolver.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeDns {
    /// Names that reach this address with the range check skipped (a test's loopback server).
    pub pinned: Vec<(String, SocketAddr)>,
    /// Names that resolve to this address, which is then checked like any other.
    pub answers: Vec<(String, IpAddr)>,
}

impl Resolver {
    /// The checked address to connect to for `host:port` (the range check skipped when
    /// `allowed`). `host` is a name or an IP literal without brackets.
    pub(crate) async fn resolve(
        &self,
        host: &str,
        port: u16,
        allowed: bool,
    ) -> Result<Target, GuardError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            if !allowed {
                guard::check(host, ip)?;
            }
            return Ok(Target {
                domain: None,
                addr: SocketAddr::new(ip, port),
                allowed,
            });
        }
        match self {
            Self::System => guard::resolve_name(host, port, allowed).await,
            #[cfg(test)]
            Self::Fake(dns) => {
                if let Some((_, addr)) = dns.pinned.iter().find(|(n, _)| n == host) {
                    return Ok(Target {
                        domain: Some(host.to_string()),
                        addr: *addr,
                        allowed: true,
                    });
                }
                match dns.answers.iter().find(|(n, _)| n == host) {
                    Some((_, ip)) => {
                        guard::checked(host, vec![SocketAddr::new(*ip, port)], allowed)
                    }
                    None => guard::resolve_name(host, port, allowed).await,
                }
            }
        }
    }
}

/// What the proxy allows, and for whom (in its log lines).
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// The sandbox settings (`allow_domains`); `None`: any name may be asked for (the
    /// browser's proxy, whose pages name any host), the address guard still deciding.
    pub def: Option<Arc<SandboxDef>>,
    /// How names are resolved.
    pub resolver: Resolver,
    /// The agent, for the log.
    pub agent: String,
    /// `(host, port)` pairs reached without the range check (the browser's test-only
    /// `test_allow_origins`); empty for the sandbox.
    pub exempt: Vec<(String, u16)>,
}

/// A running proxy: its socket, removed with its folder and the serving task when dropped.
#[derive(Debug)]
pub(crate) struct ProxyRun {
    dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl ProxyRun {
    /// The host path of the socket to mount into the sandbox.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join("proxy.sock")
    }
}

impl Drop for ProxyRun {
    fn drop(&mut self) {
        // Aborting the task drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

/// Starts a proxy for one sandboxed command on a fresh socket only the daemon's user can reach.
pub(crate) fn start(policy: Policy) -> io::Result<ProxyRun> {
    let dir = tempfile::Builder::new()
        .prefix("clawbus-proxy-")
        .tempdir()?;
    let listener = UnixListener::bind(dir.path().join("proxy.sock"))?;
    let task = tokio::spawn(serve(listener, Arc::new(policy)));
    Ok(ProxyRun { dir, task })
}

/// A proxy on a loopback TCP port (the browser's: Chromium takes no unix-socket proxy); it stops
/// when dropped.
#[derive(Debug)]
pub(crate) struct TcpProxy {
    /// Where it listens (`127.0.0.1:<port>`).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy on `127.0.0.1:<a free port>`.
pub(crate) fn start_tcp(policy: Policy) -> io::Result<TcpProxy> {
    let std = std::net::TcpListener::bind("127.0.0.1:0")?;
    std.set_nonblocking(true)?;
    let addr = std.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(std)?;
    let task = tokio::spawn(serve(listener, Arc::new(policy)));
    Ok(TcpProxy { addr, task })
}

/// A listener the proxy serves: a unix socket (the sandbox) or loopback TCP (the browser).
trait Accept: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn next_client(&self) -> impl std::future::Future<Output = io::Result<Self::Stream>> + Send;
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn next_client(&self) -> io::Result<Self::Stream> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl Accept for tokio::net::TcpListener {
    type Stream = TcpStream;
    async fn next_client(&self) -> io::Result<Self::Stream> {
        self.accept().await.map(|(s, _)| s)
    }
}

async fn serve(listener: impl Accept, policy: Arc<Policy>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.next_client() => a,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let mut stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "Sandbox proxy: accept failed; the proxy stops.");
                return;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            warn!(agent = %policy.agent, limit = MAX_CONNECTIONS, "Sandbox network request refused: too many connections.");
            conns.spawn(async move {
                reply(
                    &mut stream,
                    503,
                    "too many connections through the sandbox proxy",
                )
                .await;
            });
            continue;
        };
        let policy = policy.clone();
        conns.spawn(async move {
            handle(stream, &policy).await;
            drop(permit);
        });
    }
}

/// One client connection: its head, the decision, then bytes both ways.
pub(crate) async fn handle(mut client: impl AsyncRead + AsyncWrite + Unpin, policy: &Policy) {
    let request = match tokio::time::timeout(HEAD_TIMEOUT, head::read(&mut client)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            warn!(agent = %policy.agent, reason = %e, "Sandbox network request refused.");
            let status = match e {
                head::HeadError::TooLarge => 431,
                _ => 400,
            };
            reply(&mut client, status, &e.to_string()).await;
            return;
        }
        Err(_) => {
            warn!(agent = %policy.agent, "Sandbox network request refused: no request head in time.");
            reply(&mut client, 408, "no request head in time").await;
            return;
        }
    };
    let host = request.host.as_str();
    if policy.def.as_ref().is_some_and(|d| !d.allows_domain(host)) {
        let why = format!("{host} is not in sandbox.allow_domains");
        warn!(agent = %policy.agent, host, port = request.port, reason = %why, "Sandbox network request refused.");
        reply(&mut client, 403, &why).await;
        return;
    }
    let exempt = policy
        .exempt
        .iter()
        .any(|(h, p)| h == host && *p == request.port);
    let target = match policy.resolver.resolve(host, request.port, exempt).await {
        Ok(t) => t,
        Err(e) => {
            warn!(agent = %policy.agent, host, port = request.port, reason = %e, "Sandbox network request refused.");
            reply(&mut client, 403, &e.to_string()).await;
            return;
        }
    };
    let server = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target.addr)).await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            debug!(agent = %policy.agent, host, error = %e, "Sandbox proxy: the server refused.");
            reply(
                &mut client,
                502,
                &format!("could not connect to {host}: {e}"),
            )
            .await;
            return;
        }
        Err(_) => {
            reply(&mut client, 504, &format!("connecting to {host} timed out")).await;
            return;
        }
    };
    debug!(agent = %policy.agent, host, addr = %target.addr, tunnel = request.tunnel, "Sandbox proxy: connected.");
    pipe(client, server, request).await;
}

async fn pipe(
    mut client: impl AsyncRead + AsyncWrite + Unpin,
    mut server: TcpStream,
    request: head::Request,
) {
    if request.tunnel
        && client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
    {
        return;
    }
    if server.write_all(&request.forward).await.is_err() {
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut server).await {
        debug!(error = %e, "Sandbox proxy: a connection ended with an error.");
    }
}

/// A short answer with a text body naming why, then the connection closes.
async fn reply(client: &mut (impl AsyncWrite + Unpin), status: u16, why: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Gateway Timeout",
    };
    let body = format!("clawbus sandbox proxy: {why}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = client.write_all(text.as_bytes()).await {
        debug!(error = %e, "Sandbox proxy: could not answer a refused client.");
    }
    let _closed = client.shutdown().await;
}
