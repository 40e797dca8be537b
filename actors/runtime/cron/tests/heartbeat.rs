//! Heartbeats: skipped without a task when HEARTBEAT.md is empty or outside active hours,
//! delivered when the reply is real text, not delivered on HEARTBEAT_OK, always an event.

use super::{Act, BOUND, Rig, tick};
use crate::cron::*;
use bus::{Envelope, Topic};
use std::time::Duration;

const HALF_HOUR: u64 = 30 * 60_000;

fn beat(hours: Option<(u16, u16)>) -> HeartbeatSpec {
    HeartbeatSpec {
        agent: "a".into(),
        every_ms: HALF_HOUR,
        active_hours: hours.map(|(start_min, end_min)| ActiveHours {
            start_min,
            end_min,
            tz: "Europe/Paris".into(),
        }),
        delivery: flat::announce("chat:alice"),
        enabled: true,
    }
}

fn declared(hb: HeartbeatSpec) -> Declared {
    Declared {
        jobs: vec![],
        heartbeats: vec![hb],
    }
}

fn write_heartbeat(rig: &Rig, text: &str) {
    let dir = rig.workspaces().join("a");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("HEARTBEAT.md"), text).unwrap();
}

#[actix_rt::test]
async fn an_empty_heartbeat_file_skips_the_beat_without_a_task() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler_with_workspaces("s1");
    let report = s.sync_declared(&declared(beat(None))).await;
    let id = heartbeat::job_id("a").unwrap();
    assert_eq!(report.added, std::slice::from_ref(&id));
    // Missing file, then headings and blank lines only: both skipped, no task submitted.
    rig.advance(Duration::from_millis(HALF_HOUR));
    assert!(tick(&s).await.fired.is_empty());
    write_heartbeat(&rig, "# Heartbeat\n\n## Checks\n   \n");
    rig.advance(Duration::from_millis(HALF_HOUR));
    let r = tick(&s).await;
    assert!(r.fired.is_empty());
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(rig.tasks_seen(), 0, "no task, so no model request");
    let runs = s.runs(&id).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.outcome == RunOutcome::Skipped));
    assert!(
        runs[1].error.as_deref().unwrap().contains("HEARTBEAT.md"),
        "{runs:?}"
    );
}

#[actix_rt::test]
async fn a_real_reply_is_delivered_and_heartbeat_ok_is_not() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler_with_workspaces("s1");
    s.sync_declared(&declared(beat(None))).await;
    let id = heartbeat::job_id("a").unwrap();
    write_heartbeat(&rig, "# Heartbeat\n- check the build\n");
    let out = Topic::parse("channel.chat.out").unwrap();
    let mut sub = rig.bus.subscribe(out.clone()).await.unwrap();
    let mut events = rig
        .bus
        .subscribe(Topic::parse(&format!("events.cron.{id}")).unwrap())
        .await
        .unwrap();
    rig.act(Act::Reply("The build is broken."));
    rig.act(Act::Reply("HEARTBEAT_OK nothing new"));
    rig.advance(Duration::from_millis(HALF_HOUR));
    let r = tick(&s).await;
    assert_eq!(r.fired.len(), 1);
    let scheduled = r.fired[0].scheduled_ms;
    assert_eq!(
        r.fired[0].request_id.as_str(),
        format!("heartbeat:a:{scheduled}")
    );
    let env = rig.seen.lock().unwrap()[0].clone();
    let origin = crate::origin::Origin::of(&env).unwrap();
    assert_eq!(origin.session_key.unwrap().as_str(), "agent:a:main");
    assert_eq!(origin.lane, "cron");
    let text = env.payload["text"].as_str().unwrap();
    assert!(text.contains("HEARTBEAT.md") && text.contains("- check the build"));
    let got = tokio::time::timeout(BOUND, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.envelope().payload["text"], "The build is broken.");
    assert_eq!(got.envelope().payload["to"], "alice");
    // The acknowledgement: not delivered (the next thing on the channel is our marker) …
    rig.advance(Duration::from_millis(HALF_HOUR));
    assert_eq!(tick(&s).await.fired.len(), 1);
    rig.bus
        .publish(Envelope::event(out, serde_json::json!("marker")))
        .await
        .unwrap();
    let got = tokio::time::timeout(BOUND, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.envelope().payload, serde_json::json!("marker"));
    // … but every reply is an event.
    let mut texts = vec![];
    while texts.len() < 2 {
        let d = tokio::time::timeout(BOUND, events.next())
            .await
            .unwrap()
            .unwrap();
        let e: CronEvent = serde_json::from_value(d.envelope().payload.clone()).unwrap();
        if e.kind == CronEventKind::Finished {
            texts.push(e.text.unwrap());
        }
    }
    assert_eq!(texts, ["The build is broken.", "HEARTBEAT_OK nothing new"]);
}

#[actix_rt::test]
async fn no_beat_outside_active_hours() {
    // 08:00Z is 09:00 in Paris; the window is 10:00-22:00 there.
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler_with_workspaces("s1");
    s.sync_declared(&declared(beat(Some((600, 1320))))).await;
    write_heartbeat(&rig, "- check the build\n");
    rig.advance(Duration::from_millis(HALF_HOUR));
    let r = tick(&s).await;
    assert!(r.fired.is_empty(), "09:30 in Paris is outside 10:00-22:00");
    assert_eq!(rig.tasks_seen(), 0);
    let runs = s.runs(&heartbeat::job_id("a").unwrap()).await.unwrap();
    assert_eq!(runs[0].error.as_deref(), Some("outside active hours"));
    rig.advance(Duration::from_millis(HALF_HOUR));
    assert_eq!(tick(&s).await.fired.len(), 1, "10:00 in Paris is inside");
    assert_eq!(rig.tasks_seen(), 1);
}
