//! The conformance suite against the embedded backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod conformance;

use bus::{LocalBus, LocalOptions, ManualClock};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

struct Local;

impl conformance::Backend for Local {
    type Bus = LocalBus;
    #[allow(
        clippy::disallowed_methods,
        reason = "sled lets go of its file lock in real time: the wait for it is bounded in real time"
    )]
    async fn open(dir: &Path, clock: Arc<ManualClock>, window: Duration) -> LocalBus {
        let opts = LocalOptions {
            dedup_window: window,
            max_attempts: 3,
            clock,
            ..LocalOptions::default()
        };
        // A "restart" opens the database right after the previous life dropped it; sled lets go
        // of its file lock from a background thread, so wait for that (bounded).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match LocalBus::open(dir, opts.clone()) {
                Ok(bus) => return bus,
                Err(e)
                    if std::time::Instant::now() < deadline && e.to_string().contains("lock") =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("the bus must open: {e}"),
            }
        }
    }
}

conformance_suite!(Local);

fn rid(s: &str) -> bus::RequestId {
    bus::RequestId::parse(s).unwrap()
}

fn task(topic: &str, request_id: &str) -> bus::Envelope {
    bus::Envelope::task(
        bus::Topic::parse(topic).unwrap(),
        rid(request_id),
        serde_json::json!({ "text": request_id }),
    )
}

fn options(clock: Arc<ManualClock>) -> LocalOptions {
    LocalOptions {
        dedup_window: Duration::from_secs(60),
        max_attempts: 3,
        clock,
        ..LocalOptions::default()
    }
}

/// A bus in `dir` on the manual clock, and a consumer of `topic` on it.
async fn consuming(dir: &Path, topic: &str) -> (LocalBus, bus::Subscription) {
    use bus::Bus as _;
    let bus = LocalBus::open(dir, options(ManualClock::new(conformance::T0))).unwrap();
    let sub = bus
        .consume(bus::Topic::parse(topic).unwrap())
        .await
        .unwrap();
    (bus, sub)
}

#[actix_rt::test]
async fn waits_answer_finished_unknown_and_stuck_tasks() {
    use bus::Bus as _;
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), options(ManualClock::new(conformance::T0))).unwrap();
    conformance::echo_consumer(&bus, "agent.a").await;
    for i in 0..5 {
        let r = format!("r-w{i}");
        bus.request(task("agent.a", &r), conformance::NET)
            .await
            .unwrap();
        // Waiting again on the finished task answers at once.
        bus.wait(&rid(&r), conformance::NET).await.unwrap();
    }
    assert!(bus.wait(&rid("r-unknown"), conformance::NET).await.is_err());
    bus.submit(task("agent.nobody", "r-stuck")).await.unwrap();
    let waited = bus.wait(&rid("r-stuck"), Duration::from_millis(1)).await;
    assert!(matches!(waited, Err(bus::BusError::TimedOut { .. })));
}

#[actix_rt::test]
async fn an_outcome_recorded_on_the_store_directly_ends_the_tasks_events_and_its_wait() {
    use bus::{Bus as _, TaskStore as _};
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(conformance::T0);
    let window = Duration::from_secs(60);
    let store = Arc::new(bus::SledTaskStore::open(dir.path(), clock.clone(), window).unwrap());
    let bus = LocalBus::with_store(store.clone(), options(clock));
    let admitted = bus.submit(task("agent.nobody", "r-direct")).await.unwrap();
    // Past the bus: its event log never hears of this outcome.
    let result = serde_json::json!("set aside");
    store
        .complete(&rid("r-direct"), bus::Outcome::Succeeded { result })
        .await
        .unwrap();
    let mut events = bus.task_events(admitted.task.task_id).await.unwrap();
    let mut kinds = Vec::new();
    while let Some(ev) = events.next().await {
        kinds.push(ev.event);
    }
    assert!(matches!(
        kinds.as_slice(),
        [
            bus::TaskEventKind::Queued,
            bus::TaskEventKind::Terminal { .. }
        ]
    ));
    let waited = bus.wait(&rid("r-direct"), conformance::NET).await.unwrap();
    assert_eq!(waited.state, bus::TaskState::Succeeded);
}

#[actix_rt::test]
async fn expired_records_are_purged_while_the_bus_runs() {
    use bus::Bus as _;
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    let clock = ManualClock::new(conformance::T0);
    let bus = LocalBus::with_db(db.clone(), options(clock.clone())).unwrap();
    conformance::echo_consumer(&bus, "agent.a").await;
    bus.request(task("agent.a", "r-old"), conformance::NET)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(61));
    bus.request(task("agent.a", "r-new"), conformance::NET)
        .await
        .unwrap();
    assert_eq!(
        db.open_tree("bus.task_records.2").unwrap().len(),
        1,
        "the expired record is purged without a restart"
    );
    assert_eq!(db.open_tree("bus.task_ids").unwrap().len(), 0);
}

#[actix_rt::test]
async fn waiting_on_an_admission_answers_as_waiting_on_its_request_id() {
    use bus::Bus as _;
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), options(ManualClock::new(conformance::T0))).unwrap();
    // Admitted before any consumer: it waits queued until one comes.
    let admitted = bus.submit(task("agent.a", "r-adm")).await.unwrap().task;
    assert_eq!(admitted.state, bus::TaskState::Queued);
    let (b, a) = (bus.clone(), admitted.clone());
    let waiting = actix_rt::spawn(async move { b.wait_admitted(&a, conformance::NET).await });
    conformance::echo_consumer(&bus, "agent.a").await;
    let ended = waiting.await.unwrap().unwrap();
    assert_eq!(ended.state, bus::TaskState::Succeeded);
    assert_eq!(ended.task_id, admitted.task_id);
    // Once ended, the same answer at once, as `wait` gives.
    let again = bus
        .wait_admitted(&admitted, conformance::NET)
        .await
        .unwrap();
    let by_id = bus.wait(&rid("r-adm"), conformance::NET).await.unwrap();
    assert_eq!(again, by_id);
}

#[actix_rt::test]
async fn a_new_task_does_not_overtake_parked_ones() {
    use bus::Bus as _;
    let dir = tempfile::tempdir().unwrap();
    let (bus, mut sub) = consuming(dir.path(), "agent.a").await;
    // Fill the consumer's queue; the last one has to wait in the broker.
    let n = bus::local::SUBSCRIBER_BUFFER + 1;
    let names: Vec<String> = (0..n).map(|i| format!("r-p{i}")).collect();
    for r in futures::future::join_all(names.iter().map(|r| bus.submit(task("agent.a", r)))).await {
        r.unwrap();
    }
    let mut held = vec![sub.next().await.unwrap()];
    // A slot is free again; a task posted now must still queue behind the parked one.
    bus.submit(task("agent.a", "r-late")).await.unwrap();
    for _ in 0..n {
        held.push(
            tokio::time::timeout(conformance::NET, sub.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(
        held.last().unwrap().envelope().request_id.as_str(),
        "r-late",
        "the task posted last is delivered last"
    );
    let done = held.iter().map(|d| {
        d.complete(bus::Outcome::Failed {
            error: "test".into(),
        })
    });
    for r in futures::future::join_all(done).await {
        r.unwrap();
    }
}

#[actix_rt::test]
async fn exact_and_wildcard_subscribers_both_hear_a_topic_and_unsubscribe_cleanly() {
    use bus::Bus as _;
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), options(ManualClock::new(conformance::T0))).unwrap();
    let topic = bus::Topic::parse("events.task.x").unwrap();
    let mut exact_a = bus.subscribe(topic.clone()).await.unwrap();
    let exact_b = bus.subscribe(topic.clone()).await.unwrap();
    let mut wild = bus
        .subscribe(bus::Topic::parse("events.>").unwrap())
        .await
        .unwrap();
    bus.publish(bus::Envelope::event(topic.clone(), serde_json::json!(1)))
        .await
        .unwrap();
    for sub in [&mut exact_a, &mut wild] {
        let d = tokio::time::timeout(conformance::NET, sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.envelope().payload, serde_json::json!(1));
    }
    // One exact subscriber leaves; the other and the wildcard one still hear the topic.
    drop(exact_b);
    bus.publish(bus::Envelope::event(topic.clone(), serde_json::json!(2)))
        .await
        .unwrap();
    for sub in [&mut exact_a, &mut wild] {
        let d = tokio::time::timeout(conformance::NET, sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.envelope().payload, serde_json::json!(2));
    }
    // Another concrete topic reaches the wildcard subscriber only.
    let other = bus::Topic::parse("events.task.y").unwrap();
    bus.publish(bus::Envelope::event(other, serde_json::json!(3)))
        .await
        .unwrap();
    let d = tokio::time::timeout(conformance::NET, wild.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.envelope().payload, serde_json::json!(3));
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), exact_a.next())
            .await
            .is_err(),
        "the exact subscriber of events.task.x hears nothing of events.task.y"
    );
}

/// A reader of a task's events that lags (more events than its queue holds, the end among those
/// dropped for it) still gets every event, the end last, and its stream ends.
#[actix_rt::test]
async fn a_lagging_reader_of_a_tasks_events_still_gets_the_end() {
    use bus::{Bus as _, TaskEventKind};
    let dir = tempfile::tempdir().unwrap();
    let (bus, mut sub) = consuming(dir.path(), "agent.a").await;
    let task_id = bus
        .submit(task("agent.a", "r-lag"))
        .await
        .unwrap()
        .task
        .task_id;
    let d = tokio::time::timeout(conformance::NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    let events = bus.task_events(task_id).await.unwrap();
    let deltas = bus::local::SUBSCRIBER_BUFFER + 100;
    for i in 0..deltas {
        let text = format!("{i} ");
        bus.emit(task_id, TaskEventKind::Delta { text })
            .await
            .unwrap();
    }
    let result = serde_json::json!("done");
    d.complete(bus::Outcome::Succeeded { result })
        .await
        .unwrap();
    let read = tokio::time::timeout(conformance::NET, async {
        let mut events = events;
        let mut read = Vec::new();
        while let Some(ev) = events.next().await {
            read.push(ev);
        }
        read
    })
    .await
    .expect("the stream ends");
    // queued, started, the deltas, the end: each once, in order.
    assert_eq!(read.len(), deltas + 3);
    assert!(read.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
    assert!(read.last().unwrap().is_terminal());
}

/// A folder an earlier version opened with `LocalBus::open` (the database in the folder itself)
/// opens again with its tasks: moved into the journal beside the database, a duplicate is still
/// one.
#[actix_rt::test]
async fn a_folder_of_the_earlier_layout_opens_with_its_tasks() {
    use bus::Bus as _;
    use conformance::Backend as _;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(conformance::T0);
    {
        let db = sled::open(dir.path()).unwrap();
        let bus = LocalBus::with_db(db, options(clock.clone())).unwrap();
        assert!(
            !bus.submit(task("agent.a", "old-1"))
                .await
                .unwrap()
                .duplicate
        );
    }
    let bus = Local::open(dir.path(), clock, Duration::from_secs(60)).await;
    let again = bus.submit(task("agent.a", "old-1")).await.unwrap();
    assert!(again.duplicate, "found after the reopen");
    assert!(dir.path().join("tasks.journal").is_file());
    assert!(
        !dir.path().join("db").join("conf").exists(),
        "no second database"
    );
}
