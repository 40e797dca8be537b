//! clawbus measured from the outside, as a user would, against a zero-latency model server:
//! `cargo bench --bench compare` (add `-- --json`, `-- --tiny`, `-- --turns N`, …).
//!
//! Starts the scripted OpenAI-compatible server of `clawbus::testkit` in-process (it answers at
//! once), writes a temporary project whose agents use it as an `openai` provider, starts the
//! release `clawbus up` as a child process and drives it over HTTP and through its CLI. Prints one
//! Markdown table (or JSON with `--json`) and writes `compare.md`, `compare.json` and
//! `compare.svg` (a log-scale bar chart) into `target/bench-compare/` (or `--out DIR`). Every
//! scenario and option is described in [`harness`] and in `BENCHMARKS.md`. Figures are printed,
//! never asserted; `tests/bench_harness.rs` runs every scenario at tiny sizes so this cannot rot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

mod harness;

fn main() {
    let opts = match harness::Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("compare: {e}");
            std::process::exit(2);
        }
    };
    let report = harness::run(&opts);
    harness::emit(&report, &opts);
}
