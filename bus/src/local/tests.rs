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
