//! Figures of the task coordinator, in one process (`cargo bench --bench coordinator`):
//!
//! - **cross-agent call**: `POST /v1/agents/a/tasks {wait: true}` where `a` calls `b` with a
//!   waiting `agent_call` (scripted model answering at once, in-process daemon on loopback):
//!   the whole call, median and p99 over `--calls` (1,000);
//! - **coordinator overhead per call**: what a waiting `agent_call` adds on its critical path —
//!   registering its wait with the coordinator (`coord.wait` request, answer on an inbox) and
//!   dropping it (`coord.unwait`) — timed on the same daemon's bus, `--calls` times;
//! - **memory per tracked task**: `--tasks` (100,000) queued tasks submitted to an embedded bus
//!   (sled on a temporary folder, nobody consuming them), then a coordinator started over them:
//!   bytes on disk per task (the sled folder after a flush), the RSS growth per task of the bus
//!   and store, and the RSS growth per task when the coordinator picks them all up (its live
//!   map and deadline heap; an upper bound, as the startup scan's buffers count too).
//!
//! Figures are printed, never asserted. `--tiny` runs a few of each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::{Bus, BusOptions, Envelope, RequestId, Topic};
use clawbus::config::{self, LoadOptions};
use clawbus::coordinator::{
    CoordinatorHandle, CoordinatorOptions, WaitEdge, end_wait, register_wait,
};
use clawbus::daemon::{Daemon, StartOptions};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let mut calls = 1_000;
    let mut tasks = 100_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tiny" => (calls, tasks) = (5, 1_000),
            "--calls" => calls = args.next().and_then(|n| n.parse().ok()).expect("--calls N"),
            "--tasks" => tasks = args.next().and_then(|n| n.parse().ok()).expect("--tasks N"),
            _ => {} // cargo bench passes --bench
        }
    }
    actix_rt::System::new().block_on(async move {
        cross_agent_calls(calls).await;
        memory_per_task(tasks).await;
    });
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what}: median {:.3} ms, p99 {:.3} ms (n = {})",
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.len()
    );
}

async fn cross_agent_calls(calls: usize) {
    let model = ScriptedServer::with_responder(|req| {
        let msgs = req["messages"].as_array().cloned().unwrap_or_default();
        let user = msgs
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        let answered = msgs.last().is_some_and(|m| m["role"] == "tool");
        match user.split_whitespace().next() {
            Some("ask") if !answered => Turn::tool_call(
                "agent_call",
                json!({ "agent": "b", "task": format!("compute {user}") }),
            ),
            Some("compute") => Turn::text("42"),
            _ => Turn::text("done"),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("agents.d")).unwrap();
    std::fs::write(
        root.join("clawbus.toml"),
        format!(
            "[lanes]\nmain = 64\nsubagent = 64\n[providers.zero]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"zero/m\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("agents.d/a.toml"),
        "may_call = [\"b\"]\n[tools]\nallow = [\"agent_call\"]\n",
    )
    .unwrap();
    std::fs::write(root.join("agents.d/b.toml"), "").unwrap();
    let config =
        config::load(&LoadOptions::in_folder(root)).unwrap_or_else(|r| panic!("{}", r.render()));
    let daemon = Daemon::start(config, StartOptions::free_port())
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let mut whole = Vec::with_capacity(calls);
    for i in 0..calls {
        let body = json!({ "text": format!("ask {i}"), "wait": true,
                           "session": format!("ask-{i}"), "timeout_ms": 60_000 });
        let t = Instant::now();
        let v: Value = http
            .post(format!("{}/v1/agents/a/tasks", daemon.url()))
            .bearer_auth(daemon.token())
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        whole.push(t.elapsed());
        assert_eq!(v["state"], "succeeded", "{v}");
    }
    report(
        "cross-agent call, whole (HTTP → a → agent_call → b → a)",
        whole,
    );

    let bus: &dyn Bus = daemon.bus();
    let mut overhead = Vec::with_capacity(calls);
    for _ in 0..calls {
        let edge = WaitEdge {
            waiter: uuid::Uuid::now_v7(),
            waiter_agent: "a".into(),
            callee: uuid::Uuid::now_v7(),
            callee_agent: "b".into(),
        };
        let t = Instant::now();
        register_wait(bus, &edge).await.unwrap();
        end_wait(bus, &edge).await;
        overhead.push(t.elapsed());
    }
    report(
        "coordinator overhead per waiting call (coord.wait round trip + coord.unwait)",
        overhead,
    );
    daemon.shutdown().await;
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

async fn memory_per_task(tasks: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let clock: Arc<dyn bus::Clock> = Arc::new(bus::SystemClock);
    let bus = bus::open(
        BusOptions {
            clock: clock.clone(),
            ..BusOptions::default()
        },
        db.clone(),
    )
    .unwrap()
    .bus;
    let before = rss_bytes();
    let far = clock.now_ms() + 3_600_000;
    let topic = Topic::agent("nobody");
    for chunk in (0..tasks).collect::<Vec<_>>().chunks(256) {
        let submits = chunk.iter().map(|i| {
            let mut env = Envelope::task(
                topic.clone(),
                RequestId::parse(&format!("fill-{i}")).unwrap(),
                json!({ "text": format!("task number {i}") }),
            );
            env.deadline = Some(far);
            let bus = bus.clone();
            async move { bus.submit(env).await.unwrap() }
        });
        futures::future::join_all(submits).await;
    }
    db.flush_async().await.unwrap();
    let filled = rss_bytes();
    let disk = dir_bytes(dir.path());
    let n = tasks as f64;
    println!(
        "{tasks} queued tasks in the store: {:.0} bytes on disk per task (sled folder after flush), RSS +{:.0} bytes per task (bus + store)",
        disk as f64 / n,
        filled.saturating_sub(before) as f64 / n
    );
    let coord = CoordinatorHandle::start(bus.clone(), clock, CoordinatorOptions::default())
        .await
        .unwrap();
    let t = Instant::now();
    while coord.status().await.live < tasks {
        assert!(t.elapsed() < Duration::from_secs(600), "coordinator start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tracked = rss_bytes();
    println!(
        "coordinator tracking them all: RSS +{:.0} bytes per tracked task (live map + deadline heap; upper bound), picked up in {:.0} ms",
        tracked.saturating_sub(filled) as f64 / n,
        t.elapsed().as_secs_f64() * 1e3
    );
    coord.stop();
}
