//! Figures, printed, never asserted: `cargo bench --bench figures`.
//!
//! 1. Bus: tasks submitted → delivered → completed per second, dedup ledger on (sled, group commit),
//!    with the round trip of a cache line between two CPUs before and after (the figure halves
//!    when the CPUs are far apart).
//! 2. Bus: events published → delivered per second (no journal).
//! 3. Per-turn overhead of the session + lane path (bus → agent → session actor → main lane →
//!    scripted model answering at once → transcript synced → outcome): median and p99 over 10,000
//!    turns; memory per idle live session.
//! 4. One scripted turn over HTTP (`POST /v1/agents/echo/tasks` with `wait`): median and p99.
//! 5. The same through the CLI (`clawbus post agent.echo … --wait`, a process per call): median.
//!
//! `cargo bench --bench figures -- bus` runs only the figures whose name holds `bus` (the names:
//! `bus_tasks`, `bus_events`, `session_turns`, `turns`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::{Bus, Envelope, LocalBus, LocalOptions, Outcome, RequestId, Topic};
use clawbus::config::{self, LoadOptions};
use clawbus::daemon::{Daemon, StartOptions};
use serde_json::json;
use std::time::{Duration, Instant};

const TASKS: usize = 20_000;
const IN_FLIGHT: usize = 256;
const EVENTS: usize = 200_000;
const HTTP_TURNS: usize = 2_000;
const CLI_TURNS: usize = 30;
const SESSION_TURNS: usize = 10_000;
const IDLE_SESSIONS: usize = 2_000;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // cargo passes `--bench`; any other argument picks figures by name.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    actix_rt::System::with_tokio_rt(move || rt).block_on(async move {
        if wanted("bus_tasks") {
            bus_tasks().await;
        }
        if wanted("bus_events") {
            bus_events().await;
        }
        if wanted("session_turns") {
            session_turns().await;
        }
        if wanted("turns") {
            turns().await;
        }
    });
}

async fn bus_tasks() {
    // The figure halves when the two CPUs are far apart (BENCHMARKS.md, "A machine with two
    // speeds"): how far they are, before and after.
    print_cross_cpu("before the bus tasks");
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), LocalOptions::default()).unwrap();
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
    let started = Instant::now();
    // IN_FLIGHT clients, each submitting its share one task after another (as a connection does
    // request after request): IN_FLIGHT tasks in flight, and no thread of the bench's own
    // between one task's end and the next one's start.
    let clients: Vec<_> = (0..IN_FLIGHT)
        .map(|c| {
            let (bus, topic) = (bus.clone(), topic.clone());
            tokio::spawn(async move {
                for i in (c..TASKS).step_by(IN_FLIGHT) {
                    let env = Envelope::task(
                        topic.clone(),
                        RequestId::parse(&format!("bench-{i}")).unwrap(),
                        json!(i),
                    );
                    bus.request(env, Duration::from_secs(60)).await.unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "bus tasks (submit→deliver→complete, dedup+journal, {IN_FLIGHT} in flight): {TASKS} in {secs:.2}s = {:.0} tasks/s",
        TASKS as f64 / secs
    );
    print_cross_cpu("after the bus tasks");
}

/// Prints the round trip of a cache line between the first two CPUs (see
/// `clawbus_testkit::cross_cpu_round_trip`), or why there is none.
fn print_cross_cpu(when: &str) {
    match clawbus_testkit::cross_cpu_round_trip() {
        Some(probe) => println!("{probe} ({when})"),
        None => println!("cross-CPU round trip: not measured (fewer than two CPUs) ({when})"),
    }
}

async fn bus_events() {
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), LocalOptions::default()).unwrap();
    let mut sub = bus
        .subscribe(Topic::parse("bench.*").unwrap())
        .await
        .unwrap();
    let topic = Topic::parse("bench.events").unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let caught_up = std::sync::Arc::new(tokio::sync::Notify::new());
    let (s2, n2) = (seen.clone(), caught_up.clone());
    tokio::spawn(async move {
        while sub.next().await.is_some() {
            s2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            n2.notify_one();
        }
    });
    // Flow control: never more than half the subscriber's buffer in flight, so nothing is dropped.
    const WINDOW: usize = bus::local::SUBSCRIBER_BUFFER / 2;
    let started = Instant::now();
    for i in 0..EVENTS {
        while i - seen.load(std::sync::atomic::Ordering::SeqCst) >= WINDOW {
            caught_up.notified().await;
        }
        bus.publish(Envelope::event(topic.clone(), json!(i)))
            .await
            .unwrap();
    }
    while seen.load(std::sync::atomic::Ordering::SeqCst) < EVENTS {
        caught_up.notified().await;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "bus events (publish→deliver, one subscriber, {WINDOW} in flight): {EVENTS} in {secs:.2}s = {:.0} events/s",
        EVENTS as f64 / secs
    );
}

async fn turns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
    std::fs::write(dir.path().join("agents.d/echo.toml"), "").unwrap();
    let opts = LoadOptions::in_folder(dir.path());
    let cfg = config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    let daemon = Daemon::start(cfg, StartOptions::free_port()).await.unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/agents/echo/tasks", daemon.url());
    let mut samples = Vec::with_capacity(HTTP_TURNS);
    for i in 0..HTTP_TURNS {
        let t = Instant::now();
        let resp: serde_json::Value = http
            .post(&url)
            .bearer_auth(daemon.token())
            .json(&json!({ "text": format!("hello {i}"), "wait": true }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(resp["state"], "succeeded");
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(&mut samples);
    println!(
        "scripted turn over HTTP (wait=true, sequential, {HTTP_TURNS} turns): median {p50:?}, p99 {p99:?}"
    );

    let exe = env!("CARGO_BIN_EXE_clawbus");
    let mut samples = Vec::with_capacity(CLI_TURNS);
    for i in 0..CLI_TURNS {
        let t = Instant::now();
        let out = tokio::process::Command::new(exe)
            .args([
                "post",
                "agent.echo",
                &format!("hi {i}"),
                "--wait",
                "--url",
                &daemon.url(),
            ])
            .env("CLAWBUS_TOKEN", daemon.token())
            .env("RUST_LOG", "warn")
            .output()
            .await
            .unwrap();
        assert!(out.status.success());
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(&mut samples);
    println!(
        "scripted turn from the CLI (`clawbus post … --wait`, process per call, {CLI_TURNS} runs): median {p50:?}, p99 {p99:?}"
    );
    daemon.shutdown().await;
}

/// Starts a daemon with one scripted `echo` agent in a fresh folder.
async fn echo_daemon(dir: &std::path::Path) -> Daemon {
    std::fs::create_dir_all(dir.join("agents.d")).unwrap();
    std::fs::write(dir.join("agents.d/echo.toml"), "").unwrap();
    std::fs::write(dir.join("clawbus.toml"), "[sessions]\nmax_live = 5000\n").unwrap();
    let opts = LoadOptions::in_folder(dir);
    let cfg = config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    Daemon::start(cfg, StartOptions::free_port()).await.unwrap()
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

async fn session_turns() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = echo_daemon(dir.path()).await;
    let topic = Topic::agent("echo");
    let mut samples = Vec::with_capacity(SESSION_TURNS);
    for i in 0..SESSION_TURNS {
        // A thousand ongoing conversations, ten turns each, each on its own session lane.
        let env = Envelope::task(
            topic.clone(),
            RequestId::parse(&format!("turn-{i}")).unwrap(),
            json!({ "text": "hi" }),
        )
        .header("session", format!("s{}", i % 1000));
        let t = Instant::now();
        let (rec, _) = daemon
            .bus()
            .request(env, Duration::from_secs(60))
            .await
            .unwrap();
        samples.push(t.elapsed());
        assert_eq!(rec.state.as_str(), "succeeded");
    }
    let (p50, p99) = percentiles(&mut samples);
    println!(
        "per-turn overhead, session + lane path (scripted model, transcript fsync per turn, {SESSION_TURNS} turns): median {p50:?}, p99 {p99:?}"
    );

    let before = rss_bytes();
    for i in 0..IDLE_SESSIONS {
        let env = Envelope::task(
            topic.clone(),
            RequestId::parse(&format!("idle-{i}")).unwrap(),
            json!({ "text": "hi" }),
        );
        daemon
            .bus()
            .request(env, Duration::from_secs(60))
            .await
            .unwrap();
    }
    let after = rss_bytes();
    println!(
        "memory per idle live session: {:.1} KiB ({IDLE_SESSIONS} sessions, RSS {:.1} → {:.1} MiB)",
        (after.saturating_sub(before)) as f64 / IDLE_SESSIONS as f64 / 1024.0,
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    daemon.shutdown().await;
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}
