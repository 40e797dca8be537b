//! Firing: the task and its origin, events, missed fires, backoff, announce, one-shot jobs.

use super::{Act, BOUND, Rig, every, ms, outcomes, spec, tick};
use crate::cron::*;
use crate::origin::Origin;
use bus::{Envelope, Topic};
use std::time::Duration;

const MIN: u64 = 60_000;

#[actix_rt::test]
async fn a_due_job_fires_once_on_the_cron_lane_with_its_origin_and_events() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let t0 = ms("2026-01-05T08:00:00Z");
    let job = s.add(&every(MIN, t0)).await.unwrap();
    let mut events = rig
        .bus
        .subscribe(Topic::parse(&format!("events.cron.{}", job.id)).unwrap())
        .await
        .unwrap();
    assert!(tick(&s).await.fired.is_empty(), "not due yet");
    rig.advance(Duration::from_millis(MIN));
    let r = tick(&s).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(
        r.fired[0].request_id.as_str(),
        format!("cron:{}:{}", job.id, t0 + MIN)
    );
    let r = tick(&s).await;
    assert!(r.fired.is_empty(), "a fire runs once");
    assert_eq!(r.next_wake_ms, Some(t0 + 2 * MIN));
    let env = rig.seen.lock().unwrap()[0].clone();
    let origin = Origin::of(&env).unwrap();
    assert_eq!(origin.lane, "cron");
    assert_eq!(origin.channel, "cron");
    assert_eq!(
        origin.session_key.unwrap().as_str(),
        format!("agent:a:cron:{}:{}", job.id, t0 + MIN)
    );
    assert_eq!(env.payload, serde_json::json!({ "text": "ping" }));
    let mut kinds = vec![];
    for _ in 0..2 {
        let d = tokio::time::timeout(BOUND, events.next())
            .await
            .unwrap()
            .unwrap();
        let e: CronEvent = serde_json::from_value(d.envelope().payload.clone()).unwrap();
        kinds.push(e.kind);
    }
    assert_eq!(kinds, [CronEventKind::Fired, CronEventKind::Finished]);
    assert_eq!(outcomes(&s, &job.id).await, [RunOutcome::Succeeded]);
}

#[actix_rt::test]
async fn main_session_and_system_events() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let mut sp = every(MIN, ms("2026-01-05T08:00:00Z"));
    sp.session = SessionTarget::Main;
    sp.payload.kind = PayloadKind::SystemEvent;
    s.add(&sp).await.unwrap();
    rig.advance(Duration::from_millis(MIN));
    tick(&s).await;
    let env = rig.seen.lock().unwrap()[0].clone();
    let origin = Origin::of(&env).unwrap();
    assert_eq!(origin.session_key.unwrap().as_str(), "agent:a:main");
    assert_eq!(env.payload["text"], "[system event] ping");
}

#[actix_rt::test]
async fn restart_after_three_missed_fires_runs_the_latest_or_none() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let t0 = ms("2026-01-05T08:00:00Z");
    let hour = 60 * MIN;
    let (latest, none) = {
        let s = rig.scheduler("before");
        let latest = s.add(&every(hour, t0)).await.unwrap();
        let mut sp = every(hour, t0);
        sp.catch_up = CatchUp::None;
        let none = s.add(&sp).await.unwrap();
        (latest, none)
    };
    // Down for 3.5 hours: the fires at +1h, +2h, +3h are missed.
    rig.advance(Duration::from_millis(3 * hour + hour / 2));
    let s = rig.scheduler("after");
    let r = tick(&s).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(r.fired[0].job_id, latest.id);
    assert_eq!(r.fired[0].scheduled_ms, t0 + 3 * hour);
    use RunOutcome::*;
    assert_eq!(
        outcomes(&s, &latest.id).await,
        [Skipped, Skipped, Succeeded]
    );
    assert_eq!(outcomes(&s, &none.id).await, [Skipped, Skipped, Skipped]);
    assert_eq!(rig.tasks_seen(), 1);
    // Both go on with the next fire.
    rig.advance(Duration::from_millis(hour / 2));
    assert_eq!(tick(&s).await.fired.len(), 2);
}

#[actix_rt::test]
async fn failures_back_off_30s_1m_5m_then_a_success_resets() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let t0 = ms("2026-01-05T08:00:00Z");
    let job = s.add(&every(1000, t0)).await.unwrap();
    let mut now = t0;
    for want in [30_000, 60_000, 300_000, 900_000, 3_600_000, 3_600_000] {
        rig.act(Act::Fail);
        let next = s.list().await.unwrap()[0].state.next_fire_ms.unwrap();
        rig.advance(Duration::from_millis(next - now));
        now = next;
        assert_eq!(tick(&s).await.fired.len(), 1);
        let st = s.list().await.unwrap()[0].state.clone();
        assert_eq!(st.backoff_until_ms, Some(now + want));
        assert_eq!(
            st.next_fire_ms,
            Some(now + want),
            "the next attempt waits the backoff"
        );
        // Nothing fires during the backoff.
        rig.advance(Duration::from_millis(want - 1));
        assert!(tick(&s).await.fired.is_empty());
        rig.advance(Duration::from_millis(1));
        now += want;
        let next = s.list().await.unwrap()[0].state.next_fire_ms.unwrap();
        assert_eq!(next, now);
    }
    // A success resets the failures: the next fire is one period later.
    assert_eq!(tick(&s).await.fired.len(), 1);
    let st = s.list().await.unwrap()[0].state.clone();
    assert_eq!((st.failures, st.backoff_until_ms), (0, None));
    assert_eq!(st.next_fire_ms, Some(now + 1000));
    assert_eq!(st.last_outcome, Some(RunOutcome::Succeeded));
    assert_eq!(outcomes(&s, &job.id).await.len(), 7);
}

#[actix_rt::test]
async fn announce_publishes_the_reply_and_never_no_reply() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let mut sp = every(MIN, ms("2026-01-05T08:00:00Z"));
    sp.delivery = Delivery {
        mode: DeliveryMode::Announce,
        channel: Some("x".into()),
        to: Some("alice".into()),
    };
    let job = s.add(&sp).await.unwrap();
    let out = Topic::parse("channel.x.out").unwrap();
    let mut sub = rig.bus.subscribe(out.clone()).await.unwrap();
    rig.act(Act::Reply("hello"));
    rig.act(Act::Reply("NO_REPLY"));
    rig.advance(Duration::from_millis(MIN));
    tick(&s).await;
    let got = tokio::time::timeout(BOUND, sub.next())
        .await
        .unwrap()
        .unwrap();
    let mut payload = got.envelope().payload.clone();
    let task_id = payload
        .as_object_mut()
        .and_then(|p| p.remove("task_id"))
        .unwrap();
    assert_eq!(
        payload,
        serde_json::json!({ "to": "alice", "text": "hello", "job": job.id })
    );
    assert!(
        task_id
            .as_str()
            .is_some_and(|t| uuid::Uuid::parse_str(t).is_ok()),
        "the run's task, whose events record the delivery: {task_id}"
    );
    rig.advance(Duration::from_millis(MIN));
    tick(&s).await;
    // The NO_REPLY run is over; the next thing on the channel is our marker.
    rig.bus
        .publish(Envelope::event(out, serde_json::json!("marker")))
        .await
        .unwrap();
    let got = tokio::time::timeout(BOUND, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.envelope().payload, serde_json::json!("marker"));
}

#[actix_rt::test]
async fn one_shot_jobs_run_once_then_are_disabled_or_deleted() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let at = ScheduleSpec::At {
        at: "2026-01-05T09:30:00+01:00".into(),
    };
    let kept = s.add(&spec(at.clone())).await.unwrap();
    let mut sp = spec(at);
    sp.delete_after_run = true;
    let gone = s.add(&sp).await.unwrap();
    // Missed while down by a day: still runs once.
    rig.advance(Duration::from_secs(86_400));
    assert_eq!(tick(&s).await.fired.len(), 2);
    assert!(tick(&s).await.fired.is_empty());
    let list = s.list().await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].job.id, kept.id);
    assert!(!list[0].job.enabled);
    assert_eq!(list[0].state.next_fire_ms, None);
    assert_eq!(outcomes(&s, &kept.id).await, [RunOutcome::Succeeded]);
    assert!(s.runs(&gone.id).await.is_err());
}

#[actix_rt::test]
async fn run_now_fires_out_of_schedule_on_the_cron_lane() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let job = s
        .add(&every(60 * MIN, ms("2026-01-05T08:00:00Z")))
        .await
        .unwrap();
    let before = s.list().await.unwrap()[0].state.next_fire_ms;
    let fired = s.run_now(&job.id).await.unwrap();
    assert!(s.wait_idle(BOUND).await);
    assert_eq!(
        fired.request_id.as_str(),
        format!("cron:{}:{}", job.id, rig.clock_now())
    );
    assert_eq!(
        Origin::of(&rig.seen.lock().unwrap()[0]).unwrap().lane,
        "cron"
    );
    assert_eq!(s.list().await.unwrap()[0].state.next_fire_ms, before);
    assert_eq!(outcomes(&s, &job.id).await, [RunOutcome::Succeeded]);
}
