//! The task store conformance suite against sled, the upgrade from raw request-id keys, and group
//! commit: acknowledged means on disk, and a lone commit is not held back for a batch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod crash;
mod store;

use bus::{
    BusError, Clock as _, Envelope, ManualClock, RequestId, SledTaskStore, TaskRecord, TaskState,
    TaskStore, Topic,
};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

struct Sled;

impl store::Opener for Sled {
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn TaskStore> {
        // A reopen may come right after the previous store was dropped.
        Arc::new(crash::when_released(|| {
            SledTaskStore::open(dir, clock.clone(), store::WINDOW)
        }))
    }
}

store_suite!(Sled);

/// A record as the previous version wrote it: keyed by the raw request id in `bus.tasks`, with
/// no fingerprint.
fn write_legacy(dir: &Path, request_id: &str, payload: serde_json::Value) -> TaskRecord {
    let env = Envelope::task(
        Topic::parse("agent.a").unwrap(),
        RequestId::parse(request_id).unwrap(),
        payload,
    );
    let record = TaskRecord {
        task_id: env.id,
        request_id: env.request_id.clone(),
        state: TaskState::Succeeded,
        attempts: 1,
        envelope: env.into(),
        outcome: Some(bus::Outcome::Succeeded {
            result: json!("old"),
        }),
        created_ms: store::T0,
        updated_ms: store::T0,
        seq: 7,
        progress: None,
        fingerprint: None,
    };
    let db = sled::open(dir).unwrap();
    let mut value = serde_json::to_value(&record).unwrap();
    value.as_object_mut().unwrap().remove("progress");
    db.open_tree("bus.tasks")
        .unwrap()
        .insert(request_id.as_bytes(), serde_json::to_vec(&value).unwrap())
        .unwrap();
    db.open_tree("bus.task_ids")
        .unwrap()
        .insert(record.task_id.as_bytes(), request_id.as_bytes())
        .unwrap();
    db.flush().unwrap();
    record
}

#[tokio::test]
async fn a_record_written_by_the_previous_version_is_found_after_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let old = write_legacy(dir.path(), "x/y:z*>+?#%", json!({ "text": "x" }));
    let store = open_when_released(dir.path());
    let found = store.lookup(&old.request_id).await.unwrap().unwrap();
    assert_eq!(found, old);
    assert_eq!(
        store
            .by_task_id(old.task_id)
            .await
            .unwrap()
            .map(|r| r.task_id),
        Some(old.task_id)
    );
    // Without a fingerprint the stored payload decides: same is a duplicate, other a conflict.
    let same = store.admit(Envelope::clone(&old.envelope)).await.unwrap();
    assert!(same.duplicate);
    let mut other = Envelope::clone(&old.envelope);
    other.payload = json!({ "text": "y" });
    assert!(matches!(
        store.admit(other).await,
        Err(BusError::Conflict { .. })
    ));
    drop(store);
    // Moved for good: the old tree is empty and a reopen still finds it.
    let db = sled_when_released(dir.path());
    assert_eq!(db.open_tree("bus.tasks").unwrap().len(), 0);
    drop(db);
    let store = open_when_released(dir.path());
    assert!(store.lookup(&old.request_id).await.unwrap().is_some());
}

#[tokio::test]
async fn a_record_as_the_previous_version_wrote_it_is_read_and_rewritten_in_the_same_format() {
    let dir = tempfile::tempdir().unwrap();
    let payload = json!({ "text": "x" });
    let env = Envelope::task(
        Topic::parse("agent.a").unwrap(),
        RequestId::parse("r/old").unwrap(),
        payload.clone(),
    )
    .header("session", "s");
    let old = TaskRecord {
        task_id: env.id,
        request_id: env.request_id.clone(),
        state: TaskState::Queued,
        attempts: 0,
        envelope: env.into(),
        outcome: None,
        created_ms: store::T0,
        updated_ms: store::T0,
        seq: 1,
        progress: None,
        fingerprint: Some(bus::store::fingerprint(&payload).into()),
    };
    // An earlier version's format: the record's JSON under its store key alone.
    let key = old.request_id.store_key();
    let db = sled::open(dir.path()).unwrap();
    let records = db.open_tree("bus.task_records").unwrap();
    records
        .insert(key.as_bytes(), serde_json::to_vec(&old).unwrap())
        .unwrap();
    db.open_tree("bus.task_ids")
        .unwrap()
        .insert(old.task_id.as_bytes(), old.request_id.as_str().as_bytes())
        .unwrap();
    db.flush().unwrap();
    drop((records, db));
    let store = open_when_released(dir.path());
    assert_eq!(
        store.lookup(&old.request_id).await.unwrap(),
        Some(old.clone())
    );
    assert!(store.start(&old.request_id, 1).await.unwrap().is_some());
    let result = json!({ "text": "done" });
    let done = store
        .complete(&old.request_id, bus::Outcome::Succeeded { result })
        .await
        .unwrap()
        .task;
    assert_eq!(
        store.by_task_id(old.task_id).await.unwrap(),
        Some(done.clone())
    );
    drop(store);
    // Moved to its key in this version's tree (the old one is empty), and written back in the
    // same format: the record's JSON, byte for byte.
    let db = sled_when_released(dir.path());
    let names = db.tree_names();
    assert!(
        !names.iter().any(|n| n.as_ref() == b"bus.task_records"),
        "the emptied tree went: {names:?}"
    );
    let stored = db.open_tree(RECORDS).unwrap();
    assert_eq!(stored.len(), 1);
    let (moved_key, bytes) = stored.iter().next().unwrap().unwrap();
    assert!(
        moved_key.ends_with(key.as_bytes()),
        "keyed by its bits, then its store key"
    );
    assert_eq!(moved_key.len(), key.len() + 8);
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&serde_json::to_vec(&done).unwrap())
    );
    assert_eq!(serde_json::from_slice::<TaskRecord>(&bytes).unwrap(), done);
}

/// This version's tree of records.
const RECORDS: &str = "bus.task_records.2";

/// A move of earlier records that stopped before removing them (a crash half-way) is finished by
/// the next open: each record once, none lost, and its old task id still found.
#[tokio::test]
async fn a_move_of_earlier_records_cut_half_way_is_finished_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let old = write_legacy(dir.path(), "half/way", json!({ "text": "x" }));
    let store = open_when_released(dir.path());
    assert!(store.lookup(&old.request_id).await.unwrap().is_some());
    drop(store);
    // The move's removal of the old entry did not reach the disk; the entry is there again.
    let db = sled_when_released(dir.path());
    let moved = db.open_tree(RECORDS).unwrap();
    let (_, bytes) = moved.iter().next().unwrap().unwrap();
    db.open_tree("bus.tasks")
        .unwrap()
        .insert(old.request_id.as_str().as_bytes(), bytes)
        .unwrap();
    db.flush().unwrap();
    drop((moved, db));
    let store = open_when_released(dir.path());
    let all = store.list().await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0], old);
    let by_id = store.by_task_id(old.task_id).await.unwrap();
    assert_eq!(by_id, Some(old), "found by its index");
    drop(store);
    let db = sled_when_released(dir.path());
    assert_eq!(db.open_tree("bus.tasks").unwrap().len(), 0);
}

/// A task id minted for its request id finds its record with no index entry, across a reopen;
/// one that does not carry its request id's bits (made by hand, or for another request id) gets
/// an index entry, is found by it, and the entry goes with the record when it is purged.
#[tokio::test]
async fn a_task_id_is_found_with_an_index_entry_only_when_it_does_not_name_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(store::T0);
    let db = sled::open(dir.path()).unwrap();
    let store = SledTaskStore::with_db(db.clone(), clock.clone(), store::WINDOW).unwrap();
    let task_ids = db.open_tree("bus.task_ids").unwrap();
    let minted = store.admit(task("minted", "a")).await.unwrap().task;
    assert_eq!(task_ids.len(), 0, "no index entry for a minted id");
    let mut by_hand = task("by-hand", "b");
    by_hand.id = uuid::Uuid::new_v4();
    let by_hand = store.admit(by_hand).await.unwrap().task;
    let mut moved = task("made-for-another", "c");
    moved.request_id = RequestId::parse("given-another").unwrap();
    let moved = store.admit(moved).await.unwrap().task;
    assert_eq!(
        task_ids.len(),
        2,
        "one entry for each id that names no record"
    );
    for t in [&minted, &by_hand, &moved] {
        let found = store.by_task_id(t.task_id).await.unwrap();
        assert_eq!(found.as_ref(), Some(t));
    }
    assert_eq!(store.by_task_id(uuid::Uuid::now_v7()).await.unwrap(), None);
    drop(store);
    let store = SledTaskStore::with_db(db.clone(), clock.clone(), store::WINDOW).unwrap();
    for t in [&minted, &by_hand, &moved] {
        let found = store.by_task_id(t.task_id).await.unwrap();
        assert_eq!(found.map(|r| r.request_id), Some(t.request_id.clone()));
        store.start(&t.request_id, 1).await.unwrap().unwrap();
        store
            .complete(&t.request_id, succeeded("ok"))
            .await
            .unwrap();
    }
    clock.advance(store::WINDOW + std::time::Duration::from_secs(1));
    assert_eq!(store.purge_expired().unwrap(), 3);
    assert_eq!(task_ids.len(), 0, "the entries went with their records");
    for t in [&minted, &by_hand, &moved] {
        assert_eq!(store.by_task_id(t.task_id).await.unwrap(), None);
    }
}

#[test]
fn store_keys_use_only_the_restricted_alphabet_and_are_injective() {
    let ids = ["x/y:z*>+?#%", "x_2Fy", "x.y", "x_2Ey", "A-z/09", "~", "_7E"];
    let keys: Vec<String> = ids
        .iter()
        .map(|r| RequestId::parse(r).unwrap().store_key().into_owned())
        .collect();
    for k in &keys {
        assert!(
            k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-/_".contains(c)),
            "{k:?}"
        );
    }
    let unique: std::collections::HashSet<_> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len(), "{keys:?}");
    assert_eq!(RequestId::parse("A-z/09").unwrap().store_key(), "A-z/09");
    assert_eq!(RequestId::parse("x.y").unwrap().store_key(), "x_2Ey");
}

/// Opens the store once sled has let go of the database the legacy writer used: sled releases
/// its file lock from a background thread shortly after the last handle is dropped.
fn open_when_released(dir: &std::path::Path) -> SledTaskStore {
    crash::when_released(|| SledTaskStore::open(dir, ManualClock::new(store::T0), store::WINDOW))
}

/// The raw database, once its last user has let go of it.
fn sled_when_released(dir: &std::path::Path) -> sled::Db {
    crash::when_released(|| sled::open(dir))
}

fn task(request_id: &str, text: &str) -> Envelope {
    Envelope::task(
        Topic::parse("agent.a").unwrap(),
        RequestId::parse(request_id).unwrap(),
        json!({ "text": text }),
    )
}

/// A full disk, injected: the flush after an admission fails, so the client is told the task
/// was not admitted, although its record reaches the disk later. The next open must not run it.
#[tokio::test]
async fn an_admission_answered_as_failed_never_runs_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let journal = dir.path().join("refused-admissions");
    let clock = ManualClock::new(store::T0);
    let fault = bus::commit::FlushFault::new();
    let extras = || bus::StoreExtras {
        refusals: Some(journal.clone()),
        fault: Some(fault.clone()),
        journal: None,
    };
    let db = sled::open(&db_dir).unwrap();
    let store =
        SledTaskStore::with_extras(db.clone(), clock.clone(), store::WINDOW, extras()).unwrap();
    let kept = store.admit(task("kept", "a")).await.unwrap().task;
    let failed = store.admit(task("failed-before", "c")).await.unwrap().task;
    store.start(&failed.request_id, 1).await.unwrap();
    store
        .complete(
            &failed.request_id,
            bus::Outcome::Failed {
                error: "boom".into(),
            },
        )
        .await
        .unwrap();

    fault.set(true);
    let refused_env = task("refused", "b");
    let refused = store.admit(refused_env.clone()).await;
    assert!(
        matches!(refused, Err(BusError::Storage { .. })),
        "{refused:?}"
    );
    let retry_env = task("failed-before", "c");
    let retry = store.admit(retry_env.clone()).await;
    assert!(matches!(retry, Err(BusError::Storage { .. })), "{retry:?}");
    fault.set(false);
    db.flush().unwrap();
    drop(store);
    drop(db);

    // Both writes were undone in memory, but a crash can come before that reaches the disk while
    // what the failing flush held does (a partial write): written here as it would stand, with
    // the same task ids, through a store that keeps no journal.
    let plain = open_when_released(&db_dir);
    assert!(
        plain
            .lookup(&refused_env.request_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!plain.admit(refused_env).await.unwrap().duplicate);
    assert!(!plain.admit(retry_env).await.unwrap().duplicate);
    let on_disk = plain.lookup(&RequestId::parse("refused").unwrap()).await;
    assert_eq!(on_disk.unwrap().map(|r| r.state), Some(TaskState::Queued));
    drop(plain);

    let db = sled_when_released(&db_dir);
    let store = SledTaskStore::with_extras(db, clock.clone(), store::WINDOW, extras()).unwrap();
    let unfinished: Vec<_> = store
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(
        unfinished,
        vec!["kept".to_string()],
        "only the admitted task runs"
    );
    let refused_id = RequestId::parse("refused").unwrap();
    assert!(store.lookup(&refused_id).await.unwrap().is_none());
    assert_eq!(
        store
            .lookup(&failed.request_id)
            .await
            .unwrap()
            .map(|r| r.state),
        Some(TaskState::Failed),
        "a refused retry of a task that ran ends it again, retryable by a repost"
    );
    // Posted again, it is a new task; the journal was emptied, so it stays.
    let again = store.admit(task("refused", "b")).await.unwrap();
    assert!(!again.duplicate);
    assert_ne!(again.task.task_id, kept.task_id);
    drop(store);
    let db = sled_when_released(&db_dir);
    let store = SledTaskStore::with_extras(db, clock, store::WINDOW, extras()).unwrap();
    assert!(store.lookup(&refused_id).await.unwrap().is_some());
}

/// A store whose flushes fail while `fault` is on.
fn faulty_store(
    dir: &Path,
    clock: Arc<ManualClock>,
) -> (SledTaskStore, Arc<bus::commit::FlushFault>) {
    let fault = bus::commit::FlushFault::new();
    let extras = bus::StoreExtras {
        refusals: Some(dir.join("refused-admissions")),
        fault: Some(fault.clone()),
        journal: None,
    };
    let db = sled_when_released(&dir.join("db"));
    let store = SledTaskStore::with_extras(db, clock, store::WINDOW, extras).unwrap();
    (store, fault)
}

/// An admission answered as failed is undone in this process too: posted again once the disk
/// is back, it is a new admission (to be run), not a duplicate of a record nothing will run.
#[tokio::test]
async fn a_refused_admission_is_undone_and_a_repost_is_admitted_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let (store, fault) = faulty_store(dir.path(), ManualClock::new(store::T0));
    fault.set(true);
    let refused = store.admit(task("r", "a")).await;
    assert!(
        matches!(refused, Err(BusError::Storage { .. })),
        "{refused:?}"
    );
    let id = RequestId::parse("r").unwrap();
    assert!(store.lookup(&id).await.unwrap().is_none(), "undone");
    assert!(store.attach(&task("r", "a")).await.unwrap().is_none());
    fault.set(false);
    let again = store.admit(task("r", "a")).await.unwrap();
    assert!(!again.duplicate, "a new admission, not a duplicate");
    assert_eq!(again.task.state, TaskState::Queued);
    // Its duplicate now answers it.
    assert!(store.admit(task("r", "a")).await.unwrap().duplicate);
}

/// A refused retry of an ended task leaves it ended (retryable again), and a failed flush of an
/// outcome leaves the task running: the repost, and the outcome recorded again, both take.
#[tokio::test]
async fn writes_whose_flush_failed_are_undone_and_done_again_by_their_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (store, fault) = faulty_store(dir.path(), ManualClock::new(store::T0));
    let id = RequestId::parse("r").unwrap();
    store.admit(task("r", "a")).await.unwrap();
    store.start(&id, 1).await.unwrap();
    let failed = bus::Outcome::Failed {
        error: "boom".into(),
    };
    assert!(store.complete(&id, failed).await.unwrap().recorded);

    fault.set(true);
    assert!(store.admit(task("r", "a")).await.is_err());
    let now = store.lookup(&id).await.unwrap().unwrap();
    assert_eq!(now.state, TaskState::Failed, "the refused retry is undone");
    fault.set(false);
    let retried = store.admit(task("r", "a")).await.unwrap();
    assert!(!retried.duplicate);
    assert_eq!(retried.task.state, TaskState::Queued);

    store.start(&id, 2).await.unwrap();
    fault.set(true);
    let ok = bus::Outcome::Succeeded {
        result: json!("done"),
    };
    assert!(store.complete(&id, ok.clone()).await.is_err());
    let now = store.lookup(&id).await.unwrap().unwrap();
    assert_eq!(now.state, TaskState::Running, "the outcome is undone");
    // Asked again while the disk still fails: an error, not "ended already".
    assert!(store.complete(&id, ok.clone()).await.is_err());
    fault.set(false);
    let done = store.complete(&id, ok).await.unwrap();
    assert!(done.recorded, "recorded by the retry");
    assert_eq!(done.task.state, TaskState::Succeeded);
}

/// A refused retry of a task that ended before it ever started (no attempt recorded) ends again
/// at the next open: it is not taken for a new task and removed.
#[tokio::test]
async fn a_refused_retry_of_a_task_that_never_started_ends_again_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(store::T0);
    let (store, fault) = faulty_store(dir.path(), clock.clone());
    let env = task("never-started", "a");
    store.admit(env.clone()).await.unwrap();
    let failed = bus::Outcome::Failed {
        error: "refused before it ran".into(),
    };
    store.complete(&env.request_id, failed).await.unwrap();
    fault.set(true);
    assert!(store.admit(env.clone()).await.is_err());
    fault.set(false);
    drop(store);
    // A crash before the undo reached the disk, the retry's write there: as a plain store
    // writes it.
    let db_dir = dir.path().join("db");
    let plain = open_when_released(&db_dir);
    let retried = plain.admit(env.clone()).await.unwrap();
    assert_eq!(
        (retried.task.state, retried.task.attempts),
        (TaskState::Queued, 0)
    );
    drop(plain);
    let (store, _) = faulty_store(dir.path(), clock);
    let now = store.lookup(&env.request_id).await.unwrap();
    assert_eq!(
        now.map(|r| r.state),
        Some(TaskState::Failed),
        "ended again, still answered for its request id"
    );
}

/// A lone admission under no load is flushed at once: one flush for its one commit, and nothing
/// waits on the clock, which never moves. (The real-time bound only turns a hang into a failure.)
#[tokio::test]
async fn a_lone_admission_is_flushed_at_once_not_held_for_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(store::T0);
    let store = SledTaskStore::open(dir.path(), clock.clone(), store::WINDOW).unwrap();
    let admitted = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        store.admit(task("lone", "hello")),
    )
    .await
    .expect("a lone admission must not wait for a batch or for the clock")
    .unwrap();
    assert!(!admitted.duplicate);
    let one = bus::commit::CommitStats {
        flushes: 1,
        commits: 1,
    };
    assert_eq!(store.commit_stats(), one, "its own flush, at once");
    assert_eq!(clock.due_timers(), 0, "nothing waits on the clock");
    assert_eq!(clock.now_ms(), store::T0);
    // A second lone admission gets a flush of its own too.
    store.admit(task("lone-2", "hello")).await.unwrap();
    assert_eq!(store.commit_stats().flushes, 2);
}

/// Acknowledged means on disk under group commit: a child process admits tasks from 64
/// concurrent writers and prints each acknowledgement; it is killed with SIGKILL (no destructor,
/// no last flush) right after the 400th. Opened again, the store has every acknowledged task,
/// found by its request id and by its task id, and admitting one again is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_admission_survives_a_sigkill_under_group_commit() {
    if let Some(dir) = crash::child_dir() {
        return admit_until_killed(&dir).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let acked = crash::acknowledged_until_killed(
        "every_acknowledged_admission_survives_a_sigkill_under_group_commit",
        dir.path(),
        |text| {
            let (id, task_id) = text.split_once(' ')?;
            Some((id.to_string(), task_id.to_string()))
        },
    );
    let store = open_when_released(dir.path());
    for (id, task_id) in &acked {
        let rid = RequestId::parse(id).unwrap();
        let record = store.lookup(&rid).await.unwrap();
        assert!(record.is_some(), "acknowledged {id} is on disk");
        let by_id = store.by_task_id(task_id.parse().unwrap()).await.unwrap();
        assert_eq!(by_id, record, "{id} is found by its task id {task_id}");
        let again = store.admit(task(id, id)).await.unwrap();
        assert!(again.duplicate, "{id} again is a duplicate");
    }
}

/// The child: admits from many writers at once and prints each acknowledgement as soon as
/// `admit` returns, until it is killed (or, bounded, after 1,000 admissions per writer).
async fn admit_until_killed(dir: &Path) {
    let clock = ManualClock::new(store::T0);
    let store = Arc::new(SledTaskStore::open(dir, clock, store::WINDOW).unwrap());
    let writers: Vec<_> = (0..crash::WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 0..1_000 {
                    let id = format!("crash-{w}-{n}");
                    let admitted = store.admit(task(&id, &id)).await.unwrap();
                    assert!(!admitted.duplicate);
                    crash::say_acked(&format!("{id} {}", admitted.task.task_id));
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
}

fn succeeded(text: &str) -> bus::Outcome {
    bus::Outcome::Succeeded {
        result: json!(text),
    }
}

/// Two stores on one database in a fresh folder (kept alive with it), each with its own kept
/// records.
fn two_handles() -> (tempfile::TempDir, sled::Db, SledTaskStore, SledTaskStore) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    let clock = ManualClock::new(store::T0);
    let one = SledTaskStore::with_db(db.clone(), clock.clone(), store::WINDOW).unwrap();
    let other = SledTaskStore::with_db(db.clone(), clock, store::WINDOW).unwrap();
    (dir, db, one, other)
}

/// Two stores on one database: each writes from the bytes it last saw without reading them
/// again, so a change made through the other must still be seen, not overwritten.
#[tokio::test]
async fn a_record_changed_through_another_handle_is_seen_by_the_next_update() {
    let (_dir, _db, one, other) = two_handles();
    let env = task("behind-its-back", "x");
    let id = env.request_id.clone();
    one.admit(env).await.unwrap();
    // Started through the other handle (attempt 3): `one` still keeps the queued record.
    other.start(&id, 3).await.unwrap().unwrap();
    let done = one.complete(&id, succeeded("ok")).await.unwrap();
    assert!(done.recorded);
    assert_eq!(done.task.attempts, 3, "the other handle's start is kept");
    assert_eq!(done.task.state, TaskState::Succeeded);
    // Ended through the other handle: a start through `one` (which kept it running) changes
    // nothing, and a second outcome is not recorded over the first.
    let env = task("ended-elsewhere", "y");
    let id = env.request_id.clone();
    one.admit(env).await.unwrap();
    one.start(&id, 1).await.unwrap().unwrap();
    let failed = bus::Outcome::Failed {
        error: "elsewhere".into(),
    };
    other.complete(&id, failed.clone()).await.unwrap();
    assert_eq!(one.start(&id, 2).await.unwrap(), None);
    let again = one.complete(&id, succeeded("late")).await.unwrap();
    assert!(!again.recorded);
    assert_eq!(again.task.outcome, Some(failed));
    assert_eq!(one.lookup(&id).await.unwrap().unwrap().attempts, 1);
    // Retried through the other handle (a failed task posted again): `one` last saw it ended,
    // yet its start now runs it.
    let retried = other.admit(task("ended-elsewhere", "y")).await.unwrap();
    assert!(!retried.duplicate);
    let started = one.start(&id, 2).await.unwrap().expect("the retry starts");
    assert_eq!(started.state, TaskState::Running);
    assert_eq!(started.attempts, 2);
}

/// A store that has not seen a request id lately swaps a new record in without reading first;
/// when the request id is there after all (admitted through another handle, or before a
/// reopen), the admission is still a duplicate and leaves no trace of its own task id.
#[tokio::test]
async fn a_duplicate_the_store_has_not_seen_lately_is_still_a_duplicate_and_leaves_no_trace() {
    let (_dir, db, one, other) = two_handles();
    let first = one.admit(task("seen-elsewhere", "x")).await.unwrap();
    assert!(!first.duplicate);
    let again = task("seen-elsewhere", "x");
    let again_id = again.id;
    let answer = other.admit(again).await.unwrap();
    assert!(answer.duplicate);
    assert_eq!(answer.task.task_id, first.task.task_id);
    assert_eq!(other.by_task_id(again_id).await.unwrap(), None);
    let task_ids = db.open_tree("bus.task_ids").unwrap();
    assert_eq!(task_ids.len(), 0, "minted task ids need no index entry");
    // Other work under the same request id is a conflict, as when the store had read it.
    let conflict = other.admit(task("seen-elsewhere", "other work")).await;
    assert!(
        matches!(conflict, Err(BusError::Conflict { .. })),
        "{conflict:?}"
    );
    assert_eq!(task_ids.len(), 0);
    // With task ids that need index entries, the losing try's entry goes.
    let mut first = task("by-hand", "x");
    first.id = uuid::Uuid::new_v4();
    one.admit(first).await.unwrap();
    let mut again = task("by-hand", "x");
    again.id = uuid::Uuid::new_v4();
    let again_id = again.id;
    assert!(other.admit(again).await.unwrap().duplicate);
    assert_eq!(other.by_task_id(again_id).await.unwrap(), None);
    assert_eq!(task_ids.len(), 1, "the losing try's task id went");
}
