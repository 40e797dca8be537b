//! OpenClaw's own CLI (the npm package `openclaw@2026.9.6` on Node 24.21.0) pointed at a
//! `clawbus up` child as its remote gateway (`gateway.mode = "remote"`,
//! `gateway.remote.url = ws://127.0.0.1:<port>`, the clawbus token), asserting on what a person
//! sees.
//!
//! The install is looked up in `$CLAWBUS_OPENCLAW_DIR`, else
//! `${XDG_CACHE_HOME:-$HOME/.cache}/clawbus-ci` (`.ci/run` puts it there with npm). Without it
//! the tests print `skipped: …`; with `CI=true` they fail instead.

use super::system::{Child as Daemon, spawn_up, stop, up};
use crate::support::{Project, eventually_within, last_user, run_cmd, succeeded};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The OpenClaw release these tests run.
const OPENCLAW_VERSION: &str = "2026.9.6";
/// How long one OpenClaw command may take: Node starts OpenClaw in about 2 s on an idle machine,
/// many times that while the whole suite shares 2 cores.
const OPENCLAW_LIMIT: Duration = Duration::from_secs(120);

/// The folder holding `node_modules/{node,openclaw}`, if OpenClaw is installed; otherwise
/// prints why the test is skipped (or fails, when `CI=true`).
pub(super) fn installed() -> Option<PathBuf> {
    let root = std::env::var_os("CLAWBUS_OPENCLAW_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
                .map(|c| c.join("clawbus-ci"))
        })?;
    let manifest = root.join("node_modules/openclaw/package.json");
    let version = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string));
    let node = root.join("node_modules/node/bin/node");
    let why = match version {
        _ if !node.exists() => format!("no Node at {}", node.display()),
        Some(v) if v == OPENCLAW_VERSION => return Some(root),
        Some(v) => format!(
            "openclaw {v} at {}, not {OPENCLAW_VERSION}",
            manifest.display()
        ),
        None => format!("no openclaw package at {}", manifest.display()),
    };
    let why = format!("{why} (run .ci/run, or set CLAWBUS_OPENCLAW_DIR)");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true needs OpenClaw: {why}");
    }
    eprintln!("skipped: {why}");
    None
}

/// OpenClaw's CLI with a home of its own whose config names the gateway.
pub(super) struct OpenClaw {
    root: PathBuf,
    home: tempfile::TempDir,
}

impl OpenClaw {
    /// A CLI pointed at `daemon` (its WebSocket URL and token), or `None` when not installed.
    pub(super) fn pointed_at(daemon: &Daemon) -> Option<Self> {
        let root = installed()?;
        let home = tempfile::tempdir().unwrap();
        for d in ["state", "tmp"] {
            std::fs::create_dir_all(home.path().join(d)).unwrap();
        }
        let ws = daemon.url.replacen("http://", "ws://", 1);
        let config = serde_json::json!({
            "gateway": { "mode": "remote", "remote": { "url": ws, "token": daemon.token } },
        });
        std::fs::write(home.path().join("openclaw.json"), config.to_string()).unwrap();
        Some(Self { root, home })
    }

    /// `openclaw <args>`, in a clean environment inside its home.
    pub(super) fn command(&self, args: &[&str]) -> Command {
        let h = self.home.path();
        let bin = self.root.join("node_modules/.bin");
        let mut cmd = Command::new(self.root.join("node_modules/node/bin/node"));
        cmd.arg(self.root.join("node_modules/openclaw/openclaw.mjs"))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("LANG", "C.UTF-8")
            .env("HOME", h)
            .env("OPENCLAW_HOME", h)
            .env("OPENCLAW_STATE_DIR", h.join("state"))
            .env("OPENCLAW_CONFIG_PATH", h.join("openclaw.json"))
            .env("TMPDIR", h.join("tmp"))
            .env("OPENCLAW_DISABLE_BONJOUR", "1")
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .env("NO_COLOR", "1")
            .current_dir(h);
        cmd
    }

    /// Runs `openclaw <args>` (at most [`OPENCLAW_LIMIT`]) and returns its output.
    pub(super) async fn run(&self, args: &[&str]) -> Output {
        let child = self
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        finish(child, args).await
    }

    /// Runs `openclaw <args>`, checks it exits 0, and returns its stdout.
    pub(super) async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "openclaw {args:?} must succeed:\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `openclaw <args> --json`-style commands and decodes stdout.
    pub(super) async fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(args).await;
        serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("openclaw {args:?} must print JSON ({e}): {out}"))
    }
}

/// Waits for an OpenClaw child (at most [`OPENCLAW_LIMIT`]); kills it and fails when it overruns.
async fn finish(child: std::process::Child, args: &[&str]) -> Output {
    let pid = child.id();
    let waited = tokio::time::timeout(
        OPENCLAW_LIMIT,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    match waited {
        Ok(out) => out.unwrap().unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("openclaw {args:?} still running after {OPENCLAW_LIMIT:?}");
        }
    }
}

fn project(server: &ScriptedServer, agent: &str) -> Project {
    let p = Project::new();
    p.with_mock_and(&server.base_url(), "")
        .write("agents.d/echo.toml", agent);
    p
}

/// Every model request's last user message, in order.
fn asked(server: &ScriptedServer) -> Vec<String> {
    server.requests().iter().map(last_user).collect()
}

#[actix_rt::test]
async fn openclaw_agent_prints_the_answer_in_the_main_session_in_json_and_in_a_named_session() {
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let p = project(&server, "");
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let plain = oc
        .ok(&["agent", "--agent", "echo", "--message", "hello"])
        .await;
    assert_eq!(plain.trim(), "re: hello", "the answer is printed: {plain}");

    let json = oc
        .json(&["agent", "--agent", "echo", "--message", "again", "--json"])
        .await;
    assert_eq!(json["status"], "ok", "{json}");
    assert_eq!(json["summary"], "completed", "{json}");
    assert_eq!(json["result"]["payloads"][0]["text"], "re: again", "{json}");
    assert_eq!(
        json["result"]["meta"]["agentMeta"]["sessionKey"], "agent:echo:main",
        "without a session key the run is in the agent's main session: {json}"
    );
    assert!(json["result"]["meta"]["durationMs"].is_u64(), "{json}");
    // Both turns were one conversation: the second request carried the first exchange.
    let second = &server.requests()[1];
    let texts = second["messages"].to_string();
    assert!(
        texts.contains("hello") && texts.contains("re: hello"),
        "{texts}"
    );

    let named = oc
        .ok(&[
            "agent",
            "--session-key",
            "agent:echo:side",
            "--message",
            "aside",
        ])
        .await;
    assert_eq!(named.trim(), "re: aside");
    let third = server.requests()[2]["messages"].to_string();
    assert!(
        !third.contains("re: hello"),
        "a named session starts its own conversation: {third}"
    );
    assert_eq!(asked(&server), ["hello", "again", "aside"]);
    let mut cmd = p.clawbus();
    cmd.args(["sessions", "--url", &daemon.url]);
    let listed = run_cmd(cmd).await;
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for key in ["agent:echo:main", "agent:echo:side"] {
        assert!(listed.contains(key), "clawbus lists {key}: {listed}");
    }
    stop(daemon).await;
}

#[actix_rt::test]
async fn openclaw_cron_commands_manage_a_job_that_clawbus_lists_too() {
    let server = ScriptedServer::with_responder(|_| Turn::text("cron done")).await;
    let p = project(&server, "");
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let job = oc
        .json(&[
            "cron",
            "add",
            "--name",
            "hourly-report",
            "--every",
            "1h",
            "--session",
            "isolated",
            "--message",
            "report",
            "--agent",
            "echo",
            "--no-deliver",
        ])
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["schedule"]["everyMs"], 3_600_000, "{job}");
    assert_eq!(job["sessionTarget"], "isolated");
    assert_eq!(job["payload"]["kind"], "agentTurn");

    let table = oc.ok(&["cron", "list"]).await;
    let line = table
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("openclaw cron list shows the job: {table}"));
    assert!(
        line.contains("hourly-report") && line.contains("every 1h"),
        "{line}"
    );
    let mut cmd = p.clawbus();
    cmd.args(["cron", "list", "--url", &daemon.url]);
    let ours = succeeded(&run_cmd(cmd).await);
    assert!(
        ours.contains(&id) && ours.contains("hourly-report"),
        "clawbus cron list shows the job added by OpenClaw: {ours}"
    );

    let off = oc.json(&["cron", "disable", &id]).await;
    assert_eq!(off["enabled"], false, "{off}");
    let listed = oc.json(&["cron", "list", "--json"]).await;
    assert!(
        !listed.to_string().contains(&id),
        "a disabled job is hidden without --all: {listed}"
    );
    let all = oc.json(&["cron", "list", "--all", "--json"]).await;
    assert!(all.to_string().contains(&id), "{all}");
    let on = oc.json(&["cron", "enable", &id]).await;
    assert_eq!(on["enabled"], true, "{on}");

    let status = oc.json(&["cron", "status", "--json"]).await;
    assert!(status["jobs"].as_u64().unwrap() >= 1, "{status}");

    let fired = oc.json(&["cron", "run", &id]).await;
    assert_eq!(fired["ok"], true, "{fired}");
    eventually_within(
        OPENCLAW_LIMIT,
        "the manual run is in openclaw cron runs",
        async || {
            let runs = oc.json(&["cron", "runs", "--id", &id, "--json"]).await;
            runs["entries"][0]["status"] == "ok"
        },
    )
    .await;
    assert_eq!(asked(&server), ["report"]);

    let removed = oc.json(&["cron", "rm", &id]).await;
    assert_eq!(removed["removed"], true, "{removed}");
    let mut cmd = p.clawbus();
    cmd.args(["cron", "list", "--url", &daemon.url]);
    let ours = succeeded(&run_cmd(cmd).await);
    assert!(!ours.contains(&id), "the job is gone: {ours}");
    stop(daemon).await;
}

#[actix_rt::test]
async fn openclaw_status_health_and_logs_show_clawbus_agents_sessions_and_log_lines() {
    let server = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    let p = project(&server, "");
    let mut cmd = p.clawbus();
    cmd.env("RUST_LOG", "info").args(["up", "--port", "0"]);
    let daemon = spawn_up(&p, cmd).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    oc.ok(&["agent", "--agent", "echo", "--message", "hi"])
        .await;

    let status = oc.json(&["status", "--json"]).await;
    let by_agent = &status["sessions"]["byAgent"];
    assert_eq!(by_agent[0]["agentId"], "echo", "{status}");
    assert_eq!(by_agent[0]["count"], 1, "{status}");
    assert_eq!(
        status["sessions"]["recent"][0]["key"], "agent:echo:main",
        "{status}"
    );
    assert_eq!(status["tasks"]["byStatus"]["succeeded"], 1, "{status}");

    let plain = oc.ok(&["status"]).await;
    assert!(plain.contains("Agents"), "{plain}");
    let deep = oc.ok(&["status", "--deep"]).await;
    assert!(deep.contains("Gateway"), "{deep}");

    let health = oc.ok(&["health"]).await;
    assert!(health.contains("Agents: echo (default)"), "{health}");
    assert!(health.contains("agent:echo:main"), "{health}");
    let health = oc.json(&["health", "--json"]).await;
    assert_eq!(health["ok"], true, "{health}");

    let logs = oc.ok(&["logs", "--limit", "500"]).await;
    assert!(
        logs.contains("Run started. agent=echo session=agent:echo:main"),
        "openclaw logs shows clawbus's log lines: {logs}"
    );
    stop(daemon).await;
}

#[actix_rt::test]
async fn openclaw_approvals_pending_lists_an_exec_request_and_resolve_lets_the_run_go_on() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "exec",
            serde_json::json!({ "command": "touch approved.txt" }),
        ),
        Turn::text("done"),
    ])
    .await;
    let ask = "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n";
    let p = project(&server, ask);
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let none = oc.ok(&["approvals", "pending"]).await;
    assert!(none.contains("No pending approvals."), "{none}");
    // The turn waits for the approval: it runs as a child while the operator answers.
    let mut run = oc.command(&["agent", "--agent", "echo", "--message", "make the file"]);
    let run = run
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut listed = String::new();
    eventually_within(
        OPENCLAW_LIMIT,
        "openclaw approvals pending lists the request",
        async || {
            listed = oc.ok(&["approvals", "pending"]).await;
            listed.contains("touch approved.txt")
        },
    )
    .await;
    let id = listed
        .lines()
        .find_map(|l| l.strip_suffix(": touch approved.txt"))
        .unwrap_or_else(|| panic!("the full request text names the id: {listed}"))
        .trim()
        .to_string();
    let resolved = oc.ok(&["approvals", "resolve", &id, "allow-once"]).await;
    assert!(
        resolved.contains(&format!("Approval {id} resolved allow-once")),
        "{resolved}"
    );
    let out = finish(run, &["agent"]).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(p.state_dir().join("workspaces/echo/approved.txt").exists());
    let again = oc.run(&["approvals", "resolve", &id, "deny"]).await;
    assert_ne!(
        again.status.code(),
        Some(0),
        "an answered request stays answered"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already resolved with allow-once"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    stop(daemon).await;
}

/// A tmux server of its own (killed on drop) showing one pseudo-terminal.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server, or `None` (skipped, or failed with `CI=true`) when tmux is missing.
    fn start() -> Option<Self> {
        let found = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            let why = "tmux is not installed (the TUI runs in its pseudo-terminal)";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true needs tmux: {why}");
            }
            eprintln!("skipped: {why}");
            return None;
        }
        let socket = format!(
            "clawbus-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        Some(Self { socket })
    }

    fn tmux(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        cmd
    }

    /// Opens window `name` running `script` (a shell script). The server is told to outlive its
    /// last session: one that exits as a session closes would race the next `open`.
    async fn open(&self, name: &str, script: &Path) {
        let script = script.display().to_string();
        let cmd = self.tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            "sh",
            &script,
            ";",
            "set-option",
            "-g",
            "exit-empty",
            "off",
        ]);
        succeeded(&run_cmd(cmd).await);
    }

    /// What window `name` shows now.
    async fn screen(&self, name: &str) -> String {
        succeeded(&run_cmd(self.tmux(&["capture-pane", "-p", "-t", name])).await)
    }

    /// Waits until window `name` shows `text`.
    async fn shows(&self, name: &str, text: &str) -> String {
        let mut last = String::new();
        let seen = tokio::time::timeout(OPENCLAW_LIMIT, async {
            loop {
                last = self.screen(name).await;
                if last.contains(text) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            seen.is_ok(),
            "the TUI must show {text:?}; it shows:\n{last}"
        );
        last
    }

    async fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        succeeded(&run_cmd(self.tmux(&args)).await);
    }

    async fn close(&self, name: &str) {
        succeeded(&run_cmd(self.tmux(&["kill-session", "-t", name])).await);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]).output();
    }
}

impl OpenClaw {
    /// A shell script that runs `openclaw <args>` as [`OpenClaw::command`] does.
    fn script(&self, name: &str, args: &[&str]) -> PathBuf {
        let cmd = self.command(args);
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
        let mut line = String::from("cd ");
        line.push_str(&quote(self.home.path().as_os_str()));
        line.push_str(" && exec env -i");
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                line.push_str(&format!(" {}={}", k.to_string_lossy(), quote(v)));
            }
        }
        line.push(' ');
        line.push_str(&quote(cmd.get_program()));
        for a in cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let path = self.home.path().join(name);
        std::fs::write(&path, format!("{line}\n")).unwrap();
        path
    }
}

#[actix_rt::test]
async fn openclaw_tui_sends_a_message_shows_the_streamed_answer_and_the_history_on_reopening() {
    let server = ScriptedServer::with_responder(|req| {
        let asked = last_user(req);
        Turn::text_chunks(vec!["re: ", &asked])
    })
    .await;
    let p = project(&server, "");
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let Some(tmux) = Tmux::start() else {
        return;
    };
    let script = oc.script("tui.sh", &["tui", "--session", "agent:echo:t1"]);
    tmux.open("first", &script).await;
    tmux.shows("first", "gateway connected").await;
    tmux.keys("first", &["hello tui", "Enter"]).await;
    let screen = tmux.shows("first", "re: hello tui").await;
    assert!(screen.contains("session t1"), "{screen}");
    assert_eq!(asked(&server), ["hello tui"]);
    tmux.close("first").await;

    tmux.open("again", &script).await;
    let screen = tmux.shows("again", "re: hello tui").await;
    assert!(
        screen.contains("hello tui"),
        "reopened, the TUI shows the conversation: {screen}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "the history is read, not asked again"
    );
    tmux.close("again").await;
    stop(daemon).await;
}

#[actix_rt::test]
async fn the_control_ui_folder_is_served_with_its_bootstrap_config() {
    let Some(root) = installed() else {
        return;
    };
    let dir = root.join("node_modules/openclaw/dist/control-ui");
    let server = ScriptedServer::start(vec![]).await;
    let p = Project::new();
    let extra = format!(
        "[gateway]\ncontrol_ui_dir = {:?}\n",
        dir.display().to_string()
    );
    p.with_mock_and(&server.base_url(), &extra)
        .write("agents.d/echo.toml", "");
    let daemon = up(&p).await;
    let http = reqwest::Client::new();
    let fetch = async |path: &str| {
        let url = format!("{}{path}", daemon.url);
        http.get(url)
            .timeout(crate::support::NET)
            .send()
            .await
            .unwrap()
    };
    let page = fetch("/").await;
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()["content-type"],
        "text/html; charset=utf-8",
        "GET / without an upgrade is the Control UI's page"
    );
    let html = page.text().await.unwrap();
    let script = regex::Regex::new(r#"src="\./(assets/[^"]+\.js)""#)
        .unwrap()
        .captures(&html)
        .unwrap_or_else(|| panic!("the page loads its script: {html}"))[1]
        .to_string();
    let js = fetch(&format!("/{script}")).await;
    assert_eq!(js.status(), 200, "{script}");
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let config: Value = fetch("/control-ui-config.json").await.json().await.unwrap();
    assert_eq!(config["basePath"], "", "{config}");
    assert_eq!(config["assistantAgentId"], "echo", "{config}");
    assert_eq!(
        fetch("/chat").await.status(),
        200,
        "a page of the UI is its index.html"
    );
    assert_eq!(fetch("/assets/none.js").await.status(), 404);
    assert_eq!(fetch("/../clawbus.toml").await.status(), 404);
    stop(daemon).await;
}
