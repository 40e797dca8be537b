//! The DevTools protocol over `--remote-debugging-pipe`: Chromium reads commands on its fd 3
//! and writes answers and events on its fd 4, each message one JSON object ended by a NUL byte.
//!
//! Why a pipe and why no CDP crate: a pipe has no port at all, so no other process on the host
//! can reach the browser (a `--remote-debugging-port`, even `0` on loopback, is reachable by
//! every local user until it closes), and Chromium exits by itself when the pipe closes, so a
//! daemon killed with `-9` leaves no browser behind. The CDP crates (`chromiumoxide`,
//! `headless_chrome`) speak the protocol over a WebSocket, which would pull a WebSocket stack
//! into the runtime crate (the layer rules forbid `tungstenite` below the channels) and needs
//! the port; the few commands used here are plain JSON, so they are written directly.
//!
//! Handing the pipe to fds 3 and 4 without `unsafe` (a `pre_exec` `dup2`) and without another
//! crate (`command-fds` wraps that same `pre_exec`): the browser is started through
//! `sh -c 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null'` with the pipes as the shell's stdin
//! and stdout. The shell moves them to 3 and 4 and `exec`s Chromium in its own place, so the
//! child's pid is Chromium's. Only std's own pipes are involved.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

/// The longest message read from the browser (a full-page screenshot is the largest); a longer
/// one closes the connection.
const MAX_MESSAGE: usize = 48 * 1024 * 1024;
/// The limit on one command when the caller gives none.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The tail of Chromium's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 4096;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CdpError {
    /// The browser is gone (exited, killed, or the pipe broke).
    #[error("the browser is not running")]
    Closed,
    /// No answer within the limit.
    #[error("{method} got no answer within {after:?}")]
    TimedOut {
        /// The command.
        method: String,
        /// The limit.
        after: Duration,
    },
    /// The browser answered an error.
    #[error("{method}: {message}")]
    Protocol {
        /// The command.
        method: String,
        /// The browser's message.
        message: String,
    },
}

/// One event the browser sent.
#[derive(Debug)]
pub(crate) struct Event {
    /// `Domain.event`.
    pub method: String,
    /// The session (tab) it belongs to; `None` for the browser itself.
    pub session: Option<String>,
    /// Its parameters.
    pub params: Value,
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>;

/// A command channel to one browser process.
pub(crate) struct Cdp {
    writer: tokio::sync::Mutex<ChildStdin>,
    pending: Arc<Pending>,
    next: AtomicU64,
    closed: watch::Receiver<bool>,
}

/// A started Chromium: its process and its command channel.
pub(crate) struct Launched {
    /// The process (Chromium itself, in its own process group).
    pub child: Child,
    /// The command channel.
    pub cdp: Arc<Cdp>,
    /// The last bytes of its stderr, to explain an early exit.
    pub stderr: Arc<Mutex<Vec<u8>>>,
}

/// The loopback ports a browser's connections go to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ports {
    /// The guarded proxy every http(s) connection goes through.
    pub proxy: u16,
    /// The socket WebSockets are sent to, which never answers.
    pub sink: u16,
}

/// Starts `exe` headless with `profile` as its user-data folder and the DevTools pipe, plus
/// `extra` arguments; every event goes to `on_event` (called on the reader task: it must not
/// block).
pub(crate) fn launch(
    exe: &Path,
    profile: &Path,
    ports: Ports,
    extra: &[String],
    on_event: Arc<dyn Fn(Event) + Send + Sync>,
) -> std::io::Result<Launched> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
        .arg(exe)
        .args([
            "--headless",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-sync",
            "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
            "--metrics-recording-only",
            "--mute-audio",
            "--password-store=basic",
            "--use-mock-keychain",
            "--hide-scrollbars",
            "--window-size=1280,800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        // http(s) goes through the guarded proxy (Chromium resolves no name itself; the proxy
        // connects to the address it checked). WebSockets are not seen by request interception:
        // Chromium sends them to the SOCKS proxy when one is set, and that is a loopback socket
        // the daemon holds and never answers, so none connects anywhere. Loopback is not exempt
        // (`<-loopback>`). WebRTC may not send UDP outside a proxy.
        .arg(format!(
            "--proxy-server=http=127.0.0.1:{p};https=127.0.0.1:{p};socks=socks5://127.0.0.1:{s}",
            p = ports.proxy,
            s = ports.sink
        ))
        .arg("--proxy-bypass-list=<-loopback>")
        .arg("--force-webrtc-ip-handling-policy=disable_non_proxied_udp")
        .args(extra);
    if rustix::process::geteuid().is_root() {
        // Chromium refuses to run its sandbox as root; the address guard still holds.
        cmd.arg("--no-sandbox");
    }
    cmd.arg("about:blank")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the browser's pipes were not opened"));
    };
    let stderr_tail = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut err) = child.stderr.take() {
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = tail.lock() {
                    t.extend_from_slice(&buf[..n]);
                    let excess = t.len().saturating_sub(STDERR_TAIL);
                    t.drain(..excess);
                }
            }
        });
    }
    let pending: Arc<Pending> = Arc::default();
    let (closed_tx, closed) = watch::channel(false);
    tokio::spawn(read_loop(stdout, pending.clone(), on_event, closed_tx));
    Ok(Launched {
        child,
        cdp: Arc::new(Cdp {
            writer: tokio::sync::Mutex::new(stdin),
            pending,
            next: AtomicU64::new(1),
            closed,
        }),
        stderr: stderr_tail,
    })
}

async fn read_loop(
    mut out: ChildStdout,
    pending: Arc<Pending>,
    on_event: Arc<dyn Fn(Event) + Send + Sync>,
    closed: watch::Sender<bool>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match out.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let scanned = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        let mut from = scanned;
        while let Some(pos) = buf[from..].iter().position(|b| *b == 0) {
            let end = from + pos;
            dispatch(&buf[start..end], &pending, on_event.as_ref());
            start = end + 1;
            from = start;
        }
        buf.drain(..start);
        if buf.len() > MAX_MESSAGE {
            tracing::error!(
                bytes = buf.len(),
                "A browser message is larger than the cap; closing the connection."
            );
            break 'read;
        }
    }
    let _closed_now = closed.send(true);
    // Whoever still waits learns that the browser is gone.
    if let Ok(mut p) = pending.lock() {
        p.clear();
    }
}

fn dispatch(raw: &[u8], pending: &Pending, on_event: &(dyn Fn(Event) + Send + Sync)) {
    let Ok(mut msg) = serde_json::from_slice::<Value>(raw) else {
        tracing::warn!(
            bytes = raw.len(),
            "The browser sent a message that is not JSON; ignored."
        );
        return;
    };
    if let Some(id) = msg.get("id").and_then(Value::as_u64) {
        let waiter = pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(tx) = waiter {
            let answer = match msg.get_mut("error") {
                Some(e) => Err(e["message"].as_str().unwrap_or("error").to_string()),
                None => Ok(msg
                    .get_mut("result")
                    .map(Value::take)
                    .unwrap_or(Value::Null)),
            };
            let _gone = tx.send(answer);
        }
        return;
    }
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return;
    };
    on_event(Event {
        method: method.to_string(),
        session: msg
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string),
        params: msg
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null),
    });
}

impl Cdp {
    /// Sends `method` to `session` (the browser when `None`) and waits for its answer, at most
    /// [`CALL_TIMEOUT`].
    pub(crate) async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, CdpError> {
        self.call_within(session, method, params, CALL_TIMEOUT)
            .await
    }

    /// [`Cdp::call`] with its own limit.
    pub(crate) async fn call_within(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, CdpError> {
        let rx = self.send(session, method, params).await?;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(message))) => Err(CdpError::Protocol {
                method: method.to_string(),
                message,
            }),
            Ok(Err(_)) => Err(CdpError::Closed),
            Err(_) => Err(CdpError::TimedOut {
                method: method.to_string(),
                after: limit,
            }),
        }
    }

    /// Sends `method` without waiting for the answer (it is dropped when it comes).
    pub(crate) async fn notify(&self, session: Option<&str>, method: &str, params: Value) {
        if let Err(e) = self.send(session, method, params).await {
            tracing::debug!(method, error = %e, "A browser command could not be sent.");
        }
    }

    async fn send(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<oneshot::Receiver<Result<Value, String>>, CdpError> {
        if *self.closed.borrow() {
            return Err(CdpError::Closed);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::from(s);
        }
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| CdpError::Closed)?
            .insert(id, tx);
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        let mut w = self.writer.lock().await;
        if w.write_all(&bytes).await.is_err() || w.flush().await.is_err() {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
            return Err(CdpError::Closed);
        }
        Ok(rx)
    }

    /// Resolves once the connection is closed (the browser exited or was stopped).
    pub(crate) async fn closed(&self) {
        let mut rx = self.closed.clone();
        let _either = rx.wait_for(|c| *c).await;
    }

    /// Whether the connection is closed.
    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }
}
