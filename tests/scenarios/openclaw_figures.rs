//! Figures against OpenClaw itself, on this machine and one local scripted model server (an
//! OpenAI-compatible loopback server answering at once): `openclaw agent --json` (OpenClaw's
//! CLI, a Node process per call) against a `clawbus up` child and against OpenClaw's own gateway
//! (`openclaw gateway run`, from the same npm install), median of 20 of each; and the Control
//! UI's time to the first answer shown, served by each gateway, in headless Chromium. Measured,
//! never asserted (wall clock); run with
//! `cargo test --test main scenarios::openclaw_figures -- --ignored --nocapture`.

use super::openclaw_cli::{OpenClaw, installed};
use super::openclaw_control_ui::shows;
use super::system::{spawn_up, stop};
use crate::support::{Project, eventually_within};
use clawbus::testkit::{Browser, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Calls measured per gateway.
const CALLS: usize = 20;
/// How long OpenClaw's gateway may take to listen (tens of seconds on a loaded 2-core machine).
const GATEWAY_START: Duration = Duration::from_secs(240);
/// How long the Control UI may take to show the composer, then the answer.
const SHOWN_WITHIN: Duration = Duration::from_secs(180);

/// OpenClaw's own gateway (`openclaw gateway run`) in a home of its own, with the scripted model
/// server as its only provider (`zero/m`), token auth on loopback.
struct OwnGateway {
    child: Child,
    home: tempfile::TempDir,
    root: PathBuf,
    port: u16,
    token: String,
}

impl OwnGateway {
    fn start(root: &Path, model_url: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in ["state/workspace", "tmp"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let token = format!("figures-{}", uuid::Uuid::new_v4().simple());
        let config = json!({
            "gateway": {
                "mode": "local", "port": port, "bind": "loopback",
                "auth": { "mode": "token", "token": token },
            },
            "models": {
                "mode": "replace",
                "catalogRefresh": { "enabled": false },
                "providers": { "zero": {
                    "baseUrl": model_url, "apiKey": "zero-local", "api": "openai-completions",
                    "models": [{
                        "id": "m", "name": "scripted", "reasoning": false, "input": ["text"],
                        "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0 },
                        "contextWindow": 128000, "maxTokens": 4096,
                    }],
                } },
            },
            "agents": { "defaults": { "model": { "primary": "zero/m" } } },
            "update": { "checkOnStart": false, "auto": { "enabled": false } },
            "discovery": { "mdns": { "mode": "off" } },
        });
        std::fs::write(h.join("openclaw.json"), config.to_string()).unwrap();
        let log = std::fs::File::create(h.join("gateway.log")).unwrap();
        let child = node(root, h)
            .args([
                "gateway",
                "run",
                "--bind",
                "loopback",
                "--port",
                &port.to_string(),
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        Self {
            child,
            home,
            root: root.to_path_buf(),
            port,
            token,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    /// `openclaw <args>` in the gateway's home (its config names the gateway).
    fn cli(&self, args: &[&str]) -> Command {
        let mut cmd = node(&self.root, self.home.path());
        cmd.args(args);
        cmd
    }
}

impl Drop for OwnGateway {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// `node openclaw.mjs` in a clean environment inside `home`.
fn node(root: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(root.join("node_modules/node/bin/node"));
    cmd.arg(root.join("node_modules/openclaw/openclaw.mjs"))
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", root.join("node_modules/.bin").display()),
        )
        .env("LANG", "C.UTF-8")
        .env("HOME", home)
        .env("OPENCLAW_HOME", home)
        .env("OPENCLAW_STATE_DIR", home.join("state"))
        .env("OPENCLAW_CONFIG_PATH", home.join("openclaw.json"))
        .env("TMPDIR", home.join("tmp"))
        .env("OPENCLAW_DISABLE_BONJOUR", "1")
        .env("OPENCLAW_NO_AUTO_UPDATE", "1")
        .env("NO_COLOR", "1")
        .current_dir(home)
        .stdin(Stdio::null());
    cmd
}

/// The median of `v` (the upper middle one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// [`CALLS`] runs of `openclaw agent --agent main --message … --json` made by `cli`: the median
/// wall time of the call and of the turn as the gateway reports it (`result.meta.durationMs`).
#[allow(clippy::disallowed_methods, reason = "a figure measures wall time")]
async fn agent_calls(what: &str, cli: impl Fn(&[&str]) -> Command) -> (f64, f64) {
    let (mut wall, mut turn) = (Vec::new(), Vec::new());
    for i in 0..CALLS {
        let message = format!("figure call {i}");
        let mut cmd = cli(&["agent", "--agent", "main", "--message", &message, "--json"]);
        let t = Instant::now();
        // Off the test's thread: the scripted model server answers on it meanwhile.
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        wall.push(t.elapsed().as_secs_f64() * 1000.0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{what}: openclaw agent --json must print JSON ({e}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(v["status"], "ok", "{what}: {v}");
        turn.push(
            v["result"]["meta"]["durationMs"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
    }
    (median(wall), median(turn))
}

/// The Control UI at `base` (token in the fragment): ms until the chat composer shows, and ms
/// from sending a message until its answer shows.
#[allow(clippy::disallowed_methods, reason = "a figure measures wall time")]
async fn control_ui(browser: &Browser, base: &str, token: &str) -> (f64, f64) {
    let t = Instant::now();
    browser
        .goto(&format!("{base}/chat#token={token}"))
        .await
        .unwrap();
    let composer = "textarea[placeholder^='Message']";
    browser
        .wait_for(
            &format!("document.querySelector(\"{composer}\")"),
            SHOWN_WITHIN,
        )
        .await
        .unwrap_or_else(|e| panic!("{base}: the chat composer shows: {e}"));
    let ready = t.elapsed().as_secs_f64() * 1000.0;
    let input = browser.find(composer).await.unwrap();
    let t = Instant::now();
    browser
        .type_into(&input, "ui-question\u{e007}")
        .await
        .unwrap();
    browser
        .wait_for(&shows("ui-answer"), SHOWN_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("{base}: the answer shows: {e}"));
    (ready, t.elapsed().as_secs_f64() * 1000.0)
}

#[actix_rt::test]
#[ignore = "a figure: run it on its own with --ignored --nocapture"]
async fn openclaw_figures_against_clawbus_and_openclaw_itself() {
    let Some(root) = installed() else {
        return;
    };
    let server = ScriptedServer::with_responder(|req| {
        if req.to_string().contains("ui-question") {
            Turn::text("ui-answer")
        } else {
            Turn::text("figure answer")
        }
    })
    .await;

    let own = OwnGateway::start(&root, &server.base_url());
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], own.port));
    eventually_within(GATEWAY_START, "OpenClaw's gateway listens", async || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    })
    .await;
    let (own_wall, own_turn) = agent_calls("openclaw gateway", |args| own.cli(args)).await;

    let p = Project::new();
    p.with_mock_and(&server.base_url(), "")
        .write("agents.d/main.toml", "");
    let mut cmd = p.clawbus();
    cmd.env("CLAWBUS_OPENCLAW_DIR", &root)
        .args(["up", "--port", "0"]);
    let daemon = spawn_up(&p, cmd).await;
    let oc = OpenClaw::pointed_at(&daemon).unwrap();
    let (ours_wall, ours_turn) = agent_calls("clawbus", |args| oc.command(args)).await;

    println!("figure: openclaw agent --json, median of {CALLS} (ms)");
    println!("  gateway           wall    turn (result.meta.durationMs)");
    println!("  clawbus       {ours_wall:>8.0} {ours_turn:>7.1}");
    println!("  openclaw      {own_wall:>8.0} {own_turn:>7.1}");

    if let Some(browser) =
        Browser::start_or_skip("openclaw_figures_against_clawbus_and_openclaw_itself").await
    {
        let own_url = format!("http://127.0.0.1:{}", own.port);
        let (own_ready, own_answer) = control_ui(&browser, &own_url, &own.token).await;
        let (ours_ready, ours_answer) = control_ui(&browser, &daemon.url, &daemon.token).await;
        println!("figure: Control UI, one cold load each (ms)");
        println!("  gateway      composer shown   send → answer shown");
        println!("  clawbus      {ours_ready:>14.0} {ours_answer:>21.0}");
        println!("  openclaw     {own_ready:>14.0} {own_answer:>21.0}");
        browser.quit().await;
    }
    if std::env::var_os("CLAWBUS_FIGURES_LOG").is_some() {
        println!("OpenClaw gateway log:\n{}", own.log());
    }
    stop(daemon).await;
}
