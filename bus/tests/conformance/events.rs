//! Task events and request-id conflicts, for every backend.

use super::{Backend, NET, T0, echo_consumer, task, topic};
use bus::{
    Bus, BusError, ConflictReason, ManualClock, Outcome, RequestId, TaskEvent, TaskEventKind,
    TaskEventStream, TaskState,
};
use serde_json::json;
use std::time::Duration;

/// Reads a stream to its end (the terminal event), bounded by [`NET`].
async fn drain(mut events: TaskEventStream) -> Vec<TaskEvent> {
    let mut out = Vec::new();
    while let Some(ev) = tokio::time::timeout(NET, events.next()).await.unwrap() {
        out.push(ev);
    }
    out
}

fn kinds(events: &[TaskEvent]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e.event {
            TaskEventKind::Queued => "queued",
            TaskEventKind::Started { .. } => "started",
            TaskEventKind::ModelCall { .. } => "model_call",
            TaskEventKind::Delta { .. } => "delta",
            TaskEventKind::ToolStart { .. } => "tool_start",
            TaskEventKind::ToolEnd { .. } => "tool_end",
            TaskEventKind::Retry { .. } => "retry",
            TaskEventKind::Progress { .. } => "progress",
            TaskEventKind::Terminal { .. } => "terminal",
            _ => "other",
        })
        .collect()
}

fn assert_contiguous(events: &[TaskEvent]) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "seq runs from 1 without gaps");
    assert_eq!(
        events.iter().filter(|e| e.is_terminal()).count(),
        1,
        "exactly one terminal event"
    );
}

pub(crate) async fn events_of_a_task_come_in_order<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut by_topic = bus.subscribe(topic("events.agent.a")).await.unwrap();
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    let admitted = bus.submit(task("agent.a", "r-ev", "x")).await.unwrap();
    let task_id = admitted.task.task_id;
    let live = bus.task_events(task_id).await.unwrap();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    d.complete(Outcome::Succeeded {
        result: json!("ok"),
    })
    .await
    .unwrap();
    // A cancel after the end records nothing and emits nothing.
    bus.cancel(&RequestId::parse("r-ev").unwrap(), "late")
        .await
        .unwrap();
    let events = drain(live).await;
    assert_eq!(kinds(&events), ["queued", "started", "terminal"]);
    assert_contiguous(&events);
    assert!(
        events
            .iter()
            .all(|e| e.task_id == task_id && e.topic.as_str() == "agent.a")
    );
    assert_eq!(
        events[1].event,
        TaskEventKind::Started { attempt: 1 },
        "started carries the attempt"
    );
    // The same events on events.<work topic>.
    let mut on_topic = Vec::new();
    while on_topic.len() < 3 {
        let d = tokio::time::timeout(NET, by_topic.next())
            .await
            .unwrap()
            .unwrap();
        on_topic.push(TaskEvent::from_envelope(d.envelope()).unwrap());
    }
    assert_eq!(on_topic, events);
}

pub(crate) async fn a_late_subscriber_gets_the_replay<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    echo_consumer(&bus, "agent.a").await;
    let (record, _) = bus
        .request(task("agent.a", "r-late-sub", "x"), NET)
        .await
        .unwrap();
    let events = drain(bus.task_events(record.task_id).await.unwrap()).await;
    assert_eq!(kinds(&events), ["queued", "started", "terminal"]);
    assert_contiguous(&events);
    match &events[2].event {
        TaskEventKind::Terminal { outcome } => {
            assert_eq!(outcome.state(), TaskState::Succeeded)
        }
        e => panic!("expected the terminal event, got {e:?}"),
    }
    let unknown = bus.task_events(uuid::Uuid::now_v7()).await;
    assert!(matches!(unknown, Err(BusError::UnknownTask(_))));
}

pub(crate) async fn delivery_events_follow_the_terminal_one<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    echo_consumer(&bus, "agent.a").await;
    let (record, _) = bus
        .request(task("agent.a", "r-delivery", "x"), NET)
        .await
        .unwrap();
    // Late progress is dropped; what became of the reply is recorded after the outcome.
    bus.emit(record.task_id, TaskEventKind::Progress { note: json!(1) })
        .await
        .unwrap();
    let failed = TaskEventKind::DeliveryFailed {
        target: "telegram:42".into(),
        attempts: 3,
        reason: "HTTP 500".into(),
    };
    bus.emit(record.task_id, failed.clone()).await.unwrap();
    let events = drain(bus.task_events(record.task_id).await.unwrap()).await;
    assert_eq!(
        kinds(&events),
        ["queued", "started", "terminal", "other"],
        "the delivery event comes after the terminal one, and the replay reads it"
    );
    assert_eq!(events[3].event, failed);
    assert_eq!(events[3].seq, 4);
}

pub(crate) async fn emitted_events_come_between_start_and_end<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    let task_id = bus
        .submit(task("agent.a", "r-emit", "x"))
        .await
        .unwrap()
        .task
        .task_id;
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    let live = bus.task_events(task_id).await.unwrap();
    bus.emit(task_id, TaskEventKind::ModelCall { iteration: 1 })
        .await
        .unwrap();
    bus.emit(task_id, TaskEventKind::Delta { text: "he".into() })
        .await
        .unwrap();
    bus.emit(
        task_id,
        TaskEventKind::tool_start("c1", "web", r#"{"q":"tides"}"#),
    )
    .await
    .unwrap();
    bus.emit(
        task_id,
        TaskEventKind::ToolEnd {
            call_id: "c1".into(),
            name: "web".into(),
            ok: true,
        },
    )
    .await
    .unwrap();
    assert!(d.progress(json!({ "step": 2 })).await.unwrap());
    let refused = bus
        .emit(
            task_id,
            TaskEventKind::Terminal {
                outcome: Outcome::Failed { error: "x".into() },
            },
        )
        .await;
    assert!(matches!(refused, Err(BusError::Invalid(_))));
    d.complete(Outcome::Succeeded {
        result: json!("hello"),
    })
    .await
    .unwrap();
    // Late news of an ended task is dropped.
    bus.emit(task_id, TaskEventKind::Delta { text: "!".into() })
        .await
        .unwrap();
    let expected = [
        "queued",
        "started",
        "model_call",
        "delta",
        "tool_start",
        "tool_end",
        "progress",
        "terminal",
    ];
    let events = drain(live).await;
    assert_eq!(kinds(&events), expected);
    assert_contiguous(&events);
    assert_eq!(
        events[4].event,
        TaskEventKind::tool_start("c1", "web", r#"{"q":"tides"}"#),
        "the tool call's arguments travel with its start"
    );
    let replayed = drain(bus.task_events(task_id).await.unwrap()).await;
    assert_eq!(replayed, events, "the replay is what the live reader saw");
    let record = bus.task(task_id).await.unwrap().unwrap();
    assert_eq!(
        record.progress,
        Some(json!({ "step": 2 })),
        "the last progress mark stays on the record"
    );
}

pub(crate) async fn wait_is_answered_by_the_terminal_event<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-wait", "x")).await.unwrap();
    let rid = RequestId::parse("r-wait").unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let bus = bus.clone();
            let rid = rid.clone();
            actix_rt::spawn(async move { bus.wait(&rid, NET).await })
        })
        .collect();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    d.nack_because(Duration::ZERO, "model down").await.unwrap();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    d.complete(Outcome::Succeeded {
        result: json!("done"),
    })
    .await
    .unwrap();
    for w in waiters {
        let rec = tokio::time::timeout(NET, w)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(rec.result(), Some(&json!("done")));
    }
    let rec = bus.lookup(&rid).await.unwrap().unwrap();
    let events = drain(bus.task_events(rec.task_id).await.unwrap()).await;
    assert_eq!(
        kinds(&events),
        ["queued", "started", "retry", "started", "terminal"]
    );
    assert_contiguous(&events);
    assert_eq!(
        events[2].event,
        TaskEventKind::Retry {
            attempt: 2,
            delay_ms: 0,
            reason: "model down".into()
        },
        "the retry event gives the cause the consumer named"
    );
}

pub(crate) async fn cancel_emits_the_one_terminal_event<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let task_id = bus
        .submit(task("agent.nobody", "r-cx", "x"))
        .await
        .unwrap()
        .task
        .task_id;
    let rid = RequestId::parse("r-cx").unwrap();
    let live = bus.task_events(task_id).await.unwrap();
    let cancels = (0..3).map(|_| bus.cancel(&rid, "stop"));
    for c in futures::future::join_all(cancels).await {
        assert_eq!(c.unwrap().state, TaskState::Cancelled);
    }
    let events = drain(live).await;
    assert_eq!(kinds(&events), ["queued", "terminal"]);
    assert_contiguous(&events);
}

pub(crate) async fn reusing_a_request_id_for_other_work_is_a_conflict<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let first = bus.submit(task("agent.a", "r-reuse", "x")).await.unwrap();
    let dup = bus.submit(task("agent.a", "r-reuse", "x")).await.unwrap();
    assert!(dup.duplicate);
    match bus.submit(task("agent.b", "r-reuse", "x")).await {
        Err(BusError::Conflict {
            task_id,
            reason: ConflictReason::OtherTarget { original },
            ..
        }) => {
            assert_eq!(task_id, first.task.task_id);
            assert_eq!(original.as_str(), "agent.a");
        }
        other => panic!("expected a conflict over the target, got {other:?}"),
    }
    let other_payload = bus.submit(task("agent.a", "r-reuse", "y")).await;
    assert!(
        matches!(
            other_payload,
            Err(BusError::Conflict {
                reason: ConflictReason::OtherPayload,
                ..
            })
        ),
        "{other_payload:?}"
    );
    let request = bus.request(task("agent.a", "r-reuse", "z"), NET).await;
    assert!(matches!(request, Err(BusError::Conflict { .. })));
}

pub(crate) fn replay_after_a_restart_comes_from_the_store<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let (done, pending) = super::in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        echo_consumer(&bus, "agent.a").await;
        let (done, _) = bus
            .request(task("agent.a", "r-rs-done", "x"), NET)
            .await
            .unwrap();
        let pending = bus
            .submit(task("agent.b", "r-rs-pending", "x"))
            .await
            .unwrap();
        (done.task_id, pending.task.task_id)
    });
    let path = dir.path().to_path_buf();
    let (ended, resumed) = super::in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        let ended = drain(bus.task_events(done).await.unwrap()).await;
        let live = bus.task_events(pending).await.unwrap();
        echo_consumer(&bus, "agent.b").await;
        (ended, drain(live).await)
    });
    assert_eq!(kinds(&ended), ["queued", "terminal"]);
    assert_contiguous(&ended);
    assert_eq!(kinds(&resumed), ["queued", "started", "terminal"]);
    assert_contiguous(&resumed);
}
