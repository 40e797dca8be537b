//! Leases: two schedulers over one store, and a scheduler that dies mid-run.

use super::{Act, BOUND, Rig, every, ms, outcomes, tick};
use crate::cron::*;
use std::time::Duration;

#[actix_rt::test]
async fn two_schedulers_fire_each_job_exactly_once_per_scheduled_time() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (a, b) = (rig.scheduler("a"), rig.scheduler("b"));
    let t0 = ms("2026-01-05T08:00:00Z");
    let mut jobs: Vec<JobId> = Vec::new();
    for _ in 0..5 {
        jobs.push(a.add(&every(10_000, t0)).await.unwrap().id);
    }
    let mut fired = 0;
    for _ in 0..10 {
        rig.advance(Duration::from_secs(10));
        let (ra, rb) = tokio::join!(a.tick(), b.tick());
        fired += ra.fired.len() + rb.fired.len();
        assert!(a.wait_idle(BOUND).await && b.wait_idle(BOUND).await);
    }
    assert_eq!(fired, 50);
    assert_eq!(rig.tasks_seen(), 50, "each fire reached the agent once");
    for id in &jobs {
        let runs = a.runs(id).await.unwrap();
        let mut at: Vec<u64> = runs.iter().map(|r| r.scheduled_ms).collect();
        at.dedup();
        assert_eq!(at.len(), 10);
        assert!(runs.iter().all(|r| r.outcome == RunOutcome::Succeeded));
    }
}

#[actix_rt::test]
async fn a_crash_mid_run_leaves_a_lease_that_expires_and_the_next_fire_happens() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let t0 = ms("2026-01-05T08:00:00Z");
    let min = 60_000;
    let id = {
        let a = rig.scheduler("a");
        let id = a.add(&every(min, t0)).await.unwrap().id;
        rig.act(Act::Hold);
        rig.advance(Duration::from_millis(min));
        assert_eq!(a.tick().await.fired.len(), 1);
        assert!(a.list().await.unwrap()[0].state.is_running(t0 + min));
        id
        // `a` is dropped here mid-run, without releasing its lease.
    };
    let b = rig.scheduler("b");
    // The lease (5 min) still holds at the next scheduled time: nothing runs twice.
    rig.advance(Duration::from_millis(min));
    let r = tick(&b).await;
    assert!(r.fired.is_empty() && r.reclaimed.is_empty());
    // Once it has expired, the job is free again and its next fire happens.
    rig.advance(Duration::from_millis(4 * min));
    let r = tick(&b).await;
    assert_eq!(r.reclaimed, std::slice::from_ref(&id));
    assert_eq!(r.fired.len(), 1);
    assert_eq!(r.fired[0].scheduled_ms, t0 + 6 * min);
    let state = b.list().await.unwrap()[0].state.clone();
    assert_eq!(state.lease, None);
    assert_eq!(state.last_outcome, Some(RunOutcome::Succeeded));
    // The abandoned run is in the history, then the skipped fires, then the new one.
    let o = outcomes(&b, &id).await;
    assert_eq!(o.first(), Some(&RunOutcome::Failed));
    assert_eq!(o.last(), Some(&RunOutcome::Succeeded));
}

#[actix_rt::test]
async fn the_started_loop_fires_when_woken_and_stops() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let bus: std::sync::Arc<dyn bus::Bus> = rig.bus.clone();
    let h = Scheduler::start(&rig.db, bus, rig.clock.clone(), "loop", rig.settings()).unwrap();
    let t0 = ms("2026-01-05T08:00:00Z");
    let job = h.add(&every(60_000, t0)).await.unwrap();
    let mut events = bus::Bus::subscribe(
        &*rig.bus,
        bus::Topic::parse(&format!("events.cron.{}", job.id)).unwrap(),
    )
    .await
    .unwrap();
    // The job is due on the manual clock; any change to the jobs wakes the loop at once.
    rig.advance(Duration::from_secs(60));
    h.disable(&h.add(&every(3_600_000, t0)).await.unwrap().id)
        .await
        .unwrap();
    let d = tokio::time::timeout(BOUND, events.next())
        .await
        .unwrap()
        .unwrap();
    let e: CronEvent = serde_json::from_value(d.envelope().payload.clone()).unwrap();
    assert_eq!(
        (e.kind, e.scheduled_ms),
        (CronEventKind::Fired, t0 + 60_000)
    );
    assert!(h.scheduler().wait_idle(BOUND).await);
    assert_eq!(h.runs(&job.id).await.unwrap().len(), 1);
    assert_eq!(h.list().await.unwrap().len(), 2);
    tokio::time::timeout(BOUND, h.stop()).await.unwrap();
}
