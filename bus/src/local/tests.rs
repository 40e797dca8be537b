//! The broker's mailbox seen from a submit (full, a dispatch waits for room instead of failing), and
//! when a waiter reads the store to catch up on an outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{LocalBus, LocalOptions, dispatch_to};
use crate::{Bus as _, Envelope, RequestId, Topic};
use futures::FutureExt as _;
use std::time::Duration;

fn task(i: usize) -> Envelope {
    Envelope::task(
        Topic::parse("agent.full").unwrap(),
        RequestId::parse(&format!("r-{i}")).unwrap(),
        serde_json::json!(i),
    )
}

/// The broker's mailbox (4,096) filled while its thread cannot run: the next dispatch is pending
/// (not an error), ends once the broker runs again, and every dispatched task is delivered.
#[test]
fn a_dispatch_past_a_full_mailbox_waits_for_room_and_is_delivered() {
    const MAILBOX: usize = 4_096;
    actix_rt::System::new().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        // The broker lives on the arbiter the bus is opened on: a thread of the test's own.
        let arbiter = actix_rt::Arbiter::new();
        let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
        let path = dir.path().to_path_buf();
        arbiter.spawn(async move {
            let _ = opened_tx.send(LocalBus::open(&path, LocalOptions::default()));
        });
        let bus = opened_rx.await.unwrap().unwrap();
        let mut sub = bus
            .consume(Topic::parse("agent.full").unwrap())
            .await
            .unwrap();
        // The broker's thread blocks until released: its mailbox fills and stays full.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        arbiter.spawn_fn(move || {
            let _ = release_rx.recv();
        });
        let mut queued = 0;
        let waiting = loop {
            let mut dispatch = Box::pin(dispatch_to(&bus.broker, task(queued)));
            match (&mut dispatch).now_or_never() {
                Some(done) => {
                    done.unwrap();
                    queued += 1;
                    assert!(queued <= 2 * MAILBOX, "the mailbox never filled");
                }
                None => break dispatch,
            }
        };
        assert!(queued >= MAILBOX, "pending after only {queued} dispatches");
        release_tx.send(()).unwrap();
        let bound = Duration::from_secs(60);
        tokio::time::timeout(bound, waiting).await.unwrap().unwrap();
        // Every dispatched task reaches the consumer, the one that waited for room too. (These
        // tasks were never admitted to the store, so nothing settles them: the broker may deliver
        // one again, which this test does not judge.)
        let mut seen = std::collections::HashSet::new();
        while seen.len() <= queued {
            let d = tokio::time::timeout(bound, sub.next())
                .await
                .unwrap()
                .unwrap();
            seen.insert(d.envelope().request_id.to_string());
        }
        assert!(seen.contains(&format!("r-{queued}")));
        arbiter.stop();
    });
}

/// Outcomes recorded through the bus leave the event log nothing to catch up on (a waiter reads
/// no record for it); one recorded on the store directly, past the log, makes it read from then on.
#[actix_rt::test]
async fn the_log_skips_the_store_read_only_while_every_outcome_came_through_it() {
    use crate::{Outcome, SledTaskStore, SystemClock, TaskStore as _};
    use std::sync::Arc;
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
