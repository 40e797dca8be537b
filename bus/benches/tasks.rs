//! Bus task throughput, local beside NATS JetStream: `cargo bench -p bus --bench tasks`.
//! Printed, never asserted. The workload is the `figures` bench's first figure (submit →
//! deliver → complete, dedup on, 256 in flight, a number as each task's payload and result),
//! then how many commits each flush of the local store carried, then the same workload with a
//! text of [`TEXT_BYTES`] bytes (with a line break, as prompts and answers have) as each task's
//! payload and result, on a fresh store: what a task's own bytes cost. `-- number` or `-- text`
//! runs only that local run (cargo passes `--bench`; other arguments pick runs). Each run also
//! prints the round trip of a cache line between the first two CPUs, before and after: on a
//! virtual machine whose vCPUs the host moves, the figure halves when they are far apart. It
//! runs on mimalloc, the daemon's allocator (with glibc's malloc the same workload ran at about
//! 55 % of the rate). NATS runs when `CLAWBUS_BENCH_NATS` names a server (≥ 2.11, JetStream on), e.g.
//! `nats://127.0.0.1:4222`; each run uses a fresh prefix.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::nats::{Nats, NatsBus, NatsOptions};
use bus::store::DEFAULT_WINDOW;
use bus::{
    Bus, Envelope, LocalBus, LocalOptions, Outcome, RequestId, SledTaskStore, SystemClock, Topic,
};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The allocator `clawbus` ships with (its global allocator): the figures are the daemon's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TASKS: usize = 20_000;
const IN_FLIGHT: usize = 256;
/// The size of the text payload of the second local run.
const TEXT_BYTES: usize = 400;

/// This process's CPU time so far (user + system, every thread), from `/proc/self/stat` in
/// clock ticks of 10 ms; `None` where there is no such file.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Task `i`'s payload: the number `i`.
fn number(i: usize) -> serde_json::Value {
    json!(i)
}

/// Task `i`'s payload: a text of [`TEXT_BYTES`] bytes that starts with `i`.
fn text(i: usize) -> serde_json::Value {
    let mut t = format!("task {i}: please summarise this.\n");
    t.extend(std::iter::repeat_n('x', TEXT_BYTES.saturating_sub(t.len())));
    json!(t)
}

/// The daemon's task store in `dir`: records in the task journal, beside a sled database.
fn journaled(dir: &std::path::Path) -> Arc<SledTaskStore> {
    let db = sled::open(dir.join("db")).unwrap();
    let extras = bus::StoreExtras {
        journal: Some(dir.join("tasks.journal")),
        ..Default::default()
    };
    Arc::new(SledTaskStore::with_extras(db, Arc::new(SystemClock), DEFAULT_WINDOW, extras).unwrap())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = move |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    actix_rt::System::with_tokio_rt(move || rt).block_on(async move {
        if wanted("number") {
            let dir = tempfile::tempdir().unwrap();
            let store = journaled(dir.path());
            let local = LocalBus::with_store(store.clone(), LocalOptions::default());
            run("local (sled)", Arc::new(local), TASKS, number).await;
            let grouped = store.commit_stats();
            println!(
                "local (sled): {} commits in {} flushes = {:.2} commits per flush",
                grouped.commits,
                grouped.flushes,
                grouped.commits as f64 / grouped.flushes.max(1) as f64
            );
        }
        if wanted("text") {
            let dir = tempfile::tempdir().unwrap();
            let local = LocalBus::with_store(journaled(dir.path()), LocalOptions::default());
            let name = format!("local (sled), {TEXT_BYTES}-byte text payloads");
            run(&name, Arc::new(local), TASKS, text).await;
        }
        match std::env::var("CLAWBUS_BENCH_NATS") {
            Ok(url) => {
                let mut opts = NatsOptions::new(url);
                opts.prefix = format!("bench{}", std::process::id());
                let nats = Nats::connect(opts).await.unwrap();
                let window = Duration::from_secs(24 * 3600);
                let bus = NatsBus::open(nats, Arc::new(SystemClock), window, 5)
                    .await
                    .unwrap();
                run(
                    "nats (JetStream, one node)",
                    Arc::new(bus),
                    TASKS / 4,
                    number,
                )
                .await;
            }
            Err(_) => println!("nats: skipped (set CLAWBUS_BENCH_NATS=nats://HOST:PORT)"),
        }
    });
}

async fn run(name: &str, bus: Arc<dyn Bus>, tasks: usize, payload: fn(usize) -> serde_json::Value) {
    let mut sub = bus.consume(Topic::parse("bench.>").unwrap()).await.unwrap();
    let consumer = tokio::spawn(async move {
        while let Some(d) = sub.next().await {
            tokio::spawn(async move {
                d.start().await.unwrap();
                let result = d.envelope().payload.clone();
                d.complete(Outcome::Succeeded { result }).await.unwrap();
            });
        }
    });
    let topic = Topic::parse("bench.tasks").unwrap();
    // The figure halves when the two CPUs are far apart: how far they are, before and after.
    let before = clawbus_testkit::cross_cpu_round_trip();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    // IN_FLIGHT clients, each submitting its share one task after another (as a connection does
    // request after request): IN_FLIGHT tasks in flight, and no thread of the bench's own
    // between one task's end and the next one's start.
    let clients: Vec<_> = (0..IN_FLIGHT)
        .map(|c| {
            let (bus, topic) = (bus.clone(), topic.clone());
            tokio::spawn(async move {
                for i in (c..tasks).step_by(IN_FLIGHT) {
                    let env = Envelope::task(
                        topic.clone(),
                        RequestId::parse(&format!("bench-{i}")).unwrap(),
                        payload(i),
                    );
                    bus.request(env, Duration::from_secs(120)).await.unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    println!(
        "{name}: bus tasks (submit→deliver→complete, dedup+journal, {IN_FLIGHT} in flight): {tasks} in {secs:.2}s = {:.0} tasks/s",
        tasks as f64 / secs
    );
    if let Some(cpu) = cpu {
        // Below 2 on two cores: the run waited on something other than its CPUs (the disk).
        println!(
            "{name}: CPU meanwhile {cpu:.2}s (user + system, every thread) = {:.2} cores busy, {:.1} µs a task",
            cpu / secs,
            cpu * 1e6 / tasks as f64
        );
    }
    let after = clawbus_testkit::cross_cpu_round_trip();
    let ns = |p: Option<clawbus_testkit::CrossCpu>| {
        p.map_or("-".to_string(), |p| format!("{:.0} ns", p.round_trip_ns))
    };
    println!(
        "{name}: cross-CPU round trip (a cache line between the first two CPUs) before {}, after {}",
        ns(before),
        ns(after)
    );
    consumer.abort();
}
