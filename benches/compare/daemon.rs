//! The `clawbus up` child process the scenarios drive, its project, and the HTTP call they share.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon may take to print `listening on` and accept a connection.
const STARTUP: Duration = Duration::from_secs(30);
/// How long a daemon may take to stop after SIGTERM before it is killed.
const SHUTDOWN: Duration = Duration::from_secs(30);

/// Writes the project: agents `main`, `a` and `b` (may `agent_call`), `s` (may
/// `sessions_spawn`), all on the provider `zero` at `model_url`. Returns its folder.
pub(super) fn write_project(base: &Path, model_url: &str, sessions: usize) -> PathBuf {
    let p = base.join("project");
    std::fs::create_dir_all(p.join("agents.d")).unwrap();
    std::fs::write(
        p.join("clawbus.toml"),
        format!(
            "[providers.zero]\nkind = \"openai\"\nbase_url = \"{model_url}\"\ntimeout = \"30s\"\n\
             max_retries = 0\n\n[defaults]\nmodel = \"zero/m\"\n\n[sessions]\nmax_live = {}\n",
            sessions + 2_000
        ),
    )
    .unwrap();
    let call = |peer: &str| format!("may_call = [\"{peer}\"]\n[tools]\nallow = [\"agent_call\"]\n");
    for (name, body) in [
        ("main", String::new()),
        ("a", call("b")),
        ("b", call("a")),
        ("s", "[tools]\nallow = [\"sessions_spawn\"]\n".to_string()),
    ] {
        std::fs::write(p.join(format!("agents.d/{name}.toml")), body).unwrap();
    }
    std::fs::write(p.join("NOTES.md"), "a note for the tool-call turn\n").unwrap();
    p
}

/// A `clawbus up` child process.
pub(super) struct Daemon {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The gateway token.
    pub token: String,
    log: PathBuf,
    /// From spawn until the port accepted a connection.
    pub started: Duration,
}

impl Daemon {
    pub(super) fn start(project: &Path, state: &Path) -> Self {
        std::fs::create_dir_all(state).unwrap();
        let log = state.join("daemon.log");
        let t = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_clawbus"))
            .args(["up", "--port", "0", "--config"])
            .arg(project.join("clawbus.toml"))
            .arg("--agents")
            .arg(project.join("agents.d"))
            .arg("--state-dir")
            .arg(state)
            .current_dir(project)
            .env("RUST_LOG", "warn")
            .env_remove("CLAWBUS_MODEL")
            .env_remove("CLAWBUS_TOKEN")
            .env_remove("CLAWBUS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let url = wait_listening(&mut child);
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "clawbus up did not print `listening on` within {STARTUP:?}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let addr = url.trim_start_matches("http://").trim_end_matches('/');
        let deadline = t + STARTUP;
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "{addr} never accepted a connection"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let started = t.elapsed();
        let token = std::fs::read_to_string(state.join("gateway.token"))
            .unwrap()
            .trim()
            .to_string();
        Daemon {
            child,
            url,
            token,
            log,
            started,
        }
    }

    pub(super) fn rss_mib(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// Panics with `what` and the daemon's log unless `ok`.
    pub(super) fn check(&self, ok: bool, what: &str) {
        if !ok {
            panic!(
                "{what}\ndaemon log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    /// SIGTERM, then at most [`SHUTDOWN`]; SIGKILL after that.
    pub(super) fn stop(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + SHUTDOWN;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    eprintln!("compare: daemon did not stop within {SHUTDOWN:?}; killed");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads the daemon's stdout until `listening on <url>` (bounded by [`STARTUP`]), then keeps
/// draining it on a thread so the daemon never blocks on a full pipe.
fn wait_listening(child: &mut Child) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(u) = line.strip_prefix("listening on ") {
                let _ = tx.send(u.trim().to_string());
            }
        }
    });
    rx.recv_timeout(STARTUP).ok()
}

/// `POST /v1/agents/{agent}/tasks`; the JSON answer, or `{"error": …}` on a transport error.
pub(super) async fn post(http: &reqwest::Client, d: &Daemon, agent: &str, body: &Value) -> Value {
    post_json(http, d, &format!("/v1/agents/{agent}/tasks"), body).await
}

/// `POST {path}` with the token; the JSON answer, or `{"error": …}` on a transport error.
pub(super) async fn post_json(
    http: &reqwest::Client,
    d: &Daemon,
    path: &str,
    body: &Value,
) -> Value {
    let res = http
        .post(format!("{}{path}", d.url))
        .bearer_auth(&d.token)
        .json(body)
        .send()
        .await;
    match res {
        Ok(r) => r
            .json()
            .await
            .unwrap_or_else(|e| json!({ "error": e.to_string() })),
        Err(e) => json!({ "error": e.to_string() }),
    }
}
