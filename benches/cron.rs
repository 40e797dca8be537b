//! Cron scheduler figures, printed, never asserted: `cargo bench --bench cron`.
//!
//! Every scheduler here runs over a real local bus (`bus::open`) sharing a temporary sled db with the cron
//! store, on the real `bus::SystemClock`, with a fake agent `a` that completes each task at once.
//!
//! 1. **10,000 jobs** (`CRON_JOBS`, default 10,000): `every 1h` jobs whose anchors are staggered
//!    over an hour starting 10 minutes from now, so none fires during the run. Shown: the time to
//!    add them (`Scheduler::add`, one by one), process RSS (`VmRSS`, `RssAnon` from
//!    `/proc/self/status`) before and after adding them and after ticking, the time of one
//!    `Scheduler::tick` with nothing due (median and max of 20), then the process CPU
//!    (`utime + stime` from `/proc/self/stat`, 10 ms resolution; every thread, sled's included)
//!    over `CRON_IDLE_SECS` (default 10): with no loop running (the baseline), with the
//!    scheduler's own loop and nothing due, then with one more `every 1s` job among the 10,000,
//!    whose fire lateness is shown too (every tick reads all jobs, so the 1 s job makes the loop
//!    scan the store about twice a second: at the fire and when its run ends).
//! 2. **Fire accuracy on the real clock**: a fresh scheduler started with `Scheduler::start` (its
//!    own loop, real sleeping) and one `every 1s` job anchored on a whole second; for each of
//!    `CRON_FIRES` fires (default 100, which takes about 100 s; e.g. `CRON_FIRES=10` for a quick
//!    run) the scheduled time (from the request id `cron:<job>:<ms>`) against the wall clock when
//!    the fake agent received the task: median, p90 and max lateness in ms, and any fire missed.
//!
//! Run: `cargo bench --bench cron` (or `CRON_FIRES=10 CRON_IDLE_SECS=5 cargo bench --bench cron`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use bus::{Bus, BusOptions, Clock, Outcome, SystemClock, Topic};
use clawbus::cron::{
    CatchUp, Delivery, JobSpec, Payload, PayloadKind, ScheduleSpec, Scheduler, SchedulerHandle,
    SessionTarget, Settings,
};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Ticks timed with nothing due.
const TICKS: usize = 20;
/// The period of the many idle jobs.
const HOUR_MS: u64 = 3_600_000;
/// How far ahead the first idle job fires (past the end of the run).
const IDLE_LEAD_MS: u64 = 600_000;
/// The longest wait for one delivery.
const BOUND: Duration = Duration::from_secs(10);

fn main() {
    let jobs = env_usize("CRON_JOBS", 10_000);
    let fires = env_usize("CRON_FIRES", 100);
    let idle = Duration::from_secs(env_usize("CRON_IDLE_SECS", 10) as u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    actix_rt::System::with_tokio_rt(move || rt).block_on(async move {
        many_jobs(jobs, idle).await;
        fire_accuracy(fires).await;
    });
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
        })
        .unwrap_or(default)
}

/// A bus and cron store on one temporary sled db, and a fake agent `a` that completes each task
/// at once, sending `(request id, wall-clock ms when received)` on `delivered`.
struct Rig {
    _dir: tempfile::TempDir,
    db: sled::Db,
    bus: Arc<dyn Bus>,
    delivered: mpsc::UnboundedReceiver<(String, f64)>,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = sled::open(dir.path()).expect("sled db");
        let opts = BusOptions {
            clock: Arc::new(SystemClock),
            ..BusOptions::default()
        };
        let bus = bus::open(opts, db.clone()).expect("bus").bus;
        let mut sub = bus
            .consume(Topic::agent("a"))
            .await
            .expect("consume agent.a");
        let (tx, delivered) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(d) = sub.next().await {
                let at = wall_ms();
                let _ = tx.send((d.envelope().request_id.as_str().to_owned(), at));
                if !d.start().await.expect("start task") {
                    continue;
                }
                let result = serde_json::json!({ "text": "done" });
                d.complete(Outcome::Succeeded { result })
                    .await
                    .expect("complete task");
            }
        });
        Self {
            _dir: dir,
            db,
            bus,
            delivered,
        }
    }

    fn scheduler(&self, owner: &str) -> Scheduler {
        let bus: Arc<dyn Bus> = self.bus.clone();
        Scheduler::new(&self.db, bus, Arc::new(SystemClock), owner, settings()).expect("scheduler")
    }

    /// Waits for `n` fires of the job whose request ids start with `prefix`; returns each one's
    /// scheduled ms and lateness in ms (received − scheduled).
    async fn fires(&mut self, prefix: &str, n: usize) -> Vec<(u64, f64)> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let (rid, at) = tokio::time::timeout(BOUND, self.delivered.recv())
                .await
                .expect("a fire within 10 s")
                .expect("the fake agent is running");
            let Some(scheduled) = rid.strip_prefix(prefix).and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            out.push((scheduled, at - scheduled as f64));
        }
        out
    }
}

fn settings() -> Settings {
    Settings::new(chrono_tz::UTC, ["a".to_string()])
}

fn every(every_ms: u64, anchor_ms: u64, id: String) -> JobSpec {
    JobSpec {
        id: Some(id),
        name: None,
        agent: "a".into(),
        schedule: ScheduleSpec::Every {
            every_ms,
            anchor_ms: Some(anchor_ms),
        },
        payload: Payload {
            kind: PayloadKind::AgentTurn,
            message: "ping".into(),
        },
        session: SessionTarget::Isolated,
        delivery: Delivery::default(),
        enabled: true,
        catch_up: CatchUp::Latest,
        delete_after_run: false,
    }
}

/// Wall-clock Unix ms, with the fraction.
fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// The next whole second of the real clock, plus `lead_s` seconds, in Unix ms.
fn whole_second(lead_s: u64) -> u64 {
    let now = SystemClock.now_ms();
    (now / 1000 + 1 + lead_s) * 1000
}

/// `(VmRSS, RssAnon)` in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// Process CPU time (`utime + stime`, every thread) in ms; Linux reports it in 1/100 s.
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the `(comm)`, which may hold spaces: state is field 3, utime 14, stime 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    fields.iter().sum::<u64>() * 10
}

/// `(median, p90, max)` of `xs`.
fn stats(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9), at(1.0))
}

/// Scheduled times whose successor is more than one period later (fires not delivered).
fn missed(fires: &[(u64, f64)], period_ms: u64) -> u64 {
    fires
        .windows(2)
        .map(|w| (w[1].0.saturating_sub(w[0].0) / period_ms).saturating_sub(1))
        .sum()
}

fn row(what: &str, value: String) {
    println!("  {what:<52} {value}");
}

async fn many_jobs(n: usize, idle: Duration) {
    println!("cron with {n} jobs (every 1h, staggered anchors, none due):");
    let mut rig = Rig::new().await;
    let scheduler = Arc::new(rig.scheduler("bench"));
    let (rss0, anon0) = rss_kib();

    let base = SystemClock.now_ms() + IDLE_LEAD_MS;
    let stagger = HOUR_MS / n.max(1) as u64;
    let started = Instant::now();
    for i in 0..n {
        let spec = every(HOUR_MS, base + i as u64 * stagger, format!("job-{i}"));
        scheduler.add(&spec).await.expect("add job");
    }
    let add = started.elapsed();
    let (rss1, anon1) = rss_kib();

    let mut ticks = Vec::with_capacity(TICKS);
    for _ in 0..TICKS {
        let started = Instant::now();
        let report = scheduler.tick().await;
        ticks.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(report.fired.is_empty(), "nothing should be due");
        assert!(report.errors.is_empty(), "tick errors: {:?}", report.errors);
    }
    let (rss2, anon2) = rss_kib();
    let (tick_med, _, tick_max) = stats(&ticks);

    // The same span with no loop: the process's own background (sled's flusher, the runtime).
    let cpu0 = cpu_ms();
    tokio::time::sleep(idle).await;
    let base_cpu = cpu_ms() - cpu0;

    let handle = SchedulerHandle::spawn(scheduler.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cpu0 = cpu_ms();
    tokio::time::sleep(idle).await;
    let idle_cpu = cpu_ms() - cpu0;

    // One more job, every second: the loop now wakes each second and each tick scans every job.
    let anchor = whole_second(1);
    let job = handle
        .add(&every(1000, anchor, "every-1s".into()))
        .await
        .expect("add every-1s job");
    let prefix = format!("cron:{}:", job.id);
    let first = rig.fires(&prefix, 1).await;
    let cpu1 = cpu_ms();
    let started = Instant::now();
    let busy_n = idle.as_secs().max(1) as usize;
    let mut busy = rig.fires(&prefix, busy_n).await;
    let busy_secs = started.elapsed().as_secs_f64();
    let busy_cpu = cpu_ms() - cpu1;
    handle.stop().await;
    busy.splice(0..0, first);
    let late: Vec<f64> = busy.iter().map(|&(_, l)| l).collect();
    let (late_med, late_p90, late_max) = stats(&late);

    let kib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    let per_job = |a: u64, b: u64| (b.saturating_sub(a) as f64 * 1024.0) / n.max(1) as f64;
    row(
        &format!("add {n} jobs"),
        format!(
            "{:.2} s ({:.0} µs/job)",
            add.as_secs_f64(),
            add.as_secs_f64() * 1e6 / n.max(1) as f64
        ),
    );
    row(
        "RSS before adding (VmRSS / RssAnon)",
        format!("{} / {}", kib(rss0), kib(anon0)),
    );
    row(
        "RSS after adding",
        format!(
            "{} / {} (+{:.0} / +{:.0} B/job)",
            kib(rss1),
            kib(anon1),
            per_job(rss0, rss1),
            per_job(anon0, anon1)
        ),
    );
    row(
        &format!("RSS after {TICKS} ticks"),
        format!(
            "{} / {} (+{:.0} / +{:.0} B/job over before adding)",
            kib(rss2),
            kib(anon2),
            per_job(rss0, rss2),
            per_job(anon0, anon2)
        ),
    );
    row(
        &format!("tick(), nothing due (median / max of {TICKS})"),
        format!("{tick_med:.1} ms / {tick_max:.1} ms"),
    );
    row(
        &format!("process CPU, no loop, {} s (baseline)", idle.as_secs()),
        format!(
            "{base_cpu} ms ({:.2} % of a core)",
            base_cpu as f64 / idle.as_secs_f64() / 10.0
        ),
    );
    row(
        &format!("process CPU, loop idle {} s (none due)", idle.as_secs()),
        format!(
            "{idle_cpu} ms ({:.2} % of a core)",
            idle_cpu as f64 / idle.as_secs_f64() / 10.0
        ),
    );
    row(
        &format!("process CPU, + one every-1s job, {busy_secs:.1} s"),
        format!(
            "{busy_cpu} ms ({:.1} % of a core)",
            busy_cpu as f64 / busy_secs / 10.0
        ),
    );
    row(
        &format!(
            "every-1s lateness among {n} (median/p90/max, {})",
            late.len()
        ),
        format!(
            "{late_med:.1} / {late_p90:.1} / {late_max:.1} ms, {} missed",
            missed(&busy, 1000)
        ),
    );
    println!();
}

async fn fire_accuracy(n: usize) {
    println!(
        "cron fire accuracy, real clock, one every-1s job, {n} fires (~{n} s; CRON_FIRES to change):"
    );
    let mut rig = Rig::new().await;
    let bus: Arc<dyn Bus> = rig.bus.clone();
    let handle = Scheduler::start(&rig.db, bus, Arc::new(SystemClock), "bench", settings())
        .expect("start scheduler");
    let anchor = whole_second(1);
    let job = handle
        .add(&every(1000, anchor, "every-1s".into()))
        .await
        .expect("add every-1s job");
    let prefix = format!("cron:{}:", job.id);
    let fires = rig.fires(&prefix, n).await;
    handle.stop().await;
    let late: Vec<f64> = fires.iter().map(|&(_, l)| l).collect();
    let (med, p90, max) = stats(&late);
    let min = late.iter().copied().fold(f64::INFINITY, f64::min);
    row(
        "lateness, scheduled → task received by the agent",
        format!("median {med:.1} ms, p90 {p90:.1} ms, max {max:.1} ms, min {min:.1} ms"),
    );
    row("fires missed", missed(&fires, 1000).to_string());
}
