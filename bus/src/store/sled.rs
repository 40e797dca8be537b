//! The embedded task store: one sled record per request id, flushed by group commit.
//!
//! Records are keyed by the request id's 62 bits ([`task_id::prefix_of`]: time first for the ids
//! the daemon makes, else a hash) and its [`RequestId::store_key`] ([`task_id::record_key`]) in
//! the tree `bus.task_records.2`. A task id minted for its request id
//! carries the same bits, so its record is found by a prefix scan; only a task id that does not
//! (made by an earlier version, or by hand) is written to the index `bus.task_ids`, task id to
//! request id. Records of earlier versions are moved over when the store opens: keyed by the raw
//! request id in `bus.tasks`, or by the store key alone in `bus.task_records`.

use super::decoded::Decoded;
use super::journal::{self, Journal};
use super::record_bytes::{decode, encode};
use super::records::Records;
use super::refusals::{Refusal, RefusalJournal};
use super::{Completion, TaskStore, end_with, fingerprint, reuse};
use crate::clock::Clock;
use crate::commit::{CommitStats, Committer, FlushFault};
use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::task::{Admission, Outcome, TaskRecord, TaskState};
use crate::task_id;
use async_trait::async_trait;
use sled::IVec;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// How often expired records are purged at most (less often when the window is shorter).
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// The tree of records keyed by the raw request id, written by earlier versions.
const LEGACY_TREE: &str = "bus.tasks";
/// The tree of records keyed by [`RequestId::store_key`] alone, written by earlier versions.
const STORE_KEY_TREE: &str = "bus.task_records";
/// The tree of records keyed by [`task_id::record_key`].
const RECORDS_TREE: &str = "bus.task_records.2";
/// The tree mapping task ids that do not carry their request id's bits to request ids.
const TASK_IDS_TREE: &str = "bus.task_ids";

/// A record an update wrote: the record, its bytes, and the bytes they replaced.
struct Written {
    record: TaskRecord,
    new: IVec,
    old: IVec,
}

/// Task records in sled.
pub struct SledTaskStore {
    db: sled::Db,
    /// The records and the task-id index: in the task journal, or in trees of `db`.
    records: Records,
    committer: Committer,
    clock: Arc<dyn Clock>,
    window: Duration,
    /// Clock time (Unix ms) after which the next admission purges expired records first.
    next_purge_ms: AtomicU64,
    /// Admissions answered as failed whose record may be on disk; `None`: not kept (a refused
    /// admission whose record reached the disk could then run after a restart).
    refusals: Option<RefusalJournal>,
    /// The records last written or read, beside their bytes: a read of unchanged bytes is a clone.
    decoded: Decoded,
    /// Outcomes asked by `complete`, not `complete_announced` (see
    /// [`TaskStore::unannounced_outcomes`]).
    unannounced_outcomes: AtomicU64,
}

/// What a store may have beyond its database.
#[derive(Default, Clone)]
pub struct StoreExtras {
    /// The refusal journal's file (see [`RefusalJournal`]); the daemon keeps it in the state
    /// folder.
    pub refusals: Option<PathBuf>,
    /// A flush fault for tests.
    pub fault: Option<Arc<FlushFault>>,
    /// The task journal's file, where the records go instead of trees of the database (records
    /// an earlier run left in the database are moved there when the store opens). The daemon
    /// keeps it in the state folder.
    pub journal: Option<PathBuf>,
}

impl SledTaskStore {
    /// Opens (or creates) the store in the sled database at `dir`.
    pub fn open(dir: &Path, clock: Arc<dyn Clock>, window: Duration) -> Result<Self, BusError> {
        let db =
            sled::open(dir).map_err(|e| BusError::storage(format!("open {}", dir.display()), e))?;
        Self::with_db(db, clock, window)
    }

    /// Uses an already open sled database (shared with other stores of the process).
    pub fn with_db(
        db: sled::Db,
        clock: Arc<dyn Clock>,
        window: Duration,
    ) -> Result<Self, BusError> {
        Self::with_extras(db, clock, window, StoreExtras::default())
    }

    /// Uses an already open sled database, with a refusal journal (whose entries from an
    /// earlier run are applied first: those records are removed) and a flush fault.
    pub fn with_extras(
        db: sled::Db,
        clock: Arc<dyn Clock>,
        window: Duration,
        extras: StoreExtras,
    ) -> Result<Self, BusError> {
        let records = match &extras.journal {
            Some(path) => {
                let journal = Journal::open(path, journal::DEFAULT_CACHE_BYTES).map_err(|e| {
                    BusError::storage(format!("open task journal {}", path.display()), e)
                })?;
                Records::Journal(Arc::new(journal))
            }
            None => Records::Sled {
                db: db.clone(),
                tasks: db
                    .open_tree(RECORDS_TREE)
                    .map_err(|e| BusError::storage("open tree of task records", e))?,
                task_ids: db
                    .open_tree(TASK_IDS_TREE)
                    .map_err(|e| BusError::storage("open tree of task ids", e))?,
            },
        };
        let committer = Committer::start_flushing(records.flusher(&db), extras.fault)?;
        let store = Self {
            db,
            records,
            committer,
            clock,
            window,
            next_purge_ms: AtomicU64::new(0),
            refusals: None,
            decoded: Decoded::default(),
            unannounced_outcomes: AtomicU64::new(0),
        };
        store.migrate(LEGACY_TREE)?;
        store.migrate(STORE_KEY_TREE)?;
        if matches!(store.records, Records::Journal(_)) {
            store.migrate(RECORDS_TREE)?;
            store.migrate_task_ids()?;
        }
        let store = match &extras.refusals {
            Some(path) => store.with_refusals(path)?,
            None => store,
        };
        store.next_purge_ms.store(
            store.clock.now_ms() + store.purge_every_ms(),
            Ordering::SeqCst,
        );
        let purged = store.purge_expired()?;
        if purged > 0 {
            tracing::info!(purged, "Expired task records removed.");
        }
        Ok(store)
    }

    /// Moves the records of an earlier version's tree `name` to their keys in this one. Their
    /// task ids keep their index entries (those ids carry no request id's bits). A crash half-way
    /// is fine: the next open finishes the move, and a record already moved is not written again.
    fn migrate(&self, name: &str) -> Result<(), BusError> {
        let Some(old) = self.earlier_tree(name)? else {
            return Ok(());
        };
        let mut moved = 0usize;
        for item in old.iter() {
            let (_, v) = item.map_err(|e| BusError::storage(format!("scan {name}"), e))?;
            let record =
                decode(&v).map_err(|e| BusError::Corrupt(format!("task record in {name}: {e}")))?;
            let key = task_id::record_key(&record.request_id);
            // Present already when an earlier move stopped before the old tree was dropped.
            self.records
                .swap(&key, None, Some(v), "move task record")?
                .ok();
            moved += 1;
        }
        // Durable where they went before the old tree goes.
        self.records.flush("flush moved task records")?;
        if moved > 0 {
            tracing::info!(moved, from = name, "Task records moved to their keys.");
        }
        self.drop_moved(name, old)
    }

    /// The database's tree `name`, when it has one (an earlier version's, to move).
    fn earlier_tree(&self, name: &str) -> Result<Option<sled::Tree>, BusError> {
        let names = self.db.tree_names();
        if !names.iter().any(|n| n.as_ref() == name.as_bytes()) {
            return Ok(None);
        }
        let tree = self
            .db
            .open_tree(name)
            .map_err(|e| BusError::storage(format!("open earlier tree {name}"), e))?;
        Ok(Some(tree))
    }

    /// Drops tree `name`, whose entries were moved and made durable where they went.
    fn drop_moved(&self, name: &str, tree: sled::Tree) -> Result<(), BusError> {
        drop(tree);
        self.db
            .drop_tree(name)
            .map_err(|e| BusError::storage(format!("drop moved tree {name}"), e))?;
        crate::commit::flush(&self.db)
            .map_err(|e| BusError::storage(format!("flush dropped tree {name}"), e))?;
        Ok(())
    }

    /// Moves the task-id index of the database's tree into the journal (as [`Self::migrate`]
    /// moves records).
    fn migrate_task_ids(&self) -> Result<(), BusError> {
        let Some(old) = self.earlier_tree(TASK_IDS_TREE)? else {
            return Ok(());
        };
        for item in old.iter() {
            let (k, v) = item.map_err(|e| BusError::storage("scan tree of task ids", e))?;
            self.records.index(&k, Some(&v))?;
        }
        self.records.flush("flush moved task ids")?;
        self.drop_moved(TASK_IDS_TREE, old)
    }

    /// Removes `record`'s task-id index entry, when its task id needed one.
    fn forget_task_id(&self, task_id: Uuid, request_id: &RequestId) -> Result<(), BusError> {
        if task_id::carries(task_id, &task_id::prefix_of(request_id)) {
            return Ok(());
        }
        self.records.index(task_id.as_bytes(), None)
    }

    /// Opens the refusal journal at `path`, removes the records it names that never ended
    /// (admissions answered as failed), flushes, and empties it.
    fn with_refusals(mut self, path: &Path) -> Result<Self, BusError> {
        let what = format!("open refusal journal {}", path.display());
        let (journal, refused) =
            RefusalJournal::open(path).map_err(|e| BusError::storage(what, e))?;
        if !refused.is_empty() {
            let mut removed = 0usize;
            self.records.for_each(|k, v| {
                let r = decode(&v)?;
                let Some(refusal) = refused.iter().find(|x| x.task_id == r.task_id) else {
                    return Ok(());
                };
                if r.state.is_terminal() {
                    return Ok(());
                }
                if !refusal.retry && r.attempts == 0 {
                    // A new task: rolled back, as if never posted.
                    let gone = self
                        .records
                        .swap(&k, Some(v), None, "remove refused task")?;
                    if gone.is_ok() {
                        self.forget_task_id(r.task_id, &r.request_id)?;
                    }
                } else {
                    // A refused retry of a task that had ended: it ends again, retryable by a
                    // repost (an entry from before the retry mark: a task that ran).
                    let mut ended = r.clone();
                    ended.state = TaskState::Failed;
                    ended.outcome = Some(Outcome::Failed {
                        error: "a retry was refused: the store could not write it (post again to retry)".into(),
                    });
                    self.records
                        .swap(&k, Some(v), Some(encode(&ended)?.into()), "end refused retry")?
                        .ok();
                }
                removed += 1;
                tracing::warn!(request_id = %r.request_id, task_id = %r.task_id, "A task answered as not admitted reached the disk; it never runs.");
                Ok(())
            })?;
            self.records.flush("flush removed refused tasks")?;
            journal
                .clear()
                .map_err(|e| BusError::storage("clear refusal journal", e))?;
            tracing::info!(
                refused = refused.len(),
                removed,
                "Refused admissions applied."
            );
        }
        self.refusals = Some(journal);
        Ok(self)
    }

    /// Flushes the admission `refusal` names, written under `key` as `written` over `before`;
    /// when that fails, the refusal goes into the journal first (its record may be on disk in
    /// part), so no later open runs it, and then the write is undone, so no later admission of its
    /// request id in this process finds it (answered as a duplicate, it would never run).
    async fn commit_admission(
        &self,
        refusal: Refusal,
        key: &[u8],
        written: IVec,
        before: Option<IVec>,
    ) -> Result<(), BusError> {
        let Err(e) = self.committer.commit().await else {
            return Ok(());
        };
        let task_id = refusal.task_id;
        match &self.refusals {
            Some(journal) => {
                if let Err(j) = journal.record(refusal) {
                    tracing::error!(%task_id, error = %j, "Refused admission not journaled; it may run after a restart.");
                }
            }
            None => {
                tracing::warn!(%task_id, "Refused admission not journaled (no journal); it may run after a restart.")
            }
        }
        self.roll_back(key, written, before);
        Err(e)
    }

    /// Puts `before` back under `key` where `written` still stands: a write whose flush failed
    /// is undone in memory (and on disk with the next flush). Where the record changed since,
    /// that change stays.
    fn roll_back(&self, key: &[u8], written: IVec, before: Option<IVec>) {
        match self.records.swap(
            key,
            Some(written),
            before,
            "undo a write whose flush failed",
        ) {
            Ok(Ok(())) => {}
            Ok(Err(_)) => tracing::warn!("A write whose flush failed changed since; not undone."),
            Err(e) => tracing::error!(error = %e, "A write whose flush failed was not undone."),
        }
    }

    /// How the flushes so far grouped their commits.
    pub fn commit_stats(&self) -> CommitStats {
        self.committer.stats()
    }

    fn purge_every_ms(&self) -> u64 {
        self.window.min(PURGE_EVERY).as_millis().max(1000) as u64
    }

    /// Purges expired records when the last purge is older than the purge interval, so a
    /// long-running process does not keep every record it ever admitted.
    fn purge_if_due(&self) {
        let now = self.clock.now_ms();
        let due = self.next_purge_ms.load(Ordering::SeqCst);
        if now < due {
            return;
        }
        let next = now + self.purge_every_ms();
        if self
            .next_purge_ms
            .compare_exchange(due, next, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return; // another admission is purging
        }
        match self.purge_expired() {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "Expired task records removed."),
            Err(e) => {
                tracing::warn!(error = %e, "Purge of expired task records failed; retried later.")
            }
        }
    }

    /// The bytes stored under `key`.
    fn stored(&self, key: &[u8]) -> Result<Option<sled::IVec>, BusError> {
        self.records.get(key)
    }

    fn read(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        let key = task_id::record_key(request_id);
        self.stored(&key)?
            .map(|b| self.decoded.read(&key, &b))
            .transpose()
    }

    /// Applies `change` atomically; returns the new record when `change` said it changed something.
    /// `change` never touches the envelope (the write copies the envelope's JSON as read).
    ///
    /// The first try starts from the bytes this store last wrote or read for the key, without
    /// reading them again: the compare-and-swap fails when they are no longer what the store
    /// holds, and answers what it holds, which the next try starts from.
    async fn update(
        &self,
        request_id: &RequestId,
        durable: bool,
        change: impl Fn(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, BusError> {
        let written = self.update_written(request_id, durable, change).await?;
        Ok(written.map(|w| w.record))
    }

    /// [`SledTaskStore::update`], answering the bytes it wrote and the ones they replaced too.
    async fn update_written(
        &self,
        request_id: &RequestId,
        durable: bool,
        change: impl Fn(&mut TaskRecord) -> bool,
    ) -> Result<Option<Written>, BusError> {
        let key = task_id::record_key(request_id);
        let mut known = self.decoded.last(&key);
        let mut current = None;
        loop {
            // Bytes kept from before are not known to be current; bytes just read, or answered
            // by a failed swap, are.
            let verified = known.is_none();
            let (old, mut record, envelope) = match known.take() {
                Some(kept) => kept,
                None => {
                    let read = match current.take() {
                        Some(bytes) => Some(bytes),
                        None => self.stored(&key)?,
                    };
                    let Some(old) = read else {
                        return Err(BusError::UnknownTask(request_id.to_string()));
                    };
                    let (record, envelope) = self.decoded.read_for_update(&key, &old)?;
                    (old, record, envelope)
                }
            };
            if !change(&mut record) {
                if verified {
                    return Ok(None);
                }
                // Judged on kept bytes: confirmed by what the store holds, or judged again on it.
                match self.stored(&key)? {
                    Some(now) if now == old => return Ok(None),
                    Some(now) => {
                        current = Some(now);
                        continue;
                    }
                    None => return Err(BusError::UnknownTask(request_id.to_string())),
                }
            }
            record.updated_ms = self.clock.now_ms();
            let new = self.decoded.encode(&key, &record, envelope)?;
            let swapped =
                self.records
                    .swap(&key, Some(old.clone()), Some(new.clone()), "write task")?;
            match swapped {
                Ok(()) => {
                    if durable && let Err(e) = self.committer.commit().await {
                        // Answered as not done, so it is undone: a retry does it again.
                        self.roll_back(&key, new, Some(old));
                        return Err(e);
                    }
                    return Ok(Some(Written { record, new, old }));
                }
                Err(now) => match now {
                    Some(bytes) => current = Some(bytes),
                    None => return Err(BusError::UnknownTask(request_id.to_string())),
                },
            }
        }
    }

    /// Records `outcome` as the task's end, unless it ended already (see [`TaskStore::complete`]).
    async fn record_outcome(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        loop {
            let updated = self
                .update(request_id, true, |r| end_with(r, &outcome))
                .await?;
            if let Some(task) = updated {
                return Ok(Completion {
                    task,
                    recorded: true,
                });
            }
            // Ended by another write, which may still wait for its flush: answered once the end
            // is on disk, and read after it (had that flush failed, the end was undone: this
            // outcome is recorded instead).
            self.committer.commit().await?;
            let task = self
                .read(request_id)?
                .ok_or_else(|| BusError::UnknownTask(request_id.to_string()))?;
            if task.state.is_terminal() {
                return Ok(Completion {
                    task,
                    recorded: false,
                });
            }
        }
    }

    /// Removes terminal records older than the window. Returns how many went.
    pub fn purge_expired(&self) -> Result<usize, BusError> {
        let mut purged = 0;
        self.records.for_each(|k, v| {
            let r = decode(&v)?;
            if self.expired(&r) {
                // Only remove the exact record we judged, in case it was re-admitted meanwhile.
                let gone = self.records.swap(&k, Some(v), None, "purge task")?;
                if gone.is_ok() {
                    self.forget_task_id(r.task_id, &r.request_id)?;
                    purged += 1;
                }
            }
            Ok(())
        })?;
        Ok(purged)
    }

    fn expired(&self, r: &TaskRecord) -> bool {
        r.state.is_terminal()
            && self.clock.now_ms() > r.updated_ms.saturating_add(self.window.as_millis() as u64)
    }
}

#[async_trait]
impl TaskStore for SledTaskStore {
    fn window(&self) -> Duration {
        self.window
    }

    async fn admit(&self, mut env: Envelope) -> Result<Admission, BusError> {
        self.purge_if_due();
        // Worked out once for the request id: the key's first 8 bytes, and what a task id of it
        // carries.
        let prefix = task_id::prefix_of(&env.request_id);
        let key = task_id::record_key(&env.request_id);
        // A request id this store has not seen lately is most likely new: the first try swaps
        // the record in as absent without reading first (when it is there after all, the swap
        // fails and the next try reads it).
        let mut presumed_new = !self.decoded.knows(&key);
        loop {
            let old = if std::mem::take(&mut presumed_new) {
                None
            } else {
                self.stored(&key)?
            };
            let mut replaced = None;
            if let Some(bytes) = &old {
                let existing = self.decoded.read(&key, bytes)?;
                if !self.expired(&existing) {
                    let answer = reuse(&existing, &env)?;
                    if answer.task.state.is_retryable_end() {
                        // An explicit retry: the same task again, as its next attempt.
                        let retried = self
                            .update_written(&env.request_id, false, |r| {
                                if !r.state.is_retryable_end() {
                                    return false;
                                }
                                r.state = TaskState::Queued;
                                r.outcome = None;
                                r.progress = None;
                                true
                            })
                            .await;
                        let retried = match retried {
                            // Purged since it was judged unexpired (the window passed
                            // meanwhile): judged again, a new task now.
                            Err(BusError::UnknownTask(_)) => continue,
                            other => other?,
                        };
                        if let Some(Written { record, new, old }) = retried {
                            let refusal = Refusal {
                                task_id: record.task_id,
                                retry: true,
                            };
                            self.commit_admission(refusal, &key, new, Some(old)).await?;
                            return Ok(Admission {
                                task: record,
                                duplicate: false,
                            });
                        }
                        continue; // it changed meanwhile: judge it again
                    }
                    // The record may be another admission's, not yet flushed; answered once it
                    // is on disk, unless that flush failed and undid it (then judged again).
                    self.committer.commit().await?;
                    if self.stored(&key)?.as_ref() != Some(bytes) {
                        continue;
                    }
                    return Ok(answer);
                }
                replaced = Some(existing.task_id);
            }
            let seq = self
                .db
                .generate_id()
                .map_err(|e| BusError::storage("generate task sequence number", e))?;
            let now = self.clock.now_ms();
            let record = TaskRecord {
                task_id: env.id,
                request_id: env.request_id.clone(),
                state: TaskState::Queued,
                attempts: 0,
                fingerprint: Some(fingerprint(&env.payload).into()),
                envelope: Arc::new(env),
                outcome: None,
                created_ms: now,
                updated_ms: now,
                seq,
                progress: None,
            };
            // A task id carrying its request id's bits finds its record with no index entry.
            // Else the index entry first: a crash between the two writes can leave a task id
            // with no record (which `by_task_id` ignores), never a record its id cannot find.
            let task_id = record.task_id;
            let indexed = !task_id::carries(task_id, &prefix);
            if indexed {
                self.records.index(
                    task_id.as_bytes(),
                    Some(record.request_id.as_str().as_bytes()),
                )?;
            }
            let new = self.decoded.encode(&key, &record, None)?;
            let swapped = self
                .records
                .swap(&key, old.clone(), Some(new.clone()), "write task")?;
            match swapped {
                Ok(()) => {
                    // The expired record this one replaced no longer answers for its task id.
                    if let Some(old_id) = replaced.filter(|id| *id != task_id) {
                        self.forget_task_id(old_id, &record.request_id)?;
                    }
                    let refusal = Refusal {
                        task_id,
                        retry: false,
                    };
                    if let Err(e) = self.commit_admission(refusal, &key, new, old).await {
                        if indexed {
                            // Its record is gone again; an entry without one is ignored anyway.
                            let _ = self.records.index(task_id.as_bytes(), None);
                        }
                        return Err(e);
                    }
                    return Ok(Admission {
                        task: record,
                        duplicate: false,
                    });
                }
                Err(now) => {
                    // The envelope goes back for the next round (moved, not copied).
                    env = Arc::unwrap_or_clone(record.envelope);
                    // Another admission of this request id won; unless it is this very task,
                    // our task id entry goes.
                    let winner = now.map(|b| self.decoded.read(&key, &b)).transpose()?;
                    if indexed && winner.is_none_or(|w| w.task_id != task_id) {
                        self.records.index(task_id.as_bytes(), None)?;
                    }
                }
            }
        }
    }

    async fn attach(&self, env: &Envelope) -> Result<Option<Admission>, BusError> {
        let Some(existing) = self.lookup(&env.request_id).await? else {
            return Ok(None);
        };
        reuse(&existing, env)?;
        // Answered once the record is on disk, as read after that flush: an admission whose flush
        // failed is undone, and then there is nothing to attach to.
        self.committer.commit().await?;
        let Some(now) = self.lookup(&env.request_id).await? else {
            return Ok(None);
        };
        Ok(Some(reuse(&now, env)?))
    }

    async fn start(
        &self,
        request_id: &RequestId,
        attempt: u32,
    ) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, true, |r| {
            if r.state.is_terminal() {
                return false;
            }
            r.state = TaskState::Running;
            r.attempts = r.attempts.max(attempt);
            r.progress = None;
            true
        })
        .await
    }

    async fn progress(
        &self,
        request_id: &RequestId,
        note: serde_json::Value,
    ) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, false, |r| {
            if r.state != TaskState::Running {
                return false;
            }
            r.progress = Some(note.clone());
            true
        })
        .await
    }

    fn unannounced_outcomes(&self) -> Option<u64> {
        Some(self.unannounced_outcomes.load(Ordering::SeqCst))
    }

    async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        // Counted before anything is written (see `TaskStore::unannounced_outcomes`).
        self.unannounced_outcomes.fetch_add(1, Ordering::SeqCst);
        self.record_outcome(request_id, outcome).await
    }

    async fn complete_announced(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        self.record_outcome(request_id, outcome).await
    }

    async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, true, |r| {
            if r.state.is_terminal() {
                return false;
            }
            r.state = TaskState::Queued;
            true
        })
        .await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        Ok(self.read(request_id)?.filter(|r| !self.expired(r)))
    }

    async fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        // The records whose request id's bits the task id carries (one, but for a collision of
        // 62 bits); then the index, for task ids that carry none.
        if let Some(prefix) = task_id::prefix_in(task_id) {
            for (k, v) in self.records.scan_prefix(&prefix)? {
                let r = self.decoded.read(&k, &v)?;
                if r.task_id == task_id {
                    return Ok(Some(r).filter(|r| !self.expired(r)));
                }
            }
        }
        let value = self.records.indexed(task_id.as_bytes())?;
        let Some(value) = value else { return Ok(None) };
        let request_id = RequestId::parse(&String::from_utf8_lossy(&value))
            .map_err(|e| BusError::Corrupt(e.to_string()))?;
        // The request id may have been admitted again since (a new task), or the record may
        // never have been written (a crash between the two writes of `admit`).
        Ok(self
            .lookup(&request_id)
            .await?
            .filter(|r| r.task_id == task_id))
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError> {
        let mut out = Vec::new();
        self.records.for_each(|_, v| {
            let r = decode(&v)?;
            if !r.state.is_terminal() {
                out.push(r);
            }
            Ok(())
        })?;
        out.sort_by_key(|r| (r.seq, r.created_ms));
        Ok(out)
    }

    async fn list(&self) -> Result<Vec<TaskRecord>, BusError> {
        let mut out = Vec::new();
        self.records.for_each(|_, v| {
            let r = decode(&v)?;
            if !self.expired(&r) {
                out.push(r);
            }
            Ok(())
        })?;
        out.sort_by_key(|r| (r.seq, r.created_ms));
        Ok(out)
    }

    async fn expire(&self) -> Result<usize, BusError> {
        self.purge_expired()
    }
}
