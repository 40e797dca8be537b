//! Leases found on start: a previous life's fire is taken over and its lease let go as soon as
//! the fire ends (never after the TTL); another node's ended fire is released; `list` never shows
//! a next fire in the past.

use super::{Act, BOUND, Rig, every, ms, outcomes};
use crate::cron::recover::{Found, decide};
use crate::cron::*;
use bus::Outcome;
use std::time::Duration;

const MIN: u64 = 60_000;

fn done() -> Outcome {
    Outcome::Succeeded {
        result: serde_json::json!({ "text": "done" }),
    }
}

fn lease(owner: &str, node: Option<&str>, task: bool) -> Lease {
    Lease {
        owner: owner.into(),
        node: node.map(str::to_string),
        until_ms: 0,
        scheduled_ms: 0,
        task_id: task.then(uuid::Uuid::now_v7),
        manual: false,
    }
}

#[test]
fn the_rule_for_a_lease_found_on_start() {
    let n = Some("n1");
    let l = lease("life1", n, true);
    let task = l.task_id.unwrap();
    // Ours: kept. Our previous life: its fire in flight taken over, an unsubmitted one released.
    assert_eq!(decide("life1", n, &l, false), Found::Keep);
    assert_eq!(decide("life2", n, &l, false), Found::Adopt(task));
    assert_eq!(decide("life2", n, &l, true), Found::Adopt(task));
    let unsubmitted = lease("life1", n, false);
    assert_eq!(decide("life2", n, &unsubmitted, false), Found::Release);
    // Another node's: released once its fire has ended, else left to it.
    assert_eq!(decide("x", Some("n2"), &l, true), Found::Release);
    assert_eq!(decide("x", Some("n2"), &l, false), Found::Keep);
    assert_eq!(decide("x", Some("n2"), &unsubmitted, false), Found::Keep);
    // A scheduler without a node recognises no previous life.
    assert_eq!(
        decide("x", None, &lease("y", None, true), false),
        Found::Keep
    );
}

/// A job every minute whose first fire is held by the scheduler `life1` of node `n1`, which then
/// dies (is dropped) mid-run.
async fn crashed_mid_run(rig: &Rig) -> (JobId, u64) {
    let t0 = ms("2026-01-05T08:00:00Z");
    let a = rig.scheduler_on("life1", "n1");
    let id = a.add(&every(MIN, t0)).await.unwrap().id;
    rig.act(Act::Hold);
    rig.advance(Duration::from_millis(MIN));
    assert_eq!(a.tick().await.fired.len(), 1);
    (id, t0)
}

#[actix_rt::test]
async fn a_previous_life_fire_still_running_is_taken_over_and_released_when_it_ends() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (id, t0) = crashed_mid_run(&rig).await;
    rig.advance(Duration::from_secs(5));
    let b = rig.scheduler_on("life2", "n1");
    let r = b.recover().await;
    assert_eq!(r.adopted, std::slice::from_ref(&id));
    let view = b.list().await.unwrap().remove(0);
    assert_eq!(
        view.state.lease.as_ref().map(|l| l.owner.as_str()),
        Some("life2")
    );
    assert!(view.state.next_fire_ms >= Some(rig.clock_now()));
    // The fire's task ends (the bus ran it again after the restart): recorded, lease let go,
    // long before the 5-minute TTL.
    rig.complete_held(done()).await;
    assert!(b.wait_idle(BOUND).await);
    let state = b.list().await.unwrap().remove(0).state;
    assert_eq!(state.lease, None);
    assert_eq!(outcomes(&b, &id).await, [RunOutcome::Succeeded]);
    assert_eq!(b.runs(&id).await.unwrap()[0].scheduled_ms, t0 + MIN);
    // The next fire comes on time.
    rig.advance(Duration::from_millis(MIN - 5_000));
    let r = super::tick(&b).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(r.fired[0].scheduled_ms, t0 + 2 * MIN);
    assert!(r.skipped.is_empty());
}

#[actix_rt::test]
async fn a_previous_life_fire_that_ended_is_recorded_and_released_at_once() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (id, t0) = crashed_mid_run(&rig).await;
    // The task ends while no scheduler runs (the dropped one recorded nothing).
    rig.complete_held(done()).await;
    rig.advance(Duration::from_secs(90));
    let b = rig.scheduler_on("life2", "n1");
    assert_eq!(b.recover().await.adopted, std::slice::from_ref(&id));
    assert!(b.wait_idle(BOUND).await);
    assert_eq!(b.list().await.unwrap()[0].state.lease, None);
    assert_eq!(outcomes(&b, &id).await, [RunOutcome::Succeeded]);
    // The fire missed while down (+2 min, within the grace) runs at once: no wait for a lease.
    let r = super::tick(&b).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(r.fired[0].scheduled_ms, t0 + 2 * MIN);
    assert!(r.skipped.is_empty());
}

#[actix_rt::test]
async fn a_previous_life_lease_never_submitted_is_released_and_the_fire_runs() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let t0 = ms("2026-01-05T08:00:00Z");
    let b = rig.scheduler_on("life2", "n1");
    let id = b.add(&every(MIN, t0)).await.unwrap().id;
    rig.advance(Duration::from_millis(MIN));
    let mut held = lease("life1", Some("n1"), false);
    held.scheduled_ms = t0 + MIN;
    held.until_ms = rig.clock_now() + 300_000;
    b.store()
        .update_state(&id, |s| {
            let mut new = s.clone();
            new.lease = Some(held.clone());
            Some((new, ()))
        })
        .await
        .unwrap();
    let r = b.recover().await;
    assert_eq!(r.reclaimed, std::slice::from_ref(&id));
    let r = super::tick(&b).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(
        r.fired[0].scheduled_ms,
        t0 + MIN,
        "the same fire, same request id"
    );
}

#[actix_rt::test]
async fn another_nodes_lease_is_released_only_once_its_fire_has_ended() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (id, _) = crashed_mid_run(&rig).await;
    let other = rig.scheduler_on("x", "n2");
    let r = other.recover().await;
    assert!(
        r.adopted.is_empty() && r.reclaimed.is_empty(),
        "still running: kept"
    );
    assert!(other.list().await.unwrap()[0].state.lease.is_some());
    rig.complete_held(done()).await;
    let r = other.recover().await;
    assert_eq!(r.reclaimed, std::slice::from_ref(&id));
    assert_eq!(other.list().await.unwrap()[0].state.lease, None);
    assert_eq!(outcomes(&other, &id).await, [RunOutcome::Succeeded]);
}

#[actix_rt::test]
async fn list_never_shows_a_next_fire_in_the_past() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let t0 = ms("2026-01-05T08:00:00Z");
    let (running, due, none) = {
        let s = rig.scheduler("before");
        let running = s.add(&every(MIN, t0)).await.unwrap().id;
        rig.act(Act::Hold);
        let due = s.add(&every(60 * MIN, t0)).await.unwrap().id;
        let mut sp = every(60 * MIN, t0);
        sp.catch_up = CatchUp::None;
        let none = s.add(&sp).await.unwrap().id;
        rig.advance(Duration::from_millis(MIN));
        assert_eq!(s.tick().await.fired.len(), 1);
        (running, due, none)
    };
    // Down for 2.5 hours: the running job's lease has lapsed but no tick has run yet.
    rig.advance(Duration::from_millis(150 * MIN));
    let s = rig.scheduler("after");
    let now = rig.clock_now();
    let next = async |id: &JobId| {
        let views = s.list().await.unwrap();
        let view = views.iter().find(|v| &v.job.id == id).unwrap();
        view.state.next_fire_ms.unwrap()
    };
    assert_eq!(next(&due).await, now, "due now: runs at once");
    assert_eq!(next(&running).await, now, "its lease lapsed: runs at once");
    assert_eq!(
        next(&none).await,
        t0 + 180 * MIN,
        "missed and not caught up: the next slot"
    );
    let views = s.list().await.unwrap();
    assert!(views.iter().all(|v| v.state.next_fire_ms >= Some(now)));
}
