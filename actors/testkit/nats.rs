//! A real `nats-server` (≥ 2.11, JetStream on) on a free loopback port with its own store folder.
//!
//! The binary is `$CLAWBUS_NATS_SERVER`, else the one `.ci/run` installs under
//! `${XDG_CACHE_HOME:-$HOME/.cache}/clawbus-ci/nats-venv/bin/`, else `nats-server` on `PATH`.
//! Without a usable one, [`NatsServer::shared_or_skip`] prints `skipped: <reason>` and answers
//! `None`, unless `CI=true`: then the test fails.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The oldest server the NATS backend accepts (per-key TTL).
const MIN_VERSION: (u64, u64) = (2, 11);
/// How long a server may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// A running `nats-server`, stopped when dropped, or when the test process ends (a shell
/// around it kills it once its stdin, held here, closes).
pub struct NatsServer {
    child: Child,
    stdin: Option<ChildStdin>,
    url: String,
    store: PathBuf,
    /// The binary's version (`2.15.1`).
    pub version: String,
    /// A message per "Server is ready" line on its stderr.
    ready: Mutex<mpsc::Receiver<()>>,
}

/// The shell around the server: starts it, stops and starts it on `stop`/`start` lines, and
/// stops it (removing its store) when its stdin closes.
const SUPERVISOR: &str = r#""$@" </dev/null & p=$!
while read c; do
  case "$c" in
    stop) kill $p; wait $p ;;
    start) "$@" </dev/null & p=$! ;;
  esac
done
kill $p 2>/dev/null; wait $p; rm -rf "$CLAWBUS_NATS_STORE""#;

impl NatsServer {
    /// Starts a server on a free loopback port with JetStream on and a fresh store folder.
    pub fn start() -> Result<Self, String> {
        Self::start_with(true)
    }

    /// Starts a server on a free loopback port, JetStream on (with a fresh store folder) or off.
    pub fn start_with(jetstream: bool) -> Result<Self, String> {
        let (bin, version) = find_binary()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let store =
            std::env::temp_dir().join(format!("clawbus-nats-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&store).map_err(|e| format!("{}: {e}", store.display()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            // Also when the test process ends without dropping it (a shared server): the store
            // folder goes with the server. `stop` and `start` lines on stdin stop the server
            // and start it again on the same port and store (`NatsServer::stop`, `start_again`).
            .arg(SUPERVISOR)
            .env("CLAWBUS_NATS_STORE", &store)
            .arg("sh")
            .arg(&bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(if jetstream {
                vec!["-js".into(), "-sd".into(), store.clone().into_os_string()]
            } else {
                Vec::new()
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(stderr) = stderr else { return };
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Server is ready") && ready_tx.send(()).is_err() {
                    return;
                }
            }
        });
        let server = Self {
            child,
            stdin,
            url: format!("nats://127.0.0.1:{port}"),
            store,
            version,
            ready: Mutex::new(ready_rx),
        };
        server.await_ready()?;
        Ok(server)
    }

    fn await_ready(&self) -> Result<(), String> {
        let ready = self.ready.lock().map_err(|e| e.to_string())?;
        ready
            .recv_timeout(READY_WITHIN)
            .map_err(|_| format!("{} did not become ready within {READY_WITHIN:?}", self.url))
    }

    fn tell(&mut self, line: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or("the server's supervisor is gone")?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot tell the supervisor to {line}: {e}"))
    }

    /// Stops the server (SIGTERM) and waits until its port is closed; its store stays for
    /// [`NatsServer::start_again`].
    pub fn stop(&mut self) -> Result<(), String> {
        self.tell("stop")?;
        let addr = self.url.trim_start_matches("nats://").to_string();
        for _ in 0..(READY_WITHIN.as_millis() / 50) {
            if std::net::TcpStream::connect(&addr).is_err() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("{} still accepts connections after stop", self.url))
    }

    /// Starts the server again on the same port over the same store, once it says it is ready.
    pub fn start_again(&mut self) -> Result<(), String> {
        self.tell("start")?;
        self.await_ready()
    }

    /// One server for the whole test process, started on first use; `None` (after printing
    /// `skipped: <reason>` for `test`) when none can be started outside CI.
    ///
    /// # Panics
    /// When none can be started and `CI=true`.
    #[allow(clippy::panic)]
    pub fn shared_or_skip(test: &str) -> Option<&'static NatsServer> {
        static SHARED: OnceLock<Result<NatsServer, String>> = OnceLock::new();
        match SHARED.get_or_init(NatsServer::start) {
            Ok(server) => Some(server),
            Err(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("{test}: a NATS server is required in CI: {reason}")
            }
            Err(reason) => {
                println!("skipped: {test}: {reason}");
                None
            }
        }
    }

    /// A server of its own for `test`; `None` (after printing `skipped: <reason>`) when none
    /// can be started outside CI.
    ///
    /// # Panics
    /// When none can be started and `CI=true`.
    #[allow(clippy::panic)]
    pub fn start_or_skip(test: &str) -> Option<NatsServer> {
        Self::start_with_or_skip(test, true)
    }

    /// Like [`NatsServer::start_or_skip`], JetStream on or off.
    ///
    /// # Panics
    /// When none can be started and `CI=true`.
    #[allow(clippy::panic)]
    pub fn start_with_or_skip(test: &str, jetstream: bool) -> Option<NatsServer> {
        match NatsServer::start_with(jetstream) {
            Ok(server) => Some(server),
            Err(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("{test}: a NATS server is required in CI: {reason}")
            }
            Err(reason) => {
                println!("skipped: {test}: {reason}");
                None
            }
        }
    }

    /// Its URL, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its JetStream store folder (for figures of what the server keeps on disk).
    pub fn store_dir(&self) -> &std::path::Path {
        &self.store
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the shell kills the server and waits for it
        if self.child.wait().is_err() {
            tracing::warn!("nats-server wrapper could not be waited for");
        }
        if self.store.exists() {
            if let Err(e) = std::fs::remove_dir_all(&self.store) {
                tracing::debug!(error = %e, "NATS store folder not removed");
            }
        }
    }
}

fn find_binary() -> Result<(PathBuf, String), String> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(bin) = std::env::var_os("CLAWBUS_NATS_SERVER") {
        candidates.push(bin.into());
    }
    if let Some(cache) = cache {
        candidates.push(cache.join("clawbus-ci/nats-venv/bin/nats-server"));
    }
    candidates.push("nats-server".into());
    let mut reasons = Vec::new();
    for bin in candidates {
        match version_of(&bin) {
            Ok(v) if recent_enough(&v) => return Ok((bin, v)),
            Ok(v) => reasons.push(format!(
                "{} is {v}, older than {}.{}",
                bin.display(),
                MIN_VERSION.0,
                MIN_VERSION.1
            )),
            Err(e) => reasons.push(format!("{}: {e}", bin.display())),
        }
    }
    Err(format!(
        "no nats-server >= {}.{} ({}); run .ci/run or set CLAWBUS_NATS_SERVER",
        MIN_VERSION.0,
        MIN_VERSION.1,
        reasons.join("; ")
    ))
}

fn version_of(bin: &PathBuf) -> Result<String, String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    // `nats-server: v2.15.1`
    text.split_whitespace()
        .last()
        .map(|v| v.trim_start_matches('v').to_string())
        .ok_or_else(|| "no version printed".to_string())
}

fn recent_enough(version: &str) -> bool {
    let mut parts = version.split(['.', '-']).map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= MIN_VERSION,
        _ => false,
    }
}
