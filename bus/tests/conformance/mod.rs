//! The bus conformance suite, generic over the backend. Every backend runs all of it.

pub(crate) mod events;

use bus::{Bus, Envelope, Kind, ManualClock, Outcome, RequestId, TaskState, Topic};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How a backend under test is opened.
pub(crate) trait Backend: 'static {
    /// The bus type.
    type Bus: Bus + Clone;
    /// Opens the bus over the state in `dir`, inside the current actix System.
    async fn open(dir: &Path, clock: Arc<ManualClock>, window: Duration) -> Self::Bus;
    /// False (after saying why) when the backend cannot run here: the test is skipped.
    fn available(_test: &str) -> bool {
        true
    }
}

/// A safety net for awaits that must not hang a failing test; never a synchronisation device.
pub(crate) const NET: Duration = Duration::from_secs(10);
/// Start of the manual clock (2026-01-01).
pub(crate) const T0: u64 = 1_767_225_600_000;

pub(crate) fn topic(s: &str) -> Topic {
    Topic::parse(s).unwrap()
}

pub(crate) fn task(t: &str, rid: &str, text: &str) -> Envelope {
    Envelope::task(
        topic(t),
        RequestId::parse(rid).unwrap(),
        json!({ "text": text }),
    )
}

/// Runs `f` on a thread with its own actix System and drops everything it made before returning,
/// like a process that ends (or is killed) between two runs over the same state directory.
pub(crate) fn in_fresh_system<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    std::thread::spawn(move || actix_rt::System::new().block_on(f()))
        .join()
        .expect("the isolated system must not panic")
}

/// Spawns a consumer that completes every task with `{"echo": text, "attempt": n}` and counts runs.
pub(crate) async fn echo_consumer<B: Bus>(bus: &B, pattern: &str) -> Arc<AtomicUsize> {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut sub = bus.consume(topic(pattern)).await.unwrap();
    let counter = runs.clone();
    actix_rt::spawn(async move {
        while let Some(d) = sub.next().await {
            if !d.start().await.unwrap() {
                continue;
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let env = d.envelope().clone();
            // Yield so concurrent duplicates really overlap with the run.
            tokio::task::yield_now().await;
            let result = json!({ "echo": env.payload["text"], "attempt": env.attempt });
            d.complete(Outcome::Succeeded { result }).await.unwrap();
        }
    });
    runs
}

pub(crate) async fn wildcard_subscriptions_match_like_nats<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut star = bus.subscribe(topic("agent.*")).await.unwrap();
    let mut tail = bus.subscribe(topic("agent.>")).await.unwrap();
    bus.publish(Envelope::event(topic("agent.a.events"), json!(1)))
        .await
        .unwrap();
    bus.publish(Envelope::event(topic("agent.a"), json!(2)))
        .await
        .unwrap();
    let first_star = tokio::time::timeout(NET, star.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first_star.envelope().payload,
        json!(2),
        "agent.* must skip agent.a.events"
    );
    let t1 = tokio::time::timeout(NET, tail.next())
        .await
        .unwrap()
        .unwrap();
    let t2 = tokio::time::timeout(NET, tail.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t1.envelope().payload.clone(), t2.envelope().payload.clone()),
        (json!(1), json!(2))
    );
}

pub(crate) async fn request_reply_returns_the_consumers_result<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    echo_consumer(&bus, "agent.*").await;
    let (record, duplicate) = bus
        .request(task("agent.a", "r-1", "hi"), NET)
        .await
        .unwrap();
    assert!(!duplicate);
    assert_eq!(record.state, TaskState::Succeeded);
    assert_eq!(record.result().unwrap()["echo"], "hi");
    let by_id = bus.task(record.task_id).await.unwrap().unwrap();
    assert_eq!(
        by_id.request_id.as_str(),
        "r-1",
        "a task is found by its task id too"
    );
}

pub(crate) async fn result_is_published_to_reply_to<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    echo_consumer(&bus, "agent.a").await;
    let inbox = Topic::inbox();
    let mut replies = bus.subscribe(inbox.clone()).await.unwrap();
    let mut env = task("agent.a", "r-reply", "ping");
    env.reply_to = Some(inbox);
    bus.submit(env).await.unwrap();
    let reply = tokio::time::timeout(NET, replies.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply.envelope().kind, Kind::Result);
    assert_eq!(reply.envelope().request_id.as_str(), "r-reply");
    assert_eq!(reply.envelope().payload["state"], "succeeded");
}

pub(crate) async fn nacked_task_is_redelivered_as_next_attempt<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-nack", "x")).await.unwrap();
    let first = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(first.start().await.unwrap());
    assert_eq!(first.envelope().attempt, 1);
    first.nack(Duration::from_millis(1)).await.unwrap();
    let second = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(second.start().await.unwrap());
    assert_eq!(
        second.envelope().attempt,
        2,
        "a redelivery is the next attempt of the same task"
    );
    assert_eq!(
        second.envelope().request_id.as_str(),
        "r-nack",
        "a retry keeps its request id"
    );
    second
        .complete(Outcome::Succeeded {
            result: json!("ok"),
        })
        .await
        .unwrap();
    let rec = bus
        .wait(&RequestId::parse("r-nack").unwrap(), NET)
        .await
        .unwrap();
    assert_eq!((rec.state, rec.attempts), (TaskState::Succeeded, 2));
}

pub(crate) async fn dropped_delivery_is_redelivered<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-drop", "x")).await.unwrap();
    let first = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    drop(first);
    let again = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.envelope().request_id.as_str(), "r-drop");
    assert_eq!(again.envelope().attempt, 2);
    again
        .complete(Outcome::Failed { error: "no".into() })
        .await
        .unwrap();
}

pub(crate) async fn same_request_id_three_times_concurrently_runs_once<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let runs = echo_consumer(&bus, "agent.a").await;
    let calls = (0..3).map(|_| bus.request(task("agent.a", "r-same", "once"), NET));
    let answers = futures::future::join_all(calls).await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.unwrap()).collect();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the handler must run exactly once"
    );
    let duplicates = answers.iter().filter(|(_, dup)| *dup).count();
    assert_eq!(duplicates, 2, "two of the three callers are duplicates");
    for (rec, _) in &answers {
        assert_eq!(
            rec.result(),
            answers[0].0.result(),
            "every caller gets the same result"
        );
        assert_eq!(rec.task_id, answers[0].0.task_id);
    }
}

/// A submit whose caller stops waiting once it has begun (a run cancelled mid-submit) still ends:
/// the task is delivered and run once, and the same request id posted again is answered.
pub(crate) async fn a_submit_dropped_after_it_began_still_delivers_its_task<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let runs = echo_consumer(&bus, "agent.a").await;
    {
        let mut submit = std::pin::pin!(bus.submit(task("agent.a", "r-dropped", "once")));
        // One poll starts it; then the caller gives up.
        let first = futures::poll!(submit.as_mut());
        assert!(
            first.is_pending(),
            "a submit waits for the store: {first:?}"
        );
    }
    // Whichever of the two is stored first, the other is its duplicate: one task, run once.
    let (record, _) = bus
        .request(task("agent.a", "r-dropped", "once"), NET)
        .await
        .unwrap();
    assert_eq!(record.state, TaskState::Succeeded, "{record:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "delivered and run once");
}

pub(crate) async fn a_failed_task_posted_again_is_retried_as_its_next_attempt<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-fail", "x")).await.unwrap();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    d.start().await.unwrap();
    d.complete(Outcome::Failed {
        error: "model down".into(),
    })
    .await
    .unwrap();
    let again = bus.submit(task("agent.a", "r-fail", "x")).await.unwrap();
    assert!(
        !again.duplicate,
        "a failed request id posted again is an explicit retry"
    );
    assert_eq!(again.task.task_id, d.envelope().id, "the same task");
    assert_eq!(again.task.state, TaskState::Queued);
    let retried = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(retried.envelope().id, d.envelope().id);
    assert_eq!(
        retried.envelope().attempt,
        2,
        "recorded as the next attempt"
    );
    retried.start().await.unwrap();
    retried
        .complete(Outcome::Succeeded {
            result: serde_json::json!("ok"),
        })
        .await
        .unwrap();
    let done = bus.wait(&again.task.request_id, NET).await.unwrap();
    assert_eq!((done.state, done.attempts), (TaskState::Succeeded, 2));
    // A success is answered from the store, never run again.
    assert!(
        bus.submit(task("agent.a", "r-fail", "x"))
            .await
            .unwrap()
            .duplicate
    );
}

pub(crate) async fn nack_past_max_attempts_dead_letters_the_task<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    let rid = RequestId::parse("r-max").unwrap();
    bus.submit(task("agent.a", "r-max", "x")).await.unwrap();
    loop {
        let d = tokio::time::timeout(NET, sub.next())
            .await
            .unwrap()
            .unwrap();
        d.start().await.unwrap();
        d.nack(Duration::ZERO).await.unwrap();
        let rec = bus.lookup(&rid).await.unwrap().unwrap();
        if rec.state.is_terminal() {
            assert_eq!(rec.state, TaskState::DeadLettered);
            assert!(
                rec.error().unwrap().contains("gave up after"),
                "{:?}",
                rec.error()
            );
            break;
        }
    }
    // Posted again, it is retried: one more attempt, run, not dead-lettered on the spot.
    let dead = bus.lookup(&rid).await.unwrap().unwrap();
    let again = bus.submit(task("agent.a", "r-max", "x")).await.unwrap();
    assert!(
        !again.duplicate,
        "a dead-lettered task posted again is retried"
    );
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .expect("the retry is delivered")
        .unwrap();
    assert_eq!(d.envelope().attempt, dead.attempts + 1);
    d.start().await.unwrap();
    d.complete(Outcome::Succeeded {
        result: serde_json::json!("ok"),
    })
    .await
    .unwrap();
    let done = bus.wait(&rid, NET).await.unwrap();
    assert_eq!(done.state, TaskState::Succeeded);
}

pub(crate) async fn finished_request_id_expires_after_the_window<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let bus = B::open(dir.path(), clock.clone(), Duration::from_secs(60)).await;
    let runs = echo_consumer(&bus, "agent.a").await;
    bus.request(task("agent.a", "r-ttl", "x"), NET)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(30));
    let (_, dup) = bus
        .request(task("agent.a", "r-ttl", "x"), NET)
        .await
        .unwrap();
    assert!(dup, "inside the window the stored result is answered");
    clock.advance(Duration::from_secs(31));
    let (_, dup) = bus
        .request(task("agent.a", "r-ttl", "x"), NET)
        .await
        .unwrap();
    assert!(!dup, "after the window the request id is new again");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

pub(crate) async fn cancelled_task_ends_cancelled_and_is_announced<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut notices = bus.subscribe(Topic::cancellations()).await.unwrap();
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    bus.submit(task("agent.a", "r-cancel-running", "x"))
        .await
        .unwrap();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    let rec = bus
        .cancel(&RequestId::parse("r-cancel-running").unwrap(), "user asked")
        .await
        .unwrap();
    assert_eq!(rec.state, TaskState::Cancelled);
    let notice = tokio::time::timeout(NET, notices.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notice.envelope().payload["request_id"], "r-cancel-running");
    // The consumer finishing late does not overwrite the cancel: the first outcome wins.
    d.complete(Outcome::Succeeded {
        result: json!("late"),
    })
    .await
    .unwrap();
    let rec = bus
        .lookup(&RequestId::parse("r-cancel-running").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.state, rec.error()),
        (TaskState::Cancelled, Some("user asked"))
    );

    // Cancelled before any consumer started it: a later delivery is skipped.
    bus.submit(task("agent.b", "r-cancel-queued", "x"))
        .await
        .unwrap();
    bus.cancel(
        &RequestId::parse("r-cancel-queued").unwrap(),
        "changed my mind",
    )
    .await
    .unwrap();
    let mut late = bus.consume(topic("agent.b")).await.unwrap();
    let d = tokio::time::timeout(NET, late.next())
        .await
        .unwrap()
        .unwrap();
    assert!(!d.start().await.unwrap(), "a cancelled task must not start");
}

pub(crate) fn duplicate_is_answered_from_the_ledger_after_restart<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let first = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        echo_consumer(&bus, "agent.a").await;
        bus.request(task("agent.a", "r-restart", "x"), NET)
            .await
            .unwrap()
            .0
    });
    let path = dir.path().to_path_buf();
    let (again, runs) = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        let runs = echo_consumer(&bus, "agent.a").await;
        let a = bus
            .request(task("agent.a", "r-restart", "x"), NET)
            .await
            .unwrap();
        (a, runs.load(Ordering::SeqCst))
    });
    assert!(
        again.1,
        "after a restart the request id is still a duplicate"
    );
    assert_eq!(again.0.result(), first.result());
    assert_eq!(runs, 0, "the handler must not run again after the restart");
}

pub(crate) fn acknowledged_task_runs_after_a_crash<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let admitted = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        // Acknowledged to the poster, then the process ends before any consumer ran it.
        bus.submit(task("agent.a", "r-crash", "survive"))
            .await
            .unwrap()
    });
    assert!(!admitted.duplicate);
    let path = dir.path().to_path_buf();
    let (record, runs) = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        let runs = echo_consumer(&bus, "agent.a").await;
        let rec = bus
            .wait(&RequestId::parse("r-crash").unwrap(), NET)
            .await
            .unwrap();
        (rec, runs.load(Ordering::SeqCst))
    });
    assert_eq!(
        record.state,
        TaskState::Succeeded,
        "the journaled task runs after restart"
    );
    assert_eq!(record.result().unwrap()["echo"], "survive");
    assert_eq!(runs, 1);
}

pub(crate) async fn abandoned_task_is_dead_lettered_after_max_attempts<B: Backend>() {
    // The backends under test allow 3 attempts.
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut sub = bus.consume(topic("agent.a")).await.unwrap();
    let rid = RequestId::parse("r-poison").unwrap();
    bus.submit(task("agent.a", "r-poison", "x")).await.unwrap();
    for attempt in 1..=3 {
        let d = tokio::time::timeout(NET, sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.envelope().attempt, attempt);
        assert!(d.start().await.unwrap());
        drop(d); // the consumer dies with it
    }
    let rec = bus.wait(&rid, NET).await.unwrap();
    assert_eq!(
        (rec.state, rec.attempts),
        (TaskState::DeadLettered, 3),
        "a task whose consumer keeps dying fails after max attempts"
    );
    assert!(rec.error().unwrap().contains("gave up after 3 attempts"));
}

pub(crate) async fn a_readmitted_request_id_does_not_answer_for_the_old_task_id<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let bus = B::open(dir.path(), clock.clone(), Duration::from_secs(60)).await;
    echo_consumer(&bus, "agent.a").await;
    let (old, _) = bus
        .request(task("agent.a", "r-reuse", "old"), NET)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(61));
    let (new, dup) = bus
        .request(task("agent.a", "r-reuse", "new"), NET)
        .await
        .unwrap();
    assert!(!dup);
    assert_ne!(old.task_id, new.task_id);
    assert_eq!(
        bus.task(new.task_id).await.unwrap().map(|r| r.task_id),
        Some(new.task_id)
    );
    assert_eq!(
        bus.task(old.task_id).await.unwrap(),
        None,
        "the old task id must not lead to the new task (a cancel by it would hit the new one)"
    );
}

pub(crate) async fn cancelling_an_ended_task_announces_nothing<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let bus = B::open(dir.path(), ManualClock::new(T0), Duration::from_secs(60)).await;
    let mut notices = bus.subscribe(Topic::cancellations()).await.unwrap();
    echo_consumer(&bus, "agent.a").await;
    bus.request(task("agent.a", "r-ended", "x"), NET)
        .await
        .unwrap();
    let rec = bus
        .cancel(&RequestId::parse("r-ended").unwrap(), "too late")
        .await
        .unwrap();
    assert_eq!(rec.state, TaskState::Succeeded, "the first outcome wins");
    // A cancel that wins is announced; it must be the first notice seen.
    let mut sub = bus.consume(topic("agent.b")).await.unwrap();
    bus.submit(task("agent.b", "r-live", "x")).await.unwrap();
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(d.start().await.unwrap());
    bus.cancel(&RequestId::parse("r-live").unwrap(), "stop")
        .await
        .unwrap();
    let notice = tokio::time::timeout(NET, notices.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        notice.envelope().payload["request_id"],
        "r-live",
        "a cancel that lost to a finished run must not tell its consumer to stop"
    );
}

pub(crate) fn unfinished_tasks_come_back_in_admission_order<B: Backend>() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    // Admitted in the same millisecond, with request ids that sort the other way round.
    let ids: Vec<String> = (0..10).rev().map(|i| format!("r-order-{i}")).collect();
    let posted = ids.clone();
    in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        for rid in &posted {
            bus.submit(task("agent.a", rid, rid)).await.unwrap();
        }
    });
    let path = dir.path().to_path_buf();
    let seen = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        let mut sub = bus.consume(topic("agent.a")).await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..10 {
            let d = tokio::time::timeout(NET, sub.next())
                .await
                .unwrap()
                .unwrap();
            seen.push(d.envelope().request_id.to_string());
            d.complete(Outcome::Succeeded {
                result: json!(null),
            })
            .await
            .unwrap();
        }
        seen
    });
    assert_eq!(
        seen, ids,
        "after a restart tasks run in the order they were admitted"
    );
}

pub(crate) fn a_task_that_keeps_crashing_the_process_is_dead_lettered_after_max_attempts<
    B: Backend,
>() {
    let dir = tempfile::tempdir().unwrap();
    // Three lives: each starts the task, then the process dies before it is settled.
    for life in 1..=3u32 {
        let path = dir.path().to_path_buf();
        let attempt = in_fresh_system(move || async move {
            let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
            let mut sub = bus.consume(topic("agent.a")).await.unwrap();
            if life == 1 {
                bus.submit(task("agent.a", "r-crashes", "x")).await.unwrap();
            }
            let d = tokio::time::timeout(NET, sub.next())
                .await
                .unwrap()
                .unwrap();
            assert!(d.start().await.unwrap());
            d.envelope().attempt
        });
        assert_eq!(attempt, life);
    }
    let path = dir.path().to_path_buf();
    let rec = in_fresh_system(move || async move {
        let bus = B::open(&path, ManualClock::new(T0), Duration::from_secs(60)).await;
        // A consumer is there again (on a distributed bus the task comes back through it, as
        // its fourth delivery); it must not get to run the task.
        let _sub = bus.consume(topic("agent.a")).await.unwrap();
        bus.wait(&RequestId::parse("r-crashes").unwrap(), NET)
            .await
            .unwrap()
    });
    assert_eq!(
        rec.state,
        TaskState::DeadLettered,
        "a task that took the process down max_attempts times is dead-lettered, not run again"
    );
}

/// Instantiates every conformance test for a backend.
#[macro_export]
macro_rules! conformance_suite {
    ($backend:ty) => {
        $crate::conformance_suite!(@events $backend;
            events_of_a_task_come_in_order,
            a_late_subscriber_gets_the_replay,
            delivery_events_follow_the_terminal_one,
            emitted_events_come_between_start_and_end,
            wait_is_answered_by_the_terminal_event,
            cancel_emits_the_one_terminal_event,
            reusing_a_request_id_for_other_work_is_a_conflict,
        );
        #[actix_rt::test]
        async fn wildcard_subscriptions_match_like_nats() {
            if !<$backend as conformance::Backend>::available(stringify!(wildcard_subscriptions_match_like_nats)) { return; }
            conformance::wildcard_subscriptions_match_like_nats::<$backend>().await
        }
        #[actix_rt::test]
        async fn request_reply_returns_the_consumers_result() {
            if !<$backend as conformance::Backend>::available(stringify!(request_reply_returns_the_consumers_result)) { return; }
            conformance::request_reply_returns_the_consumers_result::<$backend>().await
        }
        #[actix_rt::test]
        async fn result_is_published_to_reply_to() {
            if !<$backend as conformance::Backend>::available(stringify!(result_is_published_to_reply_to)) { return; }
            conformance::result_is_published_to_reply_to::<$backend>().await
        }
        #[actix_rt::test]
        async fn nacked_task_is_redelivered_as_next_attempt() {
            if !<$backend as conformance::Backend>::available(stringify!(nacked_task_is_redelivered_as_next_attempt)) { return; }
            conformance::nacked_task_is_redelivered_as_next_attempt::<$backend>().await
        }
        #[actix_rt::test]
        async fn dropped_delivery_is_redelivered() {
            if !<$backend as conformance::Backend>::available(stringify!(dropped_delivery_is_redelivered)) { return; }
            conformance::dropped_delivery_is_redelivered::<$backend>().await
        }
        #[actix_rt::test]
        async fn same_request_id_three_times_concurrently_runs_once() {
            if !<$backend as conformance::Backend>::available(stringify!(same_request_id_three_times_concurrently_runs_once)) { return; }
            conformance::same_request_id_three_times_concurrently_runs_once::<$backend>().await
        }
        #[actix_rt::test]
        async fn a_submit_dropped_after_it_began_still_delivers_its_task() {
            if !<$backend as conformance::Backend>::available(stringify!(a_submit_dropped_after_it_began_still_delivers_its_task)) { return; }
            conformance::a_submit_dropped_after_it_began_still_delivers_its_task::<$backend>().await
        }
        #[actix_rt::test]
        async fn a_failed_task_posted_again_is_retried_as_its_next_attempt() {
            if !<$backend as conformance::Backend>::available(stringify!(a_failed_task_posted_again_is_retried_as_its_next_attempt)) { return; }
            conformance::a_failed_task_posted_again_is_retried_as_its_next_attempt::<$backend>().await
        }
        #[actix_rt::test]
        async fn nack_past_max_attempts_dead_letters_the_task() {
            if !<$backend as conformance::Backend>::available(stringify!(nack_past_max_attempts_dead_letters_the_task)) { return; }
            conformance::nack_past_max_attempts_dead_letters_the_task::<$backend>().await
        }
        #[actix_rt::test]
        async fn finished_request_id_expires_after_the_window() {
            if !<$backend as conformance::Backend>::available(stringify!(finished_request_id_expires_after_the_window)) { return; }
            conformance::finished_request_id_expires_after_the_window::<$backend>().await
        }
        #[actix_rt::test]
        async fn cancelled_task_ends_cancelled_and_is_announced() {
            if !<$backend as conformance::Backend>::available(stringify!(cancelled_task_ends_cancelled_and_is_announced)) { return; }
            conformance::cancelled_task_ends_cancelled_and_is_announced::<$backend>().await
        }
        #[actix_rt::test]
        async fn abandoned_task_is_dead_lettered_after_max_attempts() {
            if !<$backend as conformance::Backend>::available(stringify!(abandoned_task_is_dead_lettered_after_max_attempts)) { return; }
            conformance::abandoned_task_is_dead_lettered_after_max_attempts::<$backend>().await
        }
        #[actix_rt::test]
        async fn a_readmitted_request_id_does_not_answer_for_the_old_task_id() {
            if !<$backend as conformance::Backend>::available(stringify!(a_readmitted_request_id_does_not_answer_for_the_old_task_id)) { return; }
            conformance::a_readmitted_request_id_does_not_answer_for_the_old_task_id::<$backend>()
                .await
        }
        #[actix_rt::test]
        async fn cancelling_an_ended_task_announces_nothing() {
            if !<$backend as conformance::Backend>::available(stringify!(cancelling_an_ended_task_announces_nothing)) { return; }
            conformance::cancelling_an_ended_task_announces_nothing::<$backend>().await
        }
        #[test]
        fn unfinished_tasks_come_back_in_admission_order() {
            if !<$backend as conformance::Backend>::available(stringify!(unfinished_tasks_come_back_in_admission_order)) { return; }
            conformance::unfinished_tasks_come_back_in_admission_order::<$backend>()
        }
        #[test]
        fn a_task_that_keeps_crashing_the_process_is_dead_lettered_after_max_attempts() {
            if !<$backend as conformance::Backend>::available(stringify!(a_task_that_keeps_crashing_the_process_is_dead_lettered_after_max_attempts)) { return; }
            conformance::a_task_that_keeps_crashing_the_process_is_dead_lettered_after_max_attempts::<
                $backend,
            >()
        }
        #[test]
        fn duplicate_is_answered_from_the_ledger_after_restart() {
            if !<$backend as conformance::Backend>::available(stringify!(duplicate_is_answered_from_the_ledger_after_restart)) { return; }
            conformance::duplicate_is_answered_from_the_ledger_after_restart::<$backend>()
        }
        #[test]
        fn replay_after_a_restart_comes_from_the_store() {
            if !<$backend as conformance::Backend>::available(stringify!(replay_after_a_restart_comes_from_the_store)) { return; }
            conformance::events::replay_after_a_restart_comes_from_the_store::<$backend>()
        }
        #[test]
        fn acknowledged_task_runs_after_a_crash() {
            if !<$backend as conformance::Backend>::available(stringify!(acknowledged_task_runs_after_a_crash)) { return; }
            conformance::acknowledged_task_runs_after_a_crash::<$backend>()
        }
    };
    (@events $backend:ty; $($name:ident),* $(,)?) => {
        $(
            #[actix_rt::test]
            async fn $name() {
            if !<$backend as conformance::Backend>::available(stringify!($name)) { return; }
                conformance::events::$name::<$backend>().await
            }
        )*
    };
}
