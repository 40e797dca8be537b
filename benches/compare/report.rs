//! What a run produces: a [`Stat`] per figure, a [`Row`] per [`Scenario`], the [`Machine`] it
//! ran on and the whole [`Report`].

use super::openclaw;
use super::options::Sizes;
use super::render::num;
use std::time::Duration;

/// A figure: the median of `n` samples and their spread.
#[derive(Debug, Clone)]
pub(crate) struct Stat {
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
    /// The figure of these samples (at least one).
    pub(crate) fn of(mut v: Vec<f64>) -> Self {
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

    /// The figure of these durations, in milliseconds.
    pub(crate) fn ms(v: &[Duration]) -> Self {
        Self::of(v.iter().map(|d| d.as_secs_f64() * 1e3).collect())
    }

    /// The spread as shown in the table: p99 over ≥ 20 samples, else min–max.
    pub(crate) fn spread(&self) -> String {
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
pub(crate) enum Scenario {
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
    /// One turn through `POST /v1/chat/completions` (non-stream), a `user` per turn.
    OpenAiTurn,
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
pub(crate) struct Row {
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
    /// A row with no OpenClaw figure, lower is better.
    pub(crate) fn new(
        key: Scenario,
        scenario: impl Into<String>,
        unit: &'static str,
        clawbus: Stat,
    ) -> Self {
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
    pub(crate) fn ratio(&self) -> Option<f64> {
        let o = self.openclaw.as_ref()?;
        let (a, b) = (o.median, self.clawbus.median);
        let r = if self.higher_is_better { b / a } else { a / b };
        r.is_finite().then_some(r)
    }
}

/// The machine a run was made on.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
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
pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Machine {
    /// Reads the machine's description.
    pub(crate) fn probe() -> Self {
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

    /// One line for the table.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} cores ({}), {:.1} GiB memory, {}, Linux {}",
            self.cores, self.cpu, self.memory_gib, self.os, self.kernel
        )
    }
}

/// A run's results.
#[derive(Debug, Clone)]
pub(crate) struct Report {
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
