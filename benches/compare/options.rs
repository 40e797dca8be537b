//! The command line: scenario sizes and the options of `cargo bench --bench compare -- …`.

use std::path::PathBuf;
use std::time::Duration;

/// Usage, part of every argument error.
const USAGE: &str = "usage: cargo bench --bench compare -- [--json] [--tiny] [--out DIR] \
[--starts N] [--turns N] [--repeats N] [--sessions N] [--with-openclaw] [--openclaw-cache DIR]";

/// Sizes of every scenario.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    /// Daemon starts timed.
    pub starts: usize,
    /// Sequential turns over the CLI, HTTP, WebSocket and the OpenAI endpoint (each).
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
    /// The sizes of a full run.
    pub(crate) fn full() -> Self {
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

    /// The sizes of `--tiny`: every scenario once or a few times.
    pub(crate) fn tiny() -> Self {
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
pub(crate) struct Options {
    /// Scenario sizes.
    pub sizes: Sizes,
    /// Print JSON instead of the Markdown table.
    pub json: bool,
    /// Where `compare.{md,json,svg}` go.
    pub out: PathBuf,
    /// Also measure OpenClaw.
    pub with_openclaw: bool,
    /// Where OpenClaw and its Node are installed (`--openclaw-cache`; see
    /// [`super::openclaw::install::cache_dir`]).
    pub openclaw_cache: Option<PathBuf>,
}

impl Options {
    /// Parses the arguments after `--` (cargo's own `--bench` is ignored).
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
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
