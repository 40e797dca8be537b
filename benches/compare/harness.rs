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
//! - **turn, OpenAI endpoint**: non-stream `POST /v1/chat/completions` with `model: "agent:main"`
//!   on the same keep-alive client, a distinct `user` (so a session of its own) per turn;
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
//!
//! The code is split by concern: [`options`] (the command line), [`report`] (the figures and
//! rows), [`model`] (the zero-latency model), [`daemon`] (the `clawbus up` child), [`turns`] and
//! [`load`] (the scenarios against it), [`floor`] (the in-process bus and disk figures),
//! [`render`] (Markdown, JSON, SVG).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "daemon.rs"]
mod daemon;
#[path = "floor.rs"]
mod floor;
#[path = "load.rs"]
mod load;
#[path = "model.rs"]
mod model;
#[path = "openclaw/mod.rs"]
pub(crate) mod openclaw;
#[path = "options.rs"]
mod options;
#[path = "render.rs"]
mod render;
#[path = "report.rs"]
mod report;
#[path = "turns.rs"]
mod turns;
#[path = "ws.rs"]
mod ws;

pub(crate) use options::{Options, Sizes};
pub(crate) use render::emit;
pub(crate) use report::{Machine, Report, Row, Scenario, Stat};

use daemon::{Daemon, write_project};
use render::num;
use report::load_average;
use std::time::Duration;

/// The longest any single request or batch may take.
const REQUEST: Duration = Duration::from_secs(120);

/// Runs every scenario.
pub(crate) fn run(opts: &Options) -> Report {
    let sizes = opts.sizes.clone();
    let machine = Machine::probe();
    eprintln!("compare: {}", machine.line());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (model, announced) = rt.block_on(model::start());
    let base = tempfile::tempdir().unwrap();
    let project = write_project(base.path(), &model.base_url(), sizes.sessions);

    let mut rows = vec![turns::starts(&project, base.path(), &sizes)];
    let mut d = Daemon::start(&project, &project.join(".clawbus"));
    rows.push(turns::idle_rss(&d, &sizes));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .timeout(REQUEST)
        .build()
        .unwrap();
    let ctx = turns::Ctx {
        rt: &rt,
        http: &http,
        d: &d,
        project: &project,
        sizes: &sizes,
    };
    rows.extend(turns::sequential(&ctx, &announced));
    rows.extend(load::concurrent(&ctx));
    rows.push(load::idle_sessions(&ctx));
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
        bus.push(floor::bus_throughput(base.path(), sizes.bus_tasks));
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
        Stat::ms(&floor::fdatasync_floor(base.path(), sizes.fsyncs)),
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

// `cargo test --benches` and clippy build the bench itself with cfg(test) but without the test
// harness, which drops the #[test] functions and leaves their imports unused; these tests run
// in tests/bench_harness.rs.
#[cfg(test)]
#[allow(unused_imports)]
mod tests {
    use super::model::last_user;
    use super::render::{markdown, svg, to_json};
    use super::*;
    use serde_json::json;

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
