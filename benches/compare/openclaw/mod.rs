//! `--with-openclaw`: OpenClaw measured in the same run, on the same model server.
//!
//! The install step ([`install`]) is timed and reported apart from the measurements. Each
//! gateway runs in a temporary home ([`gateway`]) on loopback with token auth; turns go through
//! its CLI (`openclaw agent --json`, a process per call) and its WebSocket protocol ([`ws`]:
//! `connect`, `agent`, `agent.wait`). Scenarios with no OpenClaw equivalent, or not driven here,
//! stay n/a; a scenario that fails is reported with its error and stays n/a too.

#[path = "gateway.rs"]
pub(crate) mod gateway;
#[path = "install.rs"]
pub(crate) mod install;
#[path = "ws.rs"]
pub(crate) mod ws;

use super::{Scenario, Sizes, Stat};
use gateway::{Gateway, Home};
use install::{Install, InstallOutcome, NODE_VERSION, OPENCLAW_VERSION};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use ws::WsClient;

/// The longest one WebSocket turn, or one batch of concurrent turns, may take.
const TURN: Duration = Duration::from_secs(300);

/// Why an OpenClaw step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OpenClawError {
    /// `npm install` (or the check after it) failed.
    #[error("install: {step}: {detail}")]
    Install {
        /// Which step.
        step: String,
        /// What npm said.
        detail: String,
    },
    /// A file or process could not be used.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file, folder or program.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The gateway did not come up.
    #[error("gateway: {what}; its log ends with: {log_tail}")]
    Gateway {
        /// What went wrong.
        what: String,
        /// The end of its output.
        log_tail: String,
    },
    /// A turn did not succeed.
    #[error("turn via {how}: {what}")]
    Turn {
        /// CLI or WebSocket.
        how: &'static str,
        /// What came back.
        what: String,
    },
    /// A WebSocket request failed or was refused.
    #[error("WebSocket `{method}`: {what}")]
    Protocol {
        /// The method.
        method: &'static str,
        /// The error it answered, or why none came.
        what: String,
    },
    /// The WebSocket connection failed.
    #[error("WebSocket {what}: {source}")]
    Ws {
        /// What was attempted.
        what: String,
        /// The cause.
        #[source]
        source: tokio_tungstenite::tungstenite::Error,
    },
}

impl OpenClawError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        OpenClawError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn protocol(method: &'static str, what: impl Into<String>) -> Self {
        OpenClawError::Protocol {
            method,
            what: what.into(),
        }
    }

    fn ws(what: String, source: tokio_tungstenite::tungstenite::Error) -> Self {
        OpenClawError::Ws { what, source }
    }
}

/// OpenClaw's sizes: fewer than clawbus's, since one of its turns takes 0.3–2 s here.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenClawSizes {
    /// Gateway starts timed (fresh home each).
    pub starts: usize,
    /// CLI turns (a process per call).
    pub cli_turns: usize,
    /// WebSocket turns on one connection.
    pub ws_turns: usize,
    /// Tool-call turns (WebSocket).
    pub tool_turns: usize,
    /// (concurrency, repeats) of the concurrent scenario.
    pub concurrency: Vec<(usize, usize)>,
    /// Wait before the idle RSS is read.
    pub idle_wait: Duration,
}

impl OpenClawSizes {
    /// At most 3 starts, 20 CLI turns, 50 WebSocket turns, 10 tool turns, 3 repeats of a
    /// concurrent batch (1 above 50 turns); never more than clawbus's.
    pub(crate) fn from(s: &Sizes) -> Self {
        OpenClawSizes {
            starts: s.starts.min(3),
            cli_turns: s.turns.min(20),
            ws_turns: s.turns.min(50),
            tool_turns: s.calls.min(10),
            concurrency: s
                .concurrency
                .iter()
                .map(|&n| (n, if n > 50 { 1 } else { s.repeats.min(3) }))
                .collect(),
            idle_wait: s.idle_wait,
        }
    }

    fn line(&self) -> String {
        let conc: Vec<String> = self
            .concurrency
            .iter()
            .map(|(n, r)| format!("{n} concurrent × {r}"))
            .collect();
        format!(
            "{} starts, {} CLI turns, {} WebSocket turns, {} tool turns, {}",
            self.starts,
            self.cli_turns,
            self.ws_turns,
            self.tool_turns,
            conc.join(", ")
        )
    }
}

/// What the OpenClaw part of a run produced.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The cache folder.
    pub cache: PathBuf,
    /// The install step, when it succeeded.
    pub install: Option<InstallOutcome>,
    /// Sizes used.
    pub sizes: OpenClawSizes,
    /// The figures, per scenario.
    pub figures: Vec<(Scenario, Stat)>,
    /// Every step that failed, with its error.
    pub problems: Vec<String>,
    /// The gateway's own time for each CLI turn (`result.meta.durationMs`), against which the
    /// CLI's wall time shows what the process per call costs.
    pub cli_gateway_ms: Option<Stat>,
}

impl Outcome {
    /// The install step in words, reported apart from the measurements.
    pub(crate) fn install_line(&self) -> String {
        let what = format!("openclaw@{OPENCLAW_VERSION} with node@{NODE_VERSION}");
        match &self.install {
            None => format!(
                "{what} could not be installed into {}",
                self.cache.display()
            ),
            Some(InstallOutcome::Cached) => {
                format!(
                    "{what} already in {} (not reinstalled)",
                    self.cache.display()
                )
            }
            Some(InstallOutcome::Installed { node, openclaw }) => format!(
                "{what} installed into {} in {:.1} s (node {:.1} s, openclaw {:.1} s) with the machine's npm",
                self.cache.display(),
                (*node + *openclaw).as_secs_f64(),
                node.as_secs_f64(),
                openclaw.as_secs_f64()
            ),
        }
    }

    /// The note printed above the table.
    pub(crate) fn note(&self) -> String {
        let mut s = format!(
            "{}. Gateway on loopback with token auth, provider `zero` at the same model server; \
             sizes {} (fewer than clawbus's: a turn takes 0.3–2 s); RSS is the gateway's process \
             tree; the WebSocket row is `agent` + `agent.wait` on one connection on both sides; \
             the tool row runs over WebSocket. n/a: the HTTP row (OpenClaw's turns were driven \
             over its WebSocket protocol), `agent_call` (no equivalent \
             tool), subagent round trip and memory per idle session (not driven), the bus and \
             the disk floor (no equivalent).",
            self.install_line(),
            self.sizes.line()
        );
        if let Some(g) = &self.cli_gateway_ms {
            s.push_str(&format!(
                " CLI turns: the gateway's own `durationMs` was {} ms (median).",
                super::num(g.median)
            ));
        }
        for p in &self.problems {
            s.push_str(&format!(" Failed: {}.", one_line(p, 600)));
        }
        s
    }

    /// The outcome as JSON (`openclaw_run` in `compare.json`).
    pub(crate) fn json(&self) -> Value {
        let install = match &self.install {
            None => json!({ "outcome": "failed" }),
            Some(InstallOutcome::Cached) => json!({ "outcome": "cached" }),
            Some(InstallOutcome::Installed { node, openclaw }) => json!({
                "outcome": "installed", "seconds": (*node + *openclaw).as_secs_f64(),
                "node_seconds": node.as_secs_f64(), "openclaw_seconds": openclaw.as_secs_f64(),
            }),
        };
        json!({
            "openclaw_version": OPENCLAW_VERSION, "node_version": NODE_VERSION,
            "cache": self.cache.display().to_string(), "install": install,
            "sizes": {
                "starts": self.sizes.starts, "cli_turns": self.sizes.cli_turns,
                "ws_turns": self.sizes.ws_turns, "tool_turns": self.sizes.tool_turns,
                "concurrency": self.sizes.concurrency,
            },
            "problems": self.problems,
            "cli_gateway_duration_ms": self.cli_gateway_ms.as_ref().map(|g| g.median),
        })
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// Installs OpenClaw if needed and runs every scenario that has an equivalent.
pub(crate) fn measure(
    rt: &tokio::runtime::Runtime,
    model_url: &str,
    sizes: &Sizes,
    cache: &Path,
    base: &Path,
) -> Outcome {
    let mut out = Outcome {
        cache: cache.to_path_buf(),
        install: None,
        sizes: OpenClawSizes::from(sizes),
        figures: Vec::new(),
        problems: Vec::new(),
        cli_gateway_ms: None,
    };
    let install = match Install::ensure(cache) {
        Ok(i) => i,
        Err(e) => {
            out.problem("install", e);
            return out;
        }
    };
    out.install = Some(install.outcome.clone());
    eprintln!("compare: {}", out.install_line());
    if let Err(e) = scenarios(rt, model_url, &install, base, &mut out) {
        out.problem("gateway", e);
    }
    out
}

impl Outcome {
    fn problem(&mut self, what: &str, e: OpenClawError) {
        eprintln!("compare: OpenClaw {what} failed: {e}");
        self.problems.push(format!("{what}: {e}"));
    }

    /// Keeps a scenario's figure, or records why it has none.
    fn record(&mut self, key: Scenario, r: Result<Stat, OpenClawError>) {
        match r {
            Ok(s) => self.figures.push((key, s)),
            Err(e) => self.problem(&format!("{key:?}"), e),
        }
    }
}

/// The scenarios; an error here means no gateway could be started.
fn scenarios(
    rt: &tokio::runtime::Runtime,
    model_url: &str,
    install: &Install,
    base: &Path,
    out: &mut Outcome,
) -> Result<(), OpenClawError> {
    let sizes = out.sizes.clone();
    let mut starts = Vec::new();
    for i in 0..sizes.starts {
        let home = Home::create(&base.join(format!("openclaw-start-{i}")), model_url)?;
        let mut gw = Gateway::start(install, &home)?;
        eprintln!("compare: OpenClaw gateway start {i}: {:?}", gw.started);
        starts.push(gw.started);
        gw.stop();
    }
    if !starts.is_empty() {
        out.figures.push((Scenario::Start, Stat::ms(&starts)));
    }

    let home = Home::create(&base.join("openclaw-main"), model_url)?;
    let mut gw = Gateway::start(install, &home)?;
    std::thread::sleep(sizes.idle_wait);
    out.figures
        .push((Scenario::IdleRss, Stat::of(vec![gw.tree_rss_mib()])));

    let mut gateway_ms = Vec::new();
    let cli = (0..sizes.cli_turns)
        .map(|i| {
            let t = Instant::now();
            let turn = gw.cli_turn(
                install,
                &home,
                &format!("agent:main:cli-{i}"),
                &format!("hi {i}"),
            )?;
            let took = t.elapsed();
            expect_text("openclaw agent --json", &turn.text, "ok")?;
            gateway_ms.extend(turn.duration_ms);
            Ok(took)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|v| Stat::ms(&v));
    out.record(Scenario::CliTurn, cli);
    out.cli_gateway_ms = (!gateway_ms.is_empty()).then(|| Stat::of(gateway_ms));

    match rt.block_on(WsClient::connect(&gw.ws_url, &home.token)) {
        Ok(client) => {
            let r = rt.block_on(sequential(&client, "hello", sizes.ws_turns, "ok", None));
            out.record(Scenario::WsTurn, r);
            let r = rt.block_on(sequential(
                &client,
                "tool",
                sizes.tool_turns,
                "done",
                Some("read"),
            ));
            out.record(Scenario::ToolTurn, r);
            for &(n, repeats) in &sizes.concurrency {
                match rt.block_on(concurrent(&client, n, repeats)) {
                    Ok((totals, slowest)) => {
                        out.figures
                            .push((Scenario::ConcurrentTotal(n), Stat::ms(&totals)));
                        out.figures
                            .push((Scenario::ConcurrentSlowest(n), Stat::ms(&slowest)));
                        out.figures.push((
                            Scenario::ConcurrentRss(n),
                            Stat::of(vec![gw.tree_rss_mib()]),
                        ));
                    }
                    Err(e) => out.problem(&format!("{n} concurrent turns"), e),
                }
            }
        }
        Err(e) => out.problem("WebSocket connect", e),
    }
    gw.stop();
    Ok(())
}

fn expect_text(how: &'static str, got: &str, want: &str) -> Result<(), OpenClawError> {
    if got.trim() == want {
        Ok(())
    } else {
        Err(OpenClawError::Turn {
            how,
            what: format!("the reply was {got:?}, the model answered {want:?}"),
        })
    }
}

/// `n` WebSocket turns one after another, each on its own session; each must answer `want`
/// (and have run `tool`, when given).
async fn sequential(
    client: &WsClient,
    prefix: &str,
    n: usize,
    want: &str,
    tool: Option<&str>,
) -> Result<Stat, OpenClawError> {
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let done = client
            .turn(
                &format!("agent:main:ws-{prefix}-{i}"),
                &format!("{prefix} {i}"),
                TURN,
            )
            .await?;
        took.push(t.elapsed());
        expect_text("WebSocket", ws::reply_text(&done), want)?;
        if let Some(tool) = tool.filter(|t| !ws::tools_used(&done).contains(t)) {
            return Err(OpenClawError::Turn {
                how: "WebSocket",
                what: format!("tool {tool:?} did not run: {}", done["terminalReceipt"]),
            });
        }
    }
    Ok(Stat::ms(&took))
}

/// `repeats` batches of `n` WebSocket turns at once on distinct sessions, over one connection:
/// each batch's total time and its slowest turn.
async fn concurrent(
    client: &WsClient,
    n: usize,
    repeats: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), OpenClawError> {
    let (mut totals, mut slowest) = (Vec::new(), Vec::new());
    for r in 0..repeats {
        let t = Instant::now();
        let all = (0..n).map(|i| async move {
            let t = Instant::now();
            let done = client
                .turn(
                    &format!("agent:main:c{n}-{r}-{i}"),
                    &format!("hello c{n}-{r}-{i}"),
                    TURN,
                )
                .await?;
            expect_text("WebSocket", ws::reply_text(&done), "ok")?;
            Ok::<_, OpenClawError>(t.elapsed())
        });
        let lat = futures::future::join_all(all)
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        totals.push(t.elapsed());
        slowest.push(lat.into_iter().max().unwrap_or_default());
        eprintln!("compare: OpenClaw {n} concurrent turns: {:?}", t.elapsed());
    }
    Ok((totals, slowest))
}

// `cargo test --benches` and clippy build the bench itself with cfg(test) but without the test
// harness, which drops the #[test] functions and leaves their imports unused; these tests run
// in tests/bench_harness.rs.
#[cfg(test)]
#[allow(unused_imports)]
#[path = "tests.rs"]
mod tests;
