//! The broker routing from many threads at once, a dropped delivery coming back, the broker's
//! lifetime, and when a waiter reads the store to catch up on an outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{LocalBus, LocalOptions};
use crate::{Bus as _, Envelope, Outcome, RequestId, Topic};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

fn task(i: usize) -> Envelope {
    Envelope::task(
        Topic::parse("agent.full").unwrap(),
        RequestId::parse(&format!("r-{i}")).unwrap(),
        serde_json::json!(i),
    )
}

/// Tasks submitted from several threads at once, each routed on its submitter's thread, reach
/// the consumers once each, and every submitter gets its own outcome back.
#[test]
fn tasks_routed_from_many_threads_at_once_each_reach_one_consumer_once() {
    const TASKS: usize = 2_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let bus = LocalBus::open(dir.path(), LocalOptions::default()).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(HashMap::<String, usize>::new()));
        let mut consumers = Vec::new();
        for _ in 0..3 {
            let mut sub = bus.consume(Topic::parse("agent.*").unwrap()).await.unwrap();
            let seen = seen.clone();
            consumers.push(tokio::spawn(async move {
                while let Some(d) = sub.next().await {
                    let id = d.envelope().request_id.to_string();
                    *seen.lock().unwrap().entry(id).or_default() += 1;
                    tokio::spawn(async move {
                        assert!(d.start().await.unwrap());
                        let result = d.envelope().payload.clone();
                        d.complete(Outcome::Succeeded { result }).await.unwrap();
                    });
                }
            }));
        }
        let submits: Vec<_> = (0..TASKS)
            .map(|i| {
                let bus = bus.clone();
                tokio::spawn(async move {
                    let (done, _) = bus.request(task(i), Duration::from_secs(60)).await.unwrap();
                    assert_eq!(done.outcome, Some(Outcome::Succeeded { result: json!(i) }));
                })
            })
            .collect();
        for s in submits {
            s.await.unwrap();
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), TASKS, "every task delivered");
        assert!(seen.values().all(|&n| n == 1), "none delivered twice");
        for c in consumers {
            c.abort();
        }
    });
}

/// A delivery dropped unsettled comes back (redelivered as its next attempt) to a consumer, and
/// the broker goes once no bus and no subscription holds it: its subscriptions end.
#[actix_rt::test]
async fn a_dropped_delivery_comes_back_and_the_broker_goes_with_its_last_holder() {
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), LocalOptions::default()).unwrap();
    let mut sub = bus.consume(Topic::parse("agent.*").unwrap()).await.unwrap();
    bus.submit(task(7)).await.unwrap();
    let first = sub.next().await.unwrap();
    assert_eq!(first.envelope().attempt, 1);
    drop(first);
    let again = sub.next().await.unwrap();
    assert_eq!(again.envelope().request_id.as_str(), "r-7");
    assert_eq!(again.envelope().attempt, 2, "the next attempt");
    again.release();
    drop(again);
    let broker = Arc::downgrade(&bus.broker);
    drop(bus);
    assert!(broker.upgrade().is_some(), "the subscription holds it");
    drop(sub);
    assert!(broker.upgrade().is_none(), "gone with its last holder");
}

/// Outcomes recorded through the bus leave the event log nothing to catch up on (a waiter reads
/// no record for it); one recorded on the store directly, past the log, makes it read from then on.
#[actix_rt::test]
async fn the_log_skips_the_store_read_only_while_every_outcome_came_through_it() {
    use crate::{SledTaskStore, SystemClock, TaskStore as _};
    let dir = tempfile::tempdir().unwrap();
    let window = Duration::from_secs(60);
    let store = Arc::new(SledTaskStore::open(dir.path(), Arc::new(SystemClock), window).unwrap());
    let bus = LocalBus::with_store(store.clone(), LocalOptions::default());
    assert!(bus.evented.heard_every_outcome(), "none asked yet");
    let routed = bus.submit(task(1)).await.unwrap();
    let result = serde_json::json!("through the bus");
    bus.end(&routed.task.request_id, Outcome::Succeeded { result })
        .await
        .unwrap();
    assert!(
        bus.evented.heard_every_outcome(),
        "the one outcome came through"
    );
    let direct = bus.submit(task(2)).await.unwrap();
    let result = serde_json::json!("past the bus");
    store
        .complete(&direct.task.request_id, Outcome::Succeeded { result })
        .await
        .unwrap();
    assert!(
        !bus.evented.heard_every_outcome(),
        "an outcome came past the log: the store is read"
    );
    let waited = bus.wait(&direct.task.request_id, window).await.unwrap();
    assert!(waited.state.is_terminal(), "{waited:?}");
}

/// A sled store whose `unfinished` waits for `gate` (or panics with `panics`): the re-queue of a
/// restart held at will; with `outcomes`, an outcome recorded through the bus is written, then
/// answered only once `outcomes` lets it (as if its flush took that long).
struct HeldRecovery {
    inner: crate::SledTaskStore,
    gate: Arc<tokio::sync::Notify>,
    panics: bool,
    outcomes: Option<Arc<tokio::sync::Notify>>,
}

#[async_trait::async_trait]
impl crate::TaskStore for HeldRecovery {
    fn window(&self) -> Duration {
        self.inner.window()
    }
    async fn admit(&self, env: Envelope) -> Result<crate::Admission, crate::BusError> {
        self.inner.admit(env).await
    }
    async fn attach(&self, env: &Envelope) -> Result<Option<crate::Admission>, crate::BusError> {
        self.inner.attach(env).await
    }
    async fn start(
        &self,
        id: &RequestId,
        attempt: u32,
    ) -> Result<Option<crate::TaskRecord>, crate::BusError> {
        self.inner.start(id, attempt).await
    }
    async fn progress(
        &self,
        id: &RequestId,
        note: serde_json::Value,
    ) -> Result<Option<crate::TaskRecord>, crate::BusError> {
        self.inner.progress(id, note).await
    }
    async fn complete(
        &self,
        id: &RequestId,
        outcome: Outcome,
    ) -> Result<crate::store::Completion, crate::BusError> {
        self.inner.complete(id, outcome).await
    }
    async fn complete_announced(
        &self,
        id: &RequestId,
        outcome: Outcome,
    ) -> Result<crate::store::Completion, crate::BusError> {
        let done = self.inner.complete_announced(id, outcome).await;
        if let Some(held) = &self.outcomes {
            held.notified().await;
        }
        done
    }
    fn unannounced_outcomes(&self) -> Option<u64> {
        self.inner.unannounced_outcomes()
    }
    async fn requeue(&self, id: &RequestId) -> Result<Option<crate::TaskRecord>, crate::BusError> {
        self.inner.requeue(id).await
    }
    async fn lookup(&self, id: &RequestId) -> Result<Option<crate::TaskRecord>, crate::BusError> {
        self.inner.lookup(id).await
    }
    async fn by_task_id(
        &self,
        id: uuid::Uuid,
    ) -> Result<Option<crate::TaskRecord>, crate::BusError> {
        self.inner.by_task_id(id).await
    }
    async fn unfinished(&self) -> Result<Vec<crate::TaskRecord>, crate::BusError> {
        self.gate.notified().await;
        assert!(!self.panics, "the read of the unfinished tasks failed");
        self.inner.unfinished().await
    }
    async fn list(&self) -> Result<Vec<crate::TaskRecord>, crate::BusError> {
        self.inner.list().await
    }
    async fn expire(&self) -> Result<usize, crate::BusError> {
        self.inner.expire().await
    }
}

fn held_recovery(dir: &std::path::Path, panics: bool) -> (LocalBus, Arc<tokio::sync::Notify>) {
    use crate::{SledTaskStore, SystemClock};
    let inner = SledTaskStore::open(dir, Arc::new(SystemClock), Duration::from_secs(600)).unwrap();
    let gate = Arc::new(tokio::sync::Notify::new());
    let store = HeldRecovery {
        inner,
        gate: gate.clone(),
        panics,
        outcomes: None,
    };
    (
        LocalBus::with_store(Arc::new(store), LocalOptions::default()),
        gate,
    )
}

/// A task submitted while a restart's unfinished tasks are still being read waits for them: they
/// are delivered first, and the new task once, not also as one of them.
#[actix_rt::test]
async fn a_submit_during_the_re_queue_waits_and_its_task_is_delivered_once_after() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (bus, gate) = held_recovery(dir.path(), false);
        gate.notify_one();
        bus.submit(task(1)).await.unwrap(); // never started: unfinished at the next open
    }
    let (bus, gate) = held_recovery(dir.path(), false);
    let mut sub = bus
        .consume(Topic::parse("agent.full").unwrap())
        .await
        .unwrap();
    let submit = tokio::spawn({
        let bus = bus.clone();
        async move { bus.submit(task(2)).await.unwrap() }
    });
    tokio::task::yield_now().await;
    assert!(!submit.is_finished(), "the submit waits for the re-queue");
    gate.notify_one();
    submit.await.unwrap();
    let first = sub.next().await.unwrap();
    assert_eq!(
        first.envelope().request_id.as_str(),
        "r-1",
        "re-queued first"
    );
    let second = sub.next().await.unwrap();
    assert_eq!(second.envelope().request_id.as_str(), "r-2");
    for d in [first, second] {
        d.complete(Outcome::Succeeded {
            result: json!(null),
        })
        .await
        .unwrap();
    }
    // The re-queue and the submit's dispatch both routed before `submit` returned: a second
    // delivery of either would be queued by now.
    use futures::FutureExt as _;
    let more = sub.next().now_or_never();
    assert!(more.is_none(), "nothing delivered twice: {more:?}");
}

/// Should the read of the unfinished tasks fail outright (a panic), submits do not wait forever.
#[actix_rt::test]
async fn a_re_queue_that_panics_lets_the_submits_go() {
    let dir = tempfile::tempdir().unwrap();
    let (bus, gate) = held_recovery(dir.path(), true);
    gate.notify_one();
    let admitted = tokio::time::timeout(Duration::from_secs(30), bus.submit(task(3))).await;
    assert!(!admitted.unwrap().unwrap().duplicate);
}

/// An outcome that waits for its flush while a repost retries the task (and starts its events
/// over) does not end the retry's events: the retry runs, and its own outcome is what a waiter
/// gets.
#[actix_rt::test]
async fn an_outcome_answered_after_a_repost_retried_its_task_does_not_end_the_retry() {
    use crate::{SledTaskStore, SystemClock, TaskState};
    let dir = tempfile::tempdir().unwrap();
    let inner = SledTaskStore::open(dir.path(), Arc::new(SystemClock), Duration::from_secs(600));
    let (gate, outcomes) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    gate.notify_one();
    let store = HeldRecovery {
        inner: inner.unwrap(),
        gate,
        panics: false,
        outcomes: Some(outcomes.clone()),
    };
    let bus = LocalBus::with_store(Arc::new(store), LocalOptions::default());
    let mut sub = bus
        .consume(Topic::parse("agent.full").unwrap())
        .await
        .unwrap();
    let admitted = bus.submit(task(1)).await.unwrap().task;
    let first = sub.next().await.unwrap();
    assert!(first.start().await.unwrap());
    let failing = tokio::spawn(async move {
        first
            .complete(Outcome::Failed {
                error: "model down".into(),
            })
            .await
            .unwrap();
    });
    // The outcome is written (the repost sees a failed task) and its answer held.
    while bus
        .lookup(&admitted.request_id)
        .await
        .unwrap()
        .map(|r| r.state)
        != Some(TaskState::Failed)
    {
        tokio::task::yield_now().await;
    }
    let retried = bus.submit(task(1)).await.unwrap();
    assert!(!retried.duplicate, "retried");
    outcomes.notify_one();
    failing.await.unwrap();
    let ended = bus
        .log
        .ended(admitted.task_id)
        .map(|(_, terminal)| terminal);
    assert_eq!(
        ended,
        Some(false),
        "the retry's events are not ended by the old outcome"
    );
    let second = sub.next().await.unwrap();
    assert!(second.start().await.unwrap());
    let answer = tokio::spawn(async move {
        second
            .complete(Outcome::Succeeded {
                result: json!("ok"),
            })
            .await
            .unwrap();
    });
    outcomes.notify_one();
    answer.await.unwrap();
    let done = bus
        .wait(&admitted.request_id, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(done.state, TaskState::Succeeded);
}

/// A task delivery dropped unsettled where the broker's lock is held (a closed queue pruned
/// while routing drops what was stranded in it) announces its retry and comes back, without
/// taking the lock again on that thread (which would never return).
#[actix_rt::test]
async fn a_delivery_dropped_where_the_brokers_lock_is_held_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let bus = LocalBus::open(dir.path(), LocalOptions::default()).unwrap();
    // Someone listens to the task's events: its retry announcement is published on the broker.
    let mut events = bus
        .subscribe(Topic::parse("events.>").unwrap())
        .await
        .unwrap();
    let mut sub = bus
        .consume(Topic::parse("agent.full").unwrap())
        .await
        .unwrap();
    bus.submit(task(1)).await.unwrap();
    let delivery = sub.next().await.unwrap();
    let broker = bus.broker.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        broker.while_locked(|| drop(delivery));
        let _ = tx.send(());
    });
    if rx.recv_timeout(Duration::from_secs(20)).is_err() {
        // Whatever takes the lock would wait forever for that thread: nothing here is dropped.
        std::mem::forget((bus, sub, events));
        panic!("the drop never returned: it took the broker's lock again");
    }
    let again = tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .expect("redelivered")
        .unwrap();
    assert_eq!(again.envelope().attempt, 2);
    // Announced before it was redelivered: on the events subscription already.
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the retry is announced")
            .unwrap();
        let kind = crate::TaskEvent::from_envelope(ev.envelope()).map(|e| e.event);
        if matches!(kind, Ok(crate::TaskEventKind::Retry { attempt: 2, .. })) {
            break;
        }
    }
}
