//! The cron store's conformance suite, run against each backend: sled trees, a key-value store
//! on sled, and a JetStream KV bucket on a real `nats-server` (skipped without one, unless
//! `CI=true`). Then three schedulers, each on its own NATS connection to one bucket, as three
//! nodes: one run per scheduled time.

use super::{BOUND, Rig, every, ms};
use crate::cron::store::{CronBackend, CronStore, KvCron, SledCron};
use crate::cron::*;
use bus::kv::SledKv;
use bus::nats::{Nats, NatsKv, NatsOptions};
use clawbus_testkit::NatsServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A backend of each kind: `sled` trees, a `kv` store on sled, or `nats`.
async fn open_backend(backend: &str, db: &::sled::Db, prefix: &str) -> Arc<dyn CronBackend> {
    match backend {
        "sled" => Arc::new(SledCron::open(db).unwrap()),
        "kv" => {
            let clock: Arc<dyn bus::Clock> = bus::ManualClock::new(0);
            Arc::new(KvCron::new(Arc::new(
                SledKv::open(db, "kv.cron", clock).unwrap(),
            )))
        }
        _ => Arc::new(KvCron::new(nats_kv(prefix).await)),
    }
}

async fn open(backend: &str, db: &::sled::Db, prefix: &str) -> CronStore {
    CronStore::with(open_backend(backend, db, prefix).await)
}

/// A new connection (a node) to the bucket `<prefix>_cron`.
async fn nats_kv(prefix: &str) -> Arc<dyn bus::kv::KvStore> {
    let server = NatsServer::shared_or_skip("cron store").unwrap();
    let mut opts = NatsOptions::new(server.url());
    opts.prefix = prefix.to_string();
    let nats = Nats::connect(opts).await.unwrap();
    Arc::new(NatsKv::open(&nats, "cron").await.unwrap())
}

/// A prefix no other test of this process uses.
fn fresh_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "cron{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// False (with `skipped:` printed) when the backend is NATS and no server can be started.
fn available(backend: &str, test: &str) -> bool {
    backend != "nats" || NatsServer::shared_or_skip(test).is_some()
}

fn job(rig_job: &Job, name: &str) -> Job {
    let mut j = rig_job.clone();
    j.name = name.to_string();
    j
}

fn run(id: &JobId, at: u64) -> RunRecord {
    RunRecord {
        job_id: id.clone(),
        scheduled_ms: at,
        started_ms: at,
        ended_ms: at + 1,
        outcome: RunOutcome::Succeeded,
        task_id: None,
        error: None,
    }
}

/// A job made by a scheduler over a throwaway sled store (the store under test gets its JSON).
async fn sample(rig: &Rig, id: &str) -> Job {
    let mut spec = every(60_000, ms("2026-01-05T08:00:00Z"));
    spec.id = Some(id.to_string());
    rig.scheduler("sample").add(&spec).await.unwrap()
}

async fn records_round_trip(backend: &str) {
    if !available(backend, "records_round_trip") {
        return;
    }
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let dir = tempfile::tempdir().unwrap();
    let db = ::sled::open(dir.path()).unwrap();
    let store = open(backend, &db, &fresh_prefix()).await;
    let a = sample(&rig, "job-a").await;
    let b = sample(&rig, "job_b").await;
    let state = JobState {
        next_fire_ms: Some(42),
        ..JobState::default()
    };
    store.insert(&a, &state).await.unwrap();
    store.insert(&b, &JobState::default()).await.unwrap();
    assert!(matches!(
        store.insert(&a, &state).await,
        Err(StoreError::Exists(id)) if id == a.id
    ));
    assert_eq!(store.job(&a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(store.state(&a.id).await.unwrap(), Some(state.clone()));
    let ids: Vec<JobId> = store
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(ids, [a.id.clone(), b.id.clone()]);
    // A new definition leaves the state alone.
    store.put_job(&job(&a, "renamed")).await.unwrap();
    assert_eq!(
        store.job(&a.id).await.unwrap().unwrap().name.as_str(),
        "renamed"
    );
    assert_eq!(store.state(&a.id).await.unwrap(), Some(state));
    let unknown = JobId::parse("nope").unwrap();
    assert_eq!(store.job(&unknown).await.unwrap(), None);
    assert!(!store.remove(&unknown).await.unwrap());
}

async fn a_swap_naming_a_stale_version_fails(backend: &str) {
    if !available(backend, "a_swap_naming_a_stale_version_fails") {
        return;
    }
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let dir = tempfile::tempdir().unwrap();
    let db = ::sled::open(dir.path()).unwrap();
    let raw = open_backend(backend, &db, &fresh_prefix()).await;
    let store = CronStore::with(raw.clone());
    let a = sample(&rig, "job-a").await;
    store.insert(&a, &JobState::default()).await.unwrap();
    // Two writers read the same version: the first swap lands, the second is refused.
    let (_, read) = raw.state(&a.id).await.unwrap().unwrap();
    let one = |failures| {
        serde_json::to_vec(&JobState {
            failures,
            ..JobState::default()
        })
        .unwrap()
    };
    assert!(raw.swap_state(&a.id, &read, one(1)).await.unwrap());
    assert!(!raw.swap_state(&a.id, &read, one(2)).await.unwrap());
    assert_eq!(store.state(&a.id).await.unwrap().unwrap().failures, 1);
    // `update_state` reads afresh, so it lands.
    let out = store
        .update_state(&a.id, |s| {
            let mut new = s.clone();
            new.failures += 1;
            let failures = new.failures;
            Some((new, failures))
        })
        .await
        .unwrap();
    assert_eq!(out, Some(2));
    // `None` from the change leaves the state as it is.
    let none: Option<()> = store.update_state(&a.id, |_| None).await.unwrap();
    assert_eq!(none, None);
    assert_eq!(store.state(&a.id).await.unwrap().unwrap().failures, 2);
    assert!(matches!(
        store
            .update_state(&JobId::parse("gone").unwrap(), |s| Some((s.clone(), ())))
            .await,
        Err(StoreError::UnknownJob(_))
    ));
}

async fn history_keeps_the_last_runs_in_order_and_goes_with_the_job(backend: &str) {
    if !available(backend, "history_keeps_the_last_runs") {
        return;
    }
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let dir = tempfile::tempdir().unwrap();
    let db = ::sled::open(dir.path()).unwrap();
    let store = open(backend, &db, &fresh_prefix()).await;
    let a = sample(&rig, "job-a").await;
    let b = sample(&rig, "job-ab").await;
    store.insert(&a, &JobState::default()).await.unwrap();
    store.insert(&b, &JobState::default()).await.unwrap();
    let keep = crate::cron::store::HISTORY_LEN as u64;
    for at in 0..keep + 3 {
        store.push_run(&run(&a.id, at)).await.unwrap();
    }
    store.push_run(&run(&b.id, 7)).await.unwrap();
    let at: Vec<u64> = store
        .runs(&a.id)
        .await
        .unwrap()
        .iter()
        .map(|r| r.scheduled_ms)
        .collect();
    assert_eq!(at, (3..keep + 3).collect::<Vec<_>>());
    assert!(store.remove(&a.id).await.unwrap());
    assert_eq!(store.job(&a.id).await.unwrap(), None);
    assert_eq!(store.state(&a.id).await.unwrap(), None);
    assert!(store.runs(&a.id).await.unwrap().is_empty());
    // A job whose id starts like another's keeps its history.
    assert_eq!(store.runs(&b.id).await.unwrap().len(), 1);
}

macro_rules! store_suite {
    ($($backend:ident),*) => {
        $(mod $backend {
            #[actix_rt::test]
            async fn records_round_trip() {
                super::records_round_trip(stringify!($backend)).await;
            }
            #[actix_rt::test]
            async fn a_swap_naming_a_stale_version_fails() {
                super::a_swap_naming_a_stale_version_fails(stringify!($backend)).await;
            }
            #[actix_rt::test]
            async fn history_keeps_the_last_runs_in_order_and_goes_with_the_job() {
                super::history_keeps_the_last_runs_in_order_and_goes_with_the_job(
                    stringify!($backend),
                )
                .await;
            }
        })*
    };
}

store_suite!(sled, kv, nats);

/// Three schedulers, each on its own connection to one JetStream bucket (three nodes), tick at
/// every second of a job that fires every second: each scheduled time runs once.
#[actix_rt::test]
async fn three_schedulers_on_nats_run_each_scheduled_time_once() {
    if NatsServer::shared_or_skip("three_schedulers_on_nats_run_each_scheduled_time_once").is_none()
    {
        return;
    }
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let t0 = ms("2026-01-05T08:00:00Z");
    let prefix = fresh_prefix();
    let mut nodes = Vec::new();
    for n in 0..3 {
        let store = CronStore::on_kv(nats_kv(&prefix).await);
        let bus: Arc<dyn bus::Bus> = rig.bus.clone();
        let settings = rig.settings().with_node(format!("node{n}"));
        let clock: Arc<dyn bus::Clock> = rig.clock.clone();
        nodes.push(Scheduler::with_store(
            store,
            bus,
            clock,
            format!("s{n}"),
            settings,
        ));
    }
    // Added on one node, seen by the others.
    let mut spec = every(1000, t0);
    spec.id = Some("every-second".into());
    let job = nodes[0].add(&spec).await.unwrap();
    for other in &nodes[1..] {
        assert_eq!(other.list().await.unwrap()[0].job.id, job.id);
    }
    let seconds = 30;
    let mut fired = 0;
    for _ in 0..seconds {
        rig.advance(Duration::from_secs(1));
        let (a, b, c) = tokio::join!(nodes[0].tick(), nodes[1].tick(), nodes[2].tick());
        for r in [&a, &b, &c] {
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            fired += r.fired.len();
        }
        for node in &nodes {
            assert!(node.wait_idle(BOUND).await);
        }
    }
    assert_eq!(fired, seconds, "one fire per scheduled time in the cluster");
    assert_eq!(
        rig.tasks_seen(),
        seconds,
        "each fire reached the agent once"
    );
    let runs = nodes[2].runs(&job.id).await.unwrap();
    let at: Vec<u64> = runs.iter().map(|r| r.scheduled_ms).collect();
    let want: Vec<u64> = (1..=seconds as u64).map(|k| t0 + k * 1000).collect();
    assert_eq!(at, want, "one run recorded per scheduled time, in order");
}
