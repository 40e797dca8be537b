//! The task store with its records in the task journal (as the daemon opens it): the conformance
//! suite, the move of records an earlier version left in sled, a failed flush undone, and
//! acknowledged admissions surviving SIGKILL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod crash;
mod store;

use bus::{
    BusError, Envelope, ManualClock, RequestId, SledTaskStore, StoreExtras, TaskState, TaskStore,
    Topic,
};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

struct Journaled;

impl store::Opener for Journaled {
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn TaskStore> {
        Arc::new(open(dir, clock, StoreExtras::default()))
    }
}

store_suite!(Journaled);

/// The store as the daemon opens it in `dir`: the database `db`, the journal `tasks.journal`.
fn open(dir: &Path, clock: Arc<ManualClock>, extras: StoreExtras) -> SledTaskStore {
    let extras = StoreExtras {
        journal: Some(dir.join("tasks.journal")),
        ..extras
    };
    let db = crash::when_released(|| sled::open(dir.join("db")));
    SledTaskStore::with_extras(db, clock, store::WINDOW, extras).unwrap()
}

fn task(request_id: &str, text: &str) -> Envelope {
    Envelope::task(
        Topic::parse("agent.a").unwrap(),
        RequestId::parse(request_id).unwrap(),
        json!({ "text": text }),
    )
}

fn succeeded(text: &str) -> bus::Outcome {
    bus::Outcome::Succeeded {
        result: json!(text),
    }
}

/// Records an earlier version kept in the sled database (ended, running, queued, and one whose
/// task id needs the index) are moved into the journal when the store opens with one: found by
/// request id and task id, unfinished ones still unfinished, and the sled trees gone.
#[tokio::test]
async fn records_kept_in_sled_by_an_earlier_version_move_into_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(store::T0);
    let db = sled::open(dir.path().join("db")).unwrap();
    let old = SledTaskStore::with_db(db.clone(), clock.clone(), store::WINDOW).unwrap();
    let ended = old.admit(task("ended", "a")).await.unwrap().task;
    old.start(&ended.request_id, 1).await.unwrap();
    old.complete(&ended.request_id, succeeded("done"))
        .await
        .unwrap();
    let running = old.admit(task("running", "b")).await.unwrap().task;
    old.start(&running.request_id, 1).await.unwrap();
    let mut by_hand = task("by-hand", "c");
    by_hand.id = uuid::Uuid::new_v4();
    let by_hand = old.admit(by_hand).await.unwrap().task;
    let before = old.list().await.unwrap();
    drop(old);
    drop(db);

    let store = open(dir.path(), clock.clone(), StoreExtras::default());
    assert_eq!(store.list().await.unwrap(), before);
    for t in [&ended, &running, &by_hand] {
        let found = store.by_task_id(t.task_id).await.unwrap();
        assert_eq!(
            found.map(|r| r.request_id),
            Some(t.request_id.clone()),
            "{}",
            t.request_id
        );
    }
    let unfinished: Vec<_> = store
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(unfinished, vec!["running", "by-hand"]);
    assert!(store.admit(task("ended", "a")).await.unwrap().duplicate);
    drop(store);

    let db = crash::when_released(|| sled::open(dir.path().join("db")));
    let names: Vec<String> = db
        .tree_names()
        .iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n == "bus.task_records.2" || n == "bus.task_ids"),
        "{names:?}"
    );
    drop(db);
    // Opened again: the same records, from the journal alone.
    let store = open(dir.path(), clock, StoreExtras::default());
    assert_eq!(store.list().await.unwrap(), before);
    let found = store.by_task_id(by_hand.task_id).await.unwrap();
    assert_eq!(found.map(|r| r.task_id), Some(by_hand.task_id));
}

/// A failed flush (a full disk, injected) undoes what it would have made durable: the refused
/// admission is gone in this process and after a reopen, a refused outcome leaves the task
/// running, and both take when asked again.
#[tokio::test]
async fn writes_whose_flush_failed_are_undone_here_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(store::T0);
    let fault = bus::commit::FlushFault::new();
    let extras = || StoreExtras {
        refusals: Some(dir.path().join("refused-admissions")),
        fault: Some(fault.clone()),
        journal: None,
    };
    let store = open(dir.path(), clock.clone(), extras());
    let kept = store.admit(task("kept", "a")).await.unwrap().task;
    store.start(&kept.request_id, 1).await.unwrap();
    fault.set(true);
    let refused = store.admit(task("refused", "b")).await;
    assert!(
        matches!(refused, Err(BusError::Storage { .. })),
        "{refused:?}"
    );
    let refused_id = RequestId::parse("refused").unwrap();
    assert!(store.lookup(&refused_id).await.unwrap().is_none(), "undone");
    assert!(
        store
            .complete(&kept.request_id, succeeded("x"))
            .await
            .is_err()
    );
    let now = store.lookup(&kept.request_id).await.unwrap().unwrap();
    assert_eq!(now.state, TaskState::Running, "the outcome is undone");
    fault.set(false);
    // A write after the fault: its flush carries the undone frames too.
    store.admit(task("later", "c")).await.unwrap();
    drop(store);

    let store = open(dir.path(), clock, extras());
    assert!(store.lookup(&refused_id).await.unwrap().is_none());
    let unfinished: Vec<_> = store
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.request_id.to_string(), r.state))
        .collect();
    assert_eq!(
        unfinished,
        vec![
            ("kept".to_string(), TaskState::Running),
            ("later".to_string(), TaskState::Queued)
        ]
    );
    let done = store
        .complete(&kept.request_id, succeeded("x"))
        .await
        .unwrap();
    assert!(done.recorded);
    let again = store.admit(task("refused", "b")).await.unwrap();
    assert!(!again.duplicate, "a new admission");
}

/// Acknowledged means on disk: a child process admits, starts and ends tasks from 64 concurrent
/// writers and prints each acknowledgement; it is killed with SIGKILL (no destructor, no last
/// flush) right after the 400th. Opened again, the journal has every acknowledged admission and
/// outcome, found by request id and task id, and admitting one again is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_sigkill() {
    if let Some(dir) = crash::child_dir() {
        return write_until_killed(&dir).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let acked = crash::acknowledged_until_killed(
        "every_acknowledged_write_survives_a_sigkill",
        dir.path(),
        |text| {
            let mut parts = text.split(' ');
            let (what, id, task_id) = (parts.next()?, parts.next()?, parts.next()?);
            Some((what.to_string(), id.to_string(), task_id.to_string()))
        },
    );
    let store = open(
        dir.path(),
        ManualClock::new(store::T0),
        StoreExtras::default(),
    );
    for (what, id, task_id) in &acked {
        let rid = RequestId::parse(id).unwrap();
        let record = store.lookup(&rid).await.unwrap();
        let Some(record) = record else {
            panic!("acknowledged {id} is on disk")
        };
        if what == "ended" {
            assert_eq!(record.state, TaskState::Succeeded, "{id}");
        }
        let by_id = store.by_task_id(task_id.parse().unwrap()).await.unwrap();
        assert_eq!(by_id.as_ref(), Some(&record), "{id} by its task id");
        let again = store.admit(task(id, id)).await.unwrap();
        assert!(again.duplicate, "{id} again is a duplicate");
    }
}

/// The child: admits, starts and ends tasks from many writers at once, printing each
/// acknowledgement as soon as its call returns, until it is killed (or, bounded, after 1,000
/// tasks per writer).
async fn write_until_killed(dir: &Path) {
    let store = Arc::new(open(
        dir,
        ManualClock::new(store::T0),
        StoreExtras::default(),
    ));
    let writers: Vec<_> = (0..crash::WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 0..1_000 {
                    let id = format!("crash-{w}-{n}");
                    let admitted = store.admit(task(&id, &id)).await.unwrap();
                    assert!(!admitted.duplicate);
                    let task_id = admitted.task.task_id;
                    crash::say_acked(&format!("admitted {id} {task_id}"));
                    if n % 2 == 0 {
                        store.start(&admitted.task.request_id, 1).await.unwrap();
                        let done = store
                            .complete(&admitted.task.request_id, succeeded("ok"))
                            .await
                            .unwrap();
                        assert!(done.recorded);
                        crash::say_acked(&format!("ended {id} {task_id}"));
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
}
