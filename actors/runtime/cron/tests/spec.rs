//! Bad input: each a clear error naming the field, nothing stored.

use super::{Rig, every, spec};
use crate::cron::{CronError, ScheduleSpec, SpecError};

#[actix_rt::test]
async fn bad_input_is_refused_with_a_clear_error_and_stores_nothing() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let cron = |expr: &str, tz: Option<&str>| {
        spec(ScheduleSpec::Cron {
            expr: expr.into(),
            tz: tz.map(str::to_string),
        })
    };
    let err = async |spec: crate::cron::JobSpec| match s.add(&spec).await {
        Err(CronError::Spec(e)) => e,
        other => panic!("expected a spec error, got {other:?}"),
    };
    let e = err(cron("0 25 * * *", None)).await;
    assert!(matches!(e, SpecError::InvalidExpression { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("schedule.expr: invalid cron expression \"0 25 * * *\""),
        "{e}"
    );
    let e = err(cron("0 9 * *", None)).await;
    assert!(e.to_string().contains("got 4"), "{e}");
    let e = err(cron("0 9 * * *", Some("Mars/Olympus"))).await;
    assert_eq!(e, SpecError::UnknownTimezone("Mars/Olympus".into()));
    assert!(e.to_string().starts_with("schedule.tz:"), "{e}");
    let e = err(spec(ScheduleSpec::At {
        at: "2026-01-05T07:59:00Z".into(),
    }))
    .await;
    assert!(matches!(e, SpecError::AtInPast(_)), "{e}");
    let e = err(spec(ScheduleSpec::At {
        at: "tomorrow".into(),
    }))
    .await;
    assert!(matches!(e, SpecError::InvalidAt { .. }), "{e}");
    let mut bad_agent = every(1000, 0);
    bad_agent.agent = "nobody".into();
    let e = err(bad_agent).await;
    assert_eq!(e.to_string(), "agent: unknown agent \"nobody\" (known: a)");
    assert_eq!(err(every(0, 0)).await, SpecError::ZeroInterval);
    let mut empty = every(1000, 0);
    empty.payload.message = "  ".into();
    assert_eq!(err(empty).await, SpecError::EmptyMessage);
    assert!(s.list().await.unwrap().is_empty(), "nothing may be stored");

    // An update with bad input leaves the job as it was.
    let job = s.add(&every(60_000, 0)).await.unwrap();
    assert!(s.update(&job.id, &cron("nope", None)).await.is_err());
    assert_eq!(s.list().await.unwrap()[0].job, job);
}

#[actix_rt::test]
async fn the_default_timezone_is_the_gateways_never_utc() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let job = s
        .add(&spec(ScheduleSpec::Cron {
            expr: "0 9 * * *".into(),
            tz: None,
        }))
        .await
        .unwrap();
    let view = &s.list().await.unwrap()[0];
    assert_eq!(
        job.schedule,
        crate::cron::Schedule::Cron {
            expr: "0 9 * * *".into(),
            tz: "Europe/Paris".into()
        }
    );
    // 09:00 in Paris (UTC+1) is 08:00 UTC: today's has just come; the next is tomorrow's.
    assert_eq!(
        view.state.next_fire_ms,
        Some(super::ms("2026-01-06T08:00:00Z"))
    );
    // The stored shape is OpenClaw's.
    let json = serde_json::to_value(&job).unwrap();
    assert_eq!(json["schedule"]["kind"], "cron");
    assert_eq!(json["payload"]["kind"], "agentTurn");
    assert_eq!(json["session"], "isolated");
    assert_eq!(json["delivery"]["mode"], "none");
}
