//! An OpenClaw gateway as a child process: its config, its start, its memory, its CLI.
//!
//! Each gateway gets a temporary home (`HOME`, `OPENCLAW_HOME`, `OPENCLAW_STATE_DIR`,
//! `OPENCLAW_CONFIG_PATH`, `TMPDIR` all inside it) and a clean environment: only `PATH` (the
//! cache's Node first), `LANG` and those variables reach it, so no credential from the caller's
//! environment does. The config binds loopback with token auth on a free port and points the
//! custom provider `zero` at the bench's model server, with the hosted model catalogue refresh,
//! update checks and mDNS advertising off.

use super::OpenClawError;
use super::install::{Install, tail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a gateway may take to accept connections (the issue saw up to 38 s on 2 cores).
const STARTUP: Duration = Duration::from_secs(180);
/// How long a gateway may take to stop after SIGTERM before its process tree is killed.
const SHUTDOWN: Duration = Duration::from_secs(30);
/// The longest one `openclaw agent` CLI call may take.
const CLI_TURN: Duration = Duration::from_secs(120);

/// The gateway's config file (`openclaw.json`): loopback, token auth, `port`, the provider
/// `zero` at `model_url` (an OpenAI-compatible `…/v1`) as the default model, nothing that calls
/// out of the machine.
pub(crate) fn config(port: u16, token: &str, model_url: &str) -> Value {
    json!({
        "gateway": {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": { "mode": "token", "token": token },
        },
        "models": {
            "mode": "replace",
            "catalogRefresh": { "enabled": false },
            "providers": {
                "zero": {
                    "baseUrl": model_url,
                    "apiKey": "zero-local",
                    "api": "openai-completions",
                    "models": [{
                        "id": "m", "name": "zero-latency scripted model", "reasoning": false,
                        "input": ["text"],
                        "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0 },
                        "contextWindow": 128000, "maxTokens": 4096,
                    }],
                },
            },
        },
        "agents": { "defaults": { "model": { "primary": "zero/m" } } },
        "update": { "checkOnStart": false, "auto": { "enabled": false } },
        "discovery": { "mdns": { "mode": "off" } },
    })
}

/// A free loopback port (bound, read, released).
pub(crate) fn free_port() -> Result<u16, OpenClawError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| OpenClawError::io(Path::new("127.0.0.1:0"), e))
}

/// A temporary OpenClaw home with its config written.
pub(crate) struct Home {
    /// The folder (`HOME` and `OPENCLAW_HOME`).
    pub dir: PathBuf,
    /// The gateway's port.
    pub port: u16,
    /// The gateway token.
    pub token: String,
}

impl Home {
    /// Writes `dir/openclaw.json` for a fresh port and token, and `NOTES.md` into the agent
    /// workspace (what the tool-call turn reads).
    pub(crate) fn create(dir: &Path, model_url: &str) -> Result<Self, OpenClawError> {
        let port = free_port()?;
        let token = format!("bench-{}", uuid::Uuid::new_v4().simple());
        let workspace = dir.join("state/workspace");
        std::fs::create_dir_all(&workspace).map_err(|e| OpenClawError::io(&workspace, e))?;
        std::fs::create_dir_all(dir.join("tmp")).map_err(|e| OpenClawError::io(dir, e))?;
        let file = dir.join("openclaw.json");
        let text = serde_json::to_string_pretty(&config(port, &token, model_url))
            .map_err(|e| OpenClawError::io(&file, e.into()))?;
        std::fs::write(&file, text).map_err(|e| OpenClawError::io(&file, e))?;
        let notes = workspace.join("NOTES.md");
        std::fs::write(&notes, "a note for the tool-call turn\n")
            .map_err(|e| OpenClawError::io(&notes, e))?;
        Ok(Home {
            dir: dir.to_path_buf(),
            port,
            token,
        })
    }

    /// `node openclaw.mjs <args>` with this home's clean environment.
    pub(crate) fn command(&self, install: &Install) -> Command {
        let mut c = Command::new(install.node());
        c.arg(install.entry())
            .env_clear()
            .env("PATH", install.path_env())
            .env("LANG", "C.UTF-8")
            .env("HOME", &self.dir)
            .env("OPENCLAW_HOME", &self.dir)
            .env("OPENCLAW_STATE_DIR", self.dir.join("state"))
            .env("OPENCLAW_CONFIG_PATH", self.dir.join("openclaw.json"))
            .env("TMPDIR", self.dir.join("tmp"))
            .env("OPENCLAW_DISABLE_BONJOUR", "1")
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        c
    }
}

/// A running `openclaw gateway run` child process.
pub(crate) struct Gateway {
    child: Child,
    /// Its output (what a failure shows).
    pub log: PathBuf,
    /// From spawn until the port accepted a TCP connection.
    pub started: Duration,
    /// The WebSocket URL.
    pub ws_url: String,
    /// The install's folder: a process is only signalled while its command line runs from it.
    root: PathBuf,
}

impl Gateway {
    /// Spawns the gateway and waits (bounded) until its port accepts a connection.
    pub(crate) fn start(install: &Install, home: &Home) -> Result<Self, OpenClawError> {
        let log = home.dir.join("gateway.log");
        let out = std::fs::File::create(&log).map_err(|e| OpenClawError::io(&log, e))?;
        let err = out.try_clone().map_err(|e| OpenClawError::io(&log, e))?;
        let port = home.port.to_string();
        let t = Instant::now();
        let child = home
            .command(install)
            .args(["gateway", "run", "--bind", "loopback", "--port", &port])
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| OpenClawError::io(&install.entry(), e))?;
        let mut gw = Gateway {
            child,
            log,
            started: Duration::ZERO,
            ws_url: format!("ws://127.0.0.1:{port}"),
            root: install.root.clone(),
        };
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], home.port));
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = gw.child.try_wait() {
                return Err(gw.failure(format!("the gateway exited before listening: {status}")));
            }
            if t.elapsed() > STARTUP {
                return Err(gw.failure(format!("port {port} not accepting after {STARTUP:?}")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        gw.started = t.elapsed();
        Ok(gw)
    }

    /// A start error carrying the end of the gateway's log.
    pub(crate) fn failure(&self, what: String) -> OpenClawError {
        let log = std::fs::read(&self.log).unwrap_or_default();
        OpenClawError::Gateway {
            what,
            log_tail: tail(&strip_ansi(&log), 2000),
        }
    }

    /// RSS of the gateway and every process under it (its workers), in MiB.
    pub(crate) fn tree_rss_mib(&self) -> f64 {
        tree_rss_kib(self.child.id(), &processes()) as f64 / 1024.0
    }

    /// SIGTERM, then at most [`SHUTDOWN`]; after that the whole tree is killed.
    pub(crate) fn stop(&mut self) {
        let tree = descendants(self.child.id(), &processes());
        signal(self.child.id(), rustix::process::Signal::TERM);
        let deadline = Instant::now() + SHUTDOWN;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            eprintln!("compare: OpenClaw gateway did not stop within {SHUTDOWN:?}; killed");
        }
        self.kill_tree(&tree);
    }

    fn kill_tree(&mut self, tree: &[u32]) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        for &pid in tree {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&*self.root.to_string_lossy()) {
                signal(pid, rustix::process::Signal::KILL);
            }
        }
    }

    /// One turn through the CLI (`openclaw agent --session-key … --message … --json`, a
    /// process per call, talking to this gateway); the answer's text.
    pub(crate) fn cli_turn(
        &self,
        install: &Install,
        home: &Home,
        session: &str,
        message: &str,
    ) -> Result<CliTurn, OpenClawError> {
        let mut child = home
            .command(install)
            .args([
                "agent",
                "--session-key",
                session,
                "--message",
                message,
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| OpenClawError::io(&install.entry(), e))?;
        let deadline = Instant::now() + CLI_TURN;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
        }
        let out = child
            .wait_with_output()
            .map_err(|e| OpenClawError::io(&install.entry(), e))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        parse_cli_turn(&stdout).map_err(|what| OpenClawError::Turn {
            how: "openclaw agent --json",
            what: format!(
                "{what}; {}; stderr: {}",
                out.status,
                tail(&strip_ansi(&out.stderr), 800)
            ),
        })
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let tree = descendants(self.child.id(), &processes());
            self.kill_tree(&tree);
        }
    }
}

/// What `openclaw agent --json` printed for one turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CliTurn {
    /// The run's id.
    pub run_id: String,
    /// The texts of the reply's payloads, joined.
    pub text: String,
    /// `result.meta.durationMs`: the gateway's own time for the run.
    pub duration_ms: Option<f64>,
}

/// Parses `openclaw agent --json` output: the JSON object on stdout (anything printed before its
/// first `{` line is skipped); an error unless `status` is `"ok"`.
pub(crate) fn parse_cli_turn(stdout: &str) -> Result<CliTurn, String> {
    let start = stdout
        .lines()
        .position(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("no JSON object in the output: {:?}", truncate(stdout, 300)))?;
    let body = stdout.lines().skip(start).collect::<Vec<_>>().join("\n");
    let v: Value = serde_json::from_str(&body)
        .map_err(|e| format!("output is not JSON ({e}): {:?}", truncate(&body, 300)))?;
    if v["status"] != "ok" {
        return Err(format!(
            "status {} (summary {}), expected \"ok\"",
            v["status"], v["summary"]
        ));
    }
    let text = v["result"]["payloads"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    Ok(CliTurn {
        run_id: v["runId"].as_str().unwrap_or_default().to_string(),
        text,
        duration_ms: v["result"]["meta"]["durationMs"].as_f64(),
    })
}

fn truncate(s: &str, max: usize) -> &str {
    let end = (0..=max.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    &s[..end]
}

/// The output without ANSI colour escapes (OpenClaw colours its log even into a file).
pub(crate) fn strip_ansi(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                i += 1;
            }
            i += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// One process: pid, parent pid, RSS in KiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Proc {
    /// Process id.
    pub pid: u32,
    /// Parent's id.
    pub ppid: u32,
    /// Resident set, KiB.
    pub rss_kib: u64,
}

/// Every process visible in `/proc`.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
            };
            Some(Proc {
                pid,
                ppid: field("PPid:")?.parse().ok()?,
                rss_kib: field("VmRSS:").and_then(|v| v.parse().ok()).unwrap_or(0),
            })
        })
        .collect()
}

/// The ids of every process under `root` (children, their children, …), not `root` itself.
pub(crate) fn descendants(root: u32, procs: &[Proc]) -> Vec<u32> {
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent && p.pid != root) {
            if !found.contains(&p.pid) {
                found.push(p.pid);
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// RSS of `root` and its descendants, KiB.
pub(crate) fn tree_rss_kib(root: u32, procs: &[Proc]) -> u64 {
    let tree = descendants(root, procs);
    procs
        .iter()
        .filter(|p| p.pid == root || tree.contains(&p.pid))
        .map(|p| p.rss_kib)
        .sum()
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}
