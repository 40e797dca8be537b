//! The comparison harness: scenarios, measurement, and the table, JSON and SVG it writes.
//!
//! Everything is measured from outside the daemon, as a user would see it: a `clawbus up` child
//! process on loopback (`--port 0`), a reqwest client with keep-alive, and the `clawbus` CLI as a
//! process per call. The model is `clawbus::testkit::ScriptedServer` with a responder that answers
//! at once (zero latency), configured as the `openai` provider `zero`. Scenarios:
//!
//! - **start**: `clawbus up` spawned until its port accepts a TCP connection, fresh state folder
//!   each time (median of `--starts` runs);
//! - **idle RSS**: the daemon's `VmRSS` 3 s after it started, before any turn;
//! - **turn, CLI**: `clawbus post agent.main … --wait` (a process per call), `--turns` runs;
//! - **turn, HTTP**: `POST /v1/agents/main/tasks {wait: true}` on one keep-alive client;
//! - **turn, WebSocket**: `agent` then `agent.wait` on one connection (connect excluded), in
//!   OpenClaw's frame protocol (see `ws.rs`);
//! - **tool turn**: the model answers a `read` tool call, then text (two model calls, one tool);
//! - **N concurrent turns** (20 and 200): N distinct sessions at once; total time (median of
//!   `--repeats`), the slowest turn, and the daemon's RSS after;
//! - **agent_call**: agent `a` calls agent `b` (`[tools] allow = ["agent_call"]`) and answers
//!   with `b`'s result; three model calls, two tasks;
//! - **subagent round trip**: agent `s` spawns a child (`sessions_spawn`), the child answers, and
//!   the outcome is announced back to `s`'s session: timed until the model sees that announcement;
//! - **memory per idle session**: RSS growth over `--sessions` (5,000) turns on distinct sessions,
//!   divided by their number (`[sessions] max_live` is set above it, so none is evicted);
//! - **durable bus throughput**: the embedded bus itself (`bus::LocalBus`, sled, dedup ledger on,
//!   group commit), in-process as in `benches/figures.rs`: tasks submitted → delivered → started →
//!   completed per second, 256 in flight;
//! - **one fdatasync**: the disk floor, 4 KiB written and `fdatasync`ed in the same folder.
//!
//! `--with-openclaw` runs the scenarios that have an equivalent against OpenClaw too, on the
//! same model server (see [`openclaw`]); its install step is reported apart.
//!
//! Every wait is bounded; a clawbus scenario that fails panics with the daemon's log, an
//! OpenClaw one is reported in the note and stays n/a.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "openclaw/mod.rs"]
pub mod openclaw;
#[path = "ws.rs"]
mod ws;

use bus::{Bus, Envelope, LocalBus, LocalOptions, Outcome, RequestId, Topic};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a daemon may take to print `listening on` and accept a connection.
const STARTUP: Duration = Duration::from_secs(30);
/// How long a daemon may take to stop after SIGTERM before it is killed.
const SHUTDOWN: Duration = Duration::from_secs(30);
/// The longest any single request or batch may take.
const REQUEST: Duration = Duration::from_secs(120);

/// Usage, part of every argument error.
const USAGE: &str = "usage: cargo bench --bench compare -- [--json] [--tiny] [--out DIR] \
[--starts N] [--turns N] [--repeats N] [--sessions N] [--with-openclaw] [--openclaw-cache DIR]";

/// Sizes of every scenario.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Daemon starts timed.
    pub starts: usize,
    /// Sequential turns over the CLI and over HTTP (each).
    pub turns: usize,
    /// Tool-call turns, cross-agent calls and subagent round trips (each).
    pub calls: usize,
    /// Concurrency levels of the concurrent scenario.
    pub concurrency: Vec<usize>,
    /// Repeats of each concurrent batch.
    pub repeats: usize,
    /// Idle sessions opened for the memory-per-session figure.
    pub sessions: usize,
    /// Tasks per bus throughput run.
    pub bus_tasks: usize,
    /// Bus throughput runs.
    pub bus_runs: usize,
    /// fdatasync calls timed.
    pub fsyncs: usize,
    /// Wait before the idle RSS is read.
    pub idle_wait: Duration,
}

impl Sizes {
    fn full() -> Self {
        Self {
            starts: 10,
            turns: 200,
            calls: 50,
            concurrency: vec![20, 200],
            repeats: 5,
            sessions: 5_000,
            bus_tasks: 20_000,
            bus_runs: 3,
            fsyncs: 200,
            idle_wait: Duration::from_secs(3),
        }
    }

    fn tiny() -> Self {
        Self {
            starts: 1,
            turns: 3,
            calls: 1,
            concurrency: vec![2, 4],
            repeats: 1,
            sessions: 10,
            bus_tasks: 50,
            bus_runs: 1,
            fsyncs: 3,
            idle_wait: Duration::from_millis(200),
        }
    }
}

/// Parsed command-line options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Scenario sizes.
    pub sizes: Sizes,
    /// Print JSON instead of the Markdown table.
    pub json: bool,
    /// Where `compare.{md,json,svg}` go.
    pub out: PathBuf,
    /// Also measure OpenClaw.
    pub with_openclaw: bool,
    /// Where OpenClaw and its Node are installed (`--openclaw-cache`; see
    /// [`openclaw::install::cache_dir`]).
    pub openclaw_cache: Option<PathBuf>,
}

impl Options {
    /// Parses the arguments after `--` (cargo's own `--bench` is ignored).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut args = args.into_iter();
        let mut o = Options {
            sizes: Sizes::full(),
            json: false,
            out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-compare"),
            with_openclaw: false,
            openclaw_cache: None,
        };
        let mut overrides: Vec<(String, usize)> = Vec::new();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--bench" => {}
                "--json" => o.json = true,
                "--tiny" => o.sizes = Sizes::tiny(),
                "--with-openclaw" => o.with_openclaw = true,
                "--out" => {
                    o.out = PathBuf::from(
                        args.next()
                            .ok_or(format!("--out needs a folder\n{USAGE}"))?,
                    )
                }
                "--openclaw-cache" => {
                    o.openclaw_cache = Some(PathBuf::from(
                        args.next()
                            .ok_or(format!("--openclaw-cache needs a folder\n{USAGE}"))?,
                    ))
                }
                "--starts" | "--turns" | "--repeats" | "--sessions" => {
                    let n = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .filter(|&n: &usize| n > 0)
                        .ok_or(format!("{a} needs a positive number\n{USAGE}"))?;
                    overrides.push((a, n));
                }
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        for (flag, n) in overrides {
            match flag.as_str() {
                "--starts" => o.sizes.starts = n,
                "--turns" => o.sizes.turns = n,
                "--repeats" => o.sizes.repeats = n,
                _ => o.sizes.sessions = n,
            }
        }
        Ok(o)
    }
}

/// A figure: the median of `n` samples and their spread.
#[derive(Debug, Clone)]
pub struct Stat {
    /// Median.
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

impl Stat {
    fn of(mut v: Vec<f64>) -> Self {
        assert!(!v.is_empty(), "a figure with no samples");
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
        Stat {
            median: at(0.5),
            p99: at(0.99),
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        }
    }

    fn ms(v: &[Duration]) -> Self {
        Self::of(v.iter().map(|d| d.as_secs_f64() * 1e3).collect())
    }

    /// The spread as shown in the table: p99 over ≥ 20 samples, else min–max.
    fn spread(&self) -> String {
        if self.n >= 20 {
            format!("p99 {}", num(self.p99))
        } else if self.n > 1 {
            format!("{}–{}", num(self.min), num(self.max))
        } else {
            "1 run".into()
        }
    }
}

/// Which scenario a row measures (how OpenClaw's figures find their row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Start until the port accepts connections.
    Start,
    /// Idle RSS.
    IdleRss,
    /// One turn through the CLI, a process per call.
    CliTurn,
    /// One turn over a kept-open HTTP connection.
    HttpTurn,
    /// One turn over the WebSocket protocol (`agent` + `agent.wait`), connect excluded.
    WsTurn,
    /// A turn with one tool call.
    ToolTurn,
    /// A cross-agent call.
    AgentCall,
    /// A subagent round trip.
    Subagent,
    /// N concurrent turns: the batch's total time.
    ConcurrentTotal(usize),
    /// N concurrent turns: the slowest one.
    ConcurrentSlowest(usize),
    /// N concurrent turns: RSS after.
    ConcurrentRss(usize),
    /// Memory per idle session.
    IdleSession,
    /// Durable bus throughput.
    Bus,
    /// One fdatasync.
    DiskFloor,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Which scenario.
    pub key: Scenario,
    /// What was measured.
    pub scenario: String,
    /// Unit of the figures.
    pub unit: &'static str,
    /// Whether more is better (throughput); the ratio is inverted so > 1 favours clawbus.
    pub higher_is_better: bool,
    /// clawbus.
    pub clawbus: Stat,
    /// OpenClaw, when measured and it has an equivalent.
    pub openclaw: Option<Stat>,
}

impl Row {
    fn new(key: Scenario, scenario: impl Into<String>, unit: &'static str, clawbus: Stat) -> Self {
        Row {
            key,
            scenario: scenario.into(),
            unit,
            higher_is_better: false,
            clawbus,
            openclaw: None,
        }
    }

    /// OpenClaw's figure over clawbus's (or the reverse for throughput): > 1 means clawbus is
    /// faster or smaller.
    pub fn ratio(&self) -> Option<f64> {
        let o = self.openclaw.as_ref()?;
        let (a, b) = (o.median, self.clawbus.median);
        let r = if self.higher_is_better { b / a } else { a / b };
        r.is_finite().then_some(r)
    }
}

/// The machine a run was made on.
#[derive(Debug, Clone)]
pub struct Machine {
    /// `available_parallelism`.
    pub cores: usize,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu: String,
    /// `MemTotal`, in GiB.
    pub memory_gib: f64,
    /// `PRETTY_NAME` from `/etc/os-release`.
    pub os: String,
    /// Kernel release.
    pub kernel: String,
    /// `/proc/loadavg` (1, 5, 15 minutes) when the run started: other work on the machine.
    pub load_before: String,
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Machine {
    fn probe() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1048576.0);
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|l| l.trim_matches('"').to_string())
            .unwrap_or_else(|| std::env::consts::OS.into());
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            memory_gib,
            os,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            load_before: load_average(),
        }
    }

    fn line(&self) -> String {
        format!(
            "{} cores ({}), {:.1} GiB memory, {}, Linux {}",
            self.cores, self.cpu, self.memory_gib, self.os, self.kernel
        )
    }
}

/// A run's results.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// The rows, in order.
    pub rows: Vec<Row>,
    /// What happened with OpenClaw (install, sizes, what failed, or why it was not measured).
    pub openclaw: String,
    /// The OpenClaw part, when `--with-openclaw` was given.
    pub openclaw_run: Option<openclaw::Outcome>,
    /// `/proc/loadavg` when the run ended.
    pub load_after: String,
    /// Size of a model request body (JSON bytes) sent by clawbus and by OpenClaw: what each
    /// puts in front of the model per call.
    pub model_request_bytes: [Option<Stat>; 2],
    /// Sizes used.
    pub sizes: Sizes,
}

/// Runs every scenario.
pub fn run(opts: &Options) -> Report {
    let sizes = opts.sizes.clone();
    let machine = Machine::probe();
    eprintln!("compare: {}", machine.line());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (announced_tx, announced_rx) = std::sync::mpsc::channel::<Instant>();
    let announced_tx = std::sync::Mutex::new(announced_tx);
    let model = rt.block_on(ScriptedServer::with_responder(move |req| {
        let user = last_user(req);
        let has_results = req["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if user.starts_with("[task result]") {
            let _ = announced_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(Instant::now());
            return Turn::text("noted");
        }
        match user.split_whitespace().next().unwrap_or_default() {
            "tool" if !has_results => Turn::tool_call("read", json!({ "path": "NOTES.md" })),
            "ask" if !has_results => Turn::tool_call(
                "agent_call",
                json!({ "agent": "b", "task": format!("compute {user}") }),
            ),
            "delegate" if !has_results => {
                Turn::tool_call("sessions_spawn", json!({ "task": format!("child {user}") }))
            }
            "compute" => Turn::text("42"),
            _ if has_results => Turn::text("done"),
            _ => Turn::text("ok"),
        }
    }));
    let base = tempfile::tempdir().unwrap();
    let project = write_project(base.path(), &model.base_url(), sizes.sessions);
    let mut rows = Vec::new();

    // Start: a fresh state folder each time.
    let mut starts = Vec::new();
    for i in 0..sizes.starts {
        let state = base.path().join(format!("start-{i}"));
        let mut d = Daemon::start(&project, &state);
        starts.push(d.started);
        d.stop();
    }
    rows.push(Row::new(
        Scenario::Start,
        "start until the port accepts connections",
        "ms",
        Stat::ms(&starts),
    ));

    let mut d = Daemon::start(&project, &project.join(".clawbus"));
    std::thread::sleep(sizes.idle_wait);
    rows.push(Row::new(
        Scenario::IdleRss,
        format!("idle RSS after {:?}", sizes.idle_wait),
        "MiB",
        Stat::of(vec![d.rss_mib()]),
    ));

    // One turn through the CLI, a process per call.
    let mut cli = Vec::new();
    for i in 0..sizes.turns {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_clawbus"))
            .args(["post", "agent.main", &format!("hi {i}"), "--wait"])
            .args(["--timeout", "60s", "--url", &d.url])
            .env("CLAWBUS_TOKEN", &d.token)
            .env("RUST_LOG", "warn")
            .current_dir(&project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        cli.push(t.elapsed());
        d.check(
            out.status.success(),
            &format!("clawbus post: {}", String::from_utf8_lossy(&out.stderr)),
        );
    }
    rows.push(Row::new(
        Scenario::CliTurn,
        "one turn, CLI process per call (`clawbus post --wait` / `openclaw agent --json`)",
        "ms",
        Stat::ms(&cli),
    ));

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .timeout(REQUEST)
        .build()
        .unwrap();
    let seq = |d: &Daemon, agent: &str, prefix: &str, n: usize| -> Vec<Duration> {
        (0..n)
            .map(|i| {
                let body = json!({ "text": format!("{prefix} {i}"), "wait": true,
                                   "session": format!("{prefix}-{i}"), "timeout_ms": 60_000 });
                let t = Instant::now();
                let v = rt.block_on(post(&http, d, agent, &body));
                let e = t.elapsed();
                d.check(v["state"] == "succeeded", &format!("{prefix}: {v}"));
                e
            })
            .collect()
    };
    rows.push(Row::new(
        Scenario::HttpTurn,
        "one turn, HTTP keep-alive",
        "ms",
        Stat::ms(&seq(&d, "main", "hello", sizes.turns)),
    ));
    rows.push(Row::new(
        Scenario::WsTurn,
        "one turn, WebSocket `agent` + `agent.wait` (connect excluded)",
        "ms",
        Stat::ms(&rt.block_on(ws::turns(&d.url, &d.token, "main", sizes.turns, REQUEST))),
    ));
    rows.push(Row::new(
        Scenario::ToolTurn,
        "turn with one tool call (2 model calls)",
        "ms",
        Stat::ms(&seq(&d, "main", "tool", sizes.calls)),
    ));
    rows.push(Row::new(
        Scenario::AgentCall,
        "cross-agent call (`agent_call`, waits for the callee)",
        "ms",
        Stat::ms(&seq(&d, "a", "ask", sizes.calls)),
    ));

    // Subagent: the parent's turn spawns a child; timed until the child's outcome is announced
    // back to the parent's session and reaches the model.
    let mut sub = Vec::new();
    for i in 0..sizes.calls {
        while announced_rx.try_recv().is_ok() {}
        let body = json!({ "text": format!("delegate {i}"), "wait": true,
                           "session": format!("sub-{i}"), "timeout_ms": 60_000 });
        let t = Instant::now();
        let v = rt.block_on(post(&http, &d, "s", &body));
        d.check(v["state"] == "succeeded", &format!("delegate: {v}"));
        match announced_rx.recv_timeout(REQUEST) {
            Ok(at) => sub.push(at - t),
            Err(_) => d.check(false, "the subagent's outcome was never announced"),
        }
    }
    rows.push(Row::new(
        Scenario::Subagent,
        "subagent round trip (`sessions_spawn` → announce)",
        "ms",
        Stat::ms(&sub),
    ));

    for &n in &sizes.concurrency {
        let mut totals = Vec::new();
        let mut slowest = Vec::new();
        for r in 0..sizes.repeats {
            let t = Instant::now();
            let lat: Vec<Duration> = rt.block_on(async {
                let all = (0..n).map(|i| {
                    let (http, d) = (&http, &d);
                    async move {
                        let body = json!({ "text": format!("hello c{n}-{r}-{i}"), "wait": true,
                                           "session": format!("c{n}-{r}-{i}"), "timeout_ms": 60_000 });
                        let t = Instant::now();
                        let v = post(http, d, "main", &body).await;
                        (v, t.elapsed())
                    }
                });
                let res = tokio::time::timeout(REQUEST, futures::future::join_all(all))
                    .await
                    .unwrap_or_else(|_| panic!("{n} concurrent turns took over {REQUEST:?}"));
                res.into_iter()
                    .map(|(v, e)| {
                        d.check(v["state"] == "succeeded", &format!("concurrent: {v}"));
                        e
                    })
                    .collect()
            });
            totals.push(t.elapsed());
            slowest.push(lat.into_iter().max().unwrap_or_default());
        }
        rows.push(Row::new(
            Scenario::ConcurrentTotal(n),
            format!("{n} concurrent turns, distinct sessions: total"),
            "ms",
            Stat::ms(&totals),
        ));
        rows.push(Row::new(
            Scenario::ConcurrentSlowest(n),
            format!("{n} concurrent turns: slowest turn"),
            "ms",
            Stat::ms(&slowest),
        ));
        rows.push(Row::new(
            Scenario::ConcurrentRss(n),
            format!("{n} concurrent turns: RSS after"),
            "MiB",
            Stat::of(vec![d.rss_mib()]),
        ));
    }

    // Memory per idle session: RSS growth over `sessions` new sessions, 64 turns in flight.
    let before = d.rss_mib();
    rt.block_on(async {
        use futures::StreamExt;
        let work = futures::stream::iter(0..sizes.sessions)
            .map(|i| {
                let (http, d) = (&http, &d);
                async move {
                    let body = json!({ "text": format!("hi {i}"), "wait": true,
                                       "session": format!("idle-{i}"), "timeout_ms": 60_000 });
                    post(http, d, "main", &body).await
                }
            })
            .buffer_unordered(64)
            .for_each(|v| {
                d.check(v["state"] == "succeeded", &format!("idle session: {v}"));
                async {}
            });
        tokio::time::timeout(REQUEST * 5, work)
            .await
            .unwrap_or_else(|_| panic!("{} session turns took too long", sizes.sessions));
    });
    std::thread::sleep(Duration::from_millis(500));
    let per = (d.rss_mib() - before).max(0.0) * 1024.0 / sizes.sessions as f64;
    rows.push(Row::new(
        Scenario::IdleSession,
        format!("memory per idle session ({} sessions)", sizes.sessions),
        "KiB",
        Stat::of(vec![per]),
    ));
    d.stop();

    // OpenClaw on the same model server, after clawbus has stopped.
    let clawbus_requests = model.request_count();
    let openclaw_run = opts.with_openclaw.then(|| {
        let home = std::env::var("HOME").ok();
        let xdg = std::env::var("XDG_CACHE_HOME").ok();
        let cache = openclaw::install::cache_dir(
            opts.openclaw_cache.as_deref(),
            xdg.as_deref(),
            home.as_deref(),
        )
        .unwrap_or_else(|| base.path().join("openclaw-cache"));
        openclaw::measure(&rt, &model.base_url(), &sizes, &cache, base.path())
    });
    let requests = model.requests();
    let (ours, theirs) = requests.split_at(clawbus_requests.min(requests.len()));
    let model_request_bytes = [ours, theirs].map(|reqs| {
        (!reqs.is_empty())
            .then(|| Stat::of(reqs.iter().map(|r| r.to_string().len() as f64).collect()))
    });
    drop(model);
    drop(rt);

    // The durable bus itself, in-process.
    let mut bus = Vec::new();
    for _ in 0..sizes.bus_runs {
        bus.push(bus_throughput(base.path(), sizes.bus_tasks));
    }
    let mut row = Row::new(
        Scenario::Bus,
        "durable bus: submit → complete, dedup on (256 in flight)",
        "tasks/s",
        Stat::of(bus),
    );
    row.higher_is_better = true;
    rows.push(row);

    rows.push(Row::new(
        Scenario::DiskFloor,
        "disk floor: one 4 KiB write + fdatasync",
        "ms",
        Stat::ms(&fdatasync_floor(base.path(), sizes.fsyncs)),
    ));

    if let Some(run) = &openclaw_run {
        for (key, stat) in &run.figures {
            if let Some(row) = rows.iter_mut().find(|r| r.key == *key) {
                row.openclaw = Some(stat.clone());
            }
        }
    }
    let openclaw = openclaw_run.as_ref().map_or_else(
        || "not measured (pass --with-openclaw)".to_string(),
        openclaw::Outcome::note,
    );
    Report {
        machine,
        load_after: load_average(),
        rows,
        openclaw,
        openclaw_run,
        model_request_bytes,
        sizes,
    }
}

/// Prints the table (or JSON) and writes `compare.{md,json,svg}` into `opts.out`.
pub fn emit(report: &Report, opts: &Options) {
    let md = markdown(report);
    let js = serde_json::to_string_pretty(&to_json(report)).unwrap();
    let svg = svg(report);
    std::fs::create_dir_all(&opts.out).unwrap();
    std::fs::write(opts.out.join("compare.md"), &md).unwrap();
    std::fs::write(opts.out.join("compare.json"), &js).unwrap();
    std::fs::write(opts.out.join("compare.svg"), &svg).unwrap();
    println!("{}", if opts.json { &js } else { &md });
    eprintln!(
        "compare: wrote compare.md, compare.json and compare.svg to {}",
        opts.out.display()
    );
}

/// The Markdown table, with the machine and the OpenClaw note.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "Machine: {}; load average {} at the start, {} at the end\n\nOpenClaw: {}\n\n",
        r.machine.line(),
        r.machine.load_before,
        r.load_after,
        r.openclaw
    );
    if let [Some(c), o] = &r.model_request_bytes {
        s.push_str(&format!(
            "Model request body (median, {} requests): clawbus {} B",
            c.n,
            num(c.median)
        ));
        if let Some(o) = o {
            s.push_str(&format!(
                ", OpenClaw {} B ({} requests)",
                num(o.median),
                o.n
            ));
        }
        s.push_str("\n\n");
    }
    s.push_str("| scenario | clawbus (median) | spread | OpenClaw (median) | spread | ratio |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for row in &r.rows {
        let (oc, oc_spread) = row
            .openclaw
            .as_ref()
            .map_or(("n/a".into(), "".into()), |o| {
                (format!("{} {}", num(o.median), row.unit), o.spread())
            });
        s.push_str(&format!(
            "| {} | {} {} | {} | {oc} | {oc_spread} | {} |\n",
            row.scenario,
            num(row.clawbus.median),
            row.unit,
            row.clawbus.spread(),
            row.ratio().map_or("n/a".into(), |x| format!("{x:.1}×")),
        ));
    }
    s
}

/// The report as JSON.
pub fn to_json(r: &Report) -> Value {
    let stat = |s: &Stat| json!({ "median": s.median, "p99": s.p99, "min": s.min, "max": s.max, "n": s.n });
    json!({
        "machine": {
            "cores": r.machine.cores, "cpu": r.machine.cpu, "memory_gib": r.machine.memory_gib,
            "os": r.machine.os, "kernel": r.machine.kernel,
            "load_before": r.machine.load_before, "load_after": r.load_after,
        },
        "openclaw": r.openclaw,
        "openclaw_run": r.openclaw_run.as_ref().map(openclaw::Outcome::json),
        "model_request_bytes": {
            "clawbus": r.model_request_bytes[0].as_ref().map(stat),
            "openclaw": r.model_request_bytes[1].as_ref().map(stat),
        },
        "sizes": {
            "starts": r.sizes.starts, "turns": r.sizes.turns, "calls": r.sizes.calls,
            "concurrency": r.sizes.concurrency, "repeats": r.sizes.repeats,
            "sessions": r.sizes.sessions, "bus_tasks": r.sizes.bus_tasks,
        },
        "rows": r.rows.iter().map(|row| json!({
            "scenario": row.scenario,
            "unit": row.unit,
            "higher_is_better": row.higher_is_better,
            "clawbus": stat(&row.clawbus),
            "openclaw": row.openclaw.as_ref().map(stat),
            "ratio": row.ratio(),
        })).collect::<Vec<_>>(),
    })
}

/// A horizontal bar chart on a log scale: the ratios when OpenClaw was measured, else clawbus's
/// own medians of the rows in milliseconds.
pub fn svg(r: &Report) -> String {
    let ratios: Vec<(String, f64)> = r
        .rows
        .iter()
        .filter_map(|row| row.ratio().map(|x| (row.scenario.clone(), x)))
        .collect();
    let (title, unit, bars) = if ratios.is_empty() {
        (
            "clawbus, median per scenario (ms, log scale; OpenClaw not measured)",
            "ms",
            r.rows
                .iter()
                .filter(|row| row.unit == "ms")
                .map(|row| (row.scenario.clone(), row.clawbus.median))
                .collect::<Vec<_>>(),
        )
    } else {
        (
            "OpenClaw ÷ clawbus per scenario (log scale; > 1: clawbus faster or smaller)",
            "×",
            ratios,
        )
    };
    let (label_w, plot_w, bar_h, top) = (500.0, 420.0, 22.0, 40.0);
    let h = top + bars.len() as f64 * bar_h + 40.0;
    let positive: Vec<f64> = bars.iter().map(|b| b.1).filter(|v| *v > 0.0).collect();
    let lo = positive.iter().copied().fold(f64::MAX, f64::min).min(1.0);
    let hi = positive.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let (lo, hi) = (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    );
    let x =
        |v: f64| label_w + (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * plot_w;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">{}</text>\n",
        esc(title),
        w = label_w + plot_w + 90.0,
    );
    let mut decade = lo;
    while decade <= hi * 1.0001 {
        let gx = x(decade);
        s.push_str(&format!(
            "<line x1=\"{gx:.1}\" y1=\"{top}\" x2=\"{gx:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
            h - 30.0,
            h - 15.0,
            if decade >= 1.0 {
                format!("{decade:.0}")
            } else {
                num(decade)
            }
        ));
        decade *= 10.0;
    }
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = top + i as f64 * bar_h;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{label_w}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#3b7dd8\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} {unit}</text>\n",
            label_w - 8.0,
            y + 15.0,
            esc(label),
            y + 3.0,
            (x(*v) - label_w).max(1.0),
            bar_h - 6.0,
            x(*v) + 4.0,
            y + 15.0,
            num(*v)
        ));
    }
    s.push_str("</svg>\n");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('`', "")
}

/// A number with about three significant digits.
fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The last user message of a model request, as the scripted model reads it. OpenClaw's
/// requests are read as the issue's notes describe them: the trailing injected
/// `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` message is skipped, content given as parts is
/// joined, and the `[Tue 2026-12-01 01:30 UTC] ` time prefix OpenClaw adds is dropped.
fn last_user(req: &Value) -> String {
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let user = req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text)
        .find(|t| !t.starts_with("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"))
        .unwrap_or_default();
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]]*\] ").unwrap()
    });
    STAMP.replace(&user, "").into_owned()
}

/// Writes the project: agents `main`, `a` and `b` (may `agent_call`), `s` (may
/// `sessions_spawn`), all on the provider `zero` at `model_url`. Returns its folder.
fn write_project(base: &Path, model_url: &str, sessions: usize) -> PathBuf {
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
    let call = "[tools]\nallow = [\"agent_call\"]\n";
    for (name, body) in [
        ("main", ""),
        ("a", call),
        ("b", call),
        ("s", "[tools]\nallow = [\"sessions_spawn\"]\n"),
    ] {
        std::fs::write(p.join(format!("agents.d/{name}.toml")), body).unwrap();
    }
    std::fs::write(p.join("NOTES.md"), "a note for the tool-call turn\n").unwrap();
    p
}

/// A `clawbus up` child process.
struct Daemon {
    child: Child,
    url: String,
    token: String,
    log: PathBuf,
    /// From spawn until the port accepted a connection.
    started: Duration,
}

impl Daemon {
    fn start(project: &Path, state: &Path) -> Self {
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

    fn rss_mib(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// Panics with `what` and the daemon's log unless `ok`.
    fn check(&self, ok: bool, what: &str) {
        if !ok {
            panic!(
                "{what}\ndaemon log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    /// SIGTERM, then at most [`SHUTDOWN`]; SIGKILL after that.
    fn stop(&mut self) {
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
async fn post(http: &reqwest::Client, d: &Daemon, agent: &str, body: &Value) -> Value {
    let res = http
        .post(format!("{}/v1/agents/{agent}/tasks", d.url))
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

/// Tasks per second through the embedded bus (sled store, dedup ledger, group commit): each task
/// submitted with its own request id, delivered, started and completed; 256 in flight.
fn bus_throughput(base: &Path, tasks: usize) -> f64 {
    let dir = tempfile::tempdir_in(base).unwrap();
    let path = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        actix_rt::System::with_tokio_rt(move || rt).block_on(async move {
            let bus = LocalBus::open(&path, LocalOptions::default()).unwrap();
            let mut sub = bus.consume(Topic::parse("bench.>").unwrap()).await.unwrap();
            tokio::spawn(async move {
                while let Some(d) = sub.next().await {
                    tokio::spawn(async move {
                        d.start().await.unwrap();
                        let result = d.envelope().payload.clone();
                        d.complete(Outcome::Succeeded { result }).await.unwrap();
                    });
                }
            });
            let topic = Topic::parse("bench.tasks").unwrap();
            let sem = Arc::new(tokio::sync::Semaphore::new(256));
            let started = Instant::now();
            let mut joins = Vec::with_capacity(tasks);
            for i in 0..tasks {
                let permit = sem.clone().acquire_owned().await.unwrap();
                let (bus, topic) = (bus.clone(), topic.clone());
                joins.push(tokio::spawn(async move {
                    let env = Envelope::task(
                        topic,
                        RequestId::parse(&format!("bench-{i}")).unwrap(),
                        json!(i),
                    );
                    bus.request(env, REQUEST).await.unwrap();
                    drop(permit);
                }));
            }
            for j in joins {
                j.await.unwrap();
            }
            tasks as f64 / started.elapsed().as_secs_f64()
        })
    })
    .join()
    .unwrap()
}

/// Times `n` 4 KiB writes each followed by `fdatasync`, in a file under `base`.
fn fdatasync_floor(base: &Path, n: usize) -> Vec<Duration> {
    let path = base.join("fsync-probe");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = [7u8; 4096];
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f.write_all(&block).unwrap();
            f.sync_data().unwrap();
            t.elapsed()
        })
        .collect()
}

// `cargo test --benches` and clippy build the bench itself with cfg(test) but without the test
// harness, which drops the #[test] functions and leaves their imports unused; these tests run
// in tests/bench_harness.rs.
#[cfg(test)]
#[allow(unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn last_user_reads_openclaw_requests_like_plain_ones() {
        let plain = json!({ "messages": [{ "role": "user", "content": "[task result] x" }] });
        assert_eq!(last_user(&plain), "[task result] x");
        let openclaw = json!({ "messages": [
            { "role": "system", "content": "you are" },
            { "role": "user", "content": "[Tue 2026-12-01 01:30 UTC] tool 1\n\nRuntime: agent=main" },
            { "role": "assistant", "content": null },
            { "role": "tool", "content": "a note" },
            { "role": "user", "content": [{ "type": "text",
              "text": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nnone\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>" }] },
        ] });
        assert_eq!(last_user(&openclaw), "tool 1\n\nRuntime: agent=main");
        let parts = json!({ "messages": [{ "role": "user",
            "content": [{ "type": "text", "text": "hel" }, { "type": "text", "text": "lo" }] }] });
        assert_eq!(last_user(&parts), "hello");
    }

    #[test]
    fn openclaw_figures_fill_their_rows_and_render() {
        let stat = |v: f64| Stat::of(vec![v]);
        let mut row = Row::new(Scenario::CliTurn, "one turn", "ms", stat(10.0));
        row.openclaw = Some(Stat::of(vec![1000.0, 2000.0, 1500.0]));
        let mut bus = Row::new(Scenario::Bus, "bus", "tasks/s", stat(100.0));
        bus.higher_is_better = true;
        let report = Report {
            machine: Machine::probe(),
            rows: vec![row, bus],
            openclaw: "measured".into(),
            openclaw_run: None,
            model_request_bytes: [Some(stat(2000.0)), None],
            load_after: "1.00 1.00 1.00".into(),
            sizes: Sizes::tiny(),
        };
        let md = markdown(&report);
        assert!(
            md.contains("| one turn | 10.00 ms | 1 run | 1500 ms | 1000–2000 | 150.0× |"),
            "{md}"
        );
        assert!(
            md.contains("| bus | 100.0 tasks/s | 1 run | n/a |  | n/a |"),
            "{md}"
        );
        assert!(md.contains("load average"), "{md}");
        assert!(md.contains("clawbus 2000 B"), "{md}");
        let chart = svg(&report);
        assert!(
            chart.contains("OpenClaw ÷ clawbus") && chart.contains("150"),
            "{chart}"
        );
        assert_eq!(to_json(&report)["rows"][0]["ratio"], 150.0);
    }
}
