//! The dedup ledger and task journal: one sled record per request id.
//!
//! First sight of a request id journals the task (durably, before the caller is answered); a
//! request id still in flight or finished inside the window is answered from the record. A record
//! leaves the ledger only when it is terminal and older than the window.

use crate::clock::Clock;
use crate::commit::Committer;
use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::task::{Admission, Outcome, TaskRecord, TaskState};
use dashmap::DashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use uuid::Uuid;

/// The default dedup window for tasks: 24 hours.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// How often expired records are purged at most (less often when the window is shorter).
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Durable task records keyed by request id, with waiters for their terminal outcome.
pub struct Ledger {
    db: sled::Db,
    tasks: sled::Tree,
    task_ids: sled::Tree,
    committer: Committer,
    clock: Arc<dyn Clock>,
    window: Duration,
    watchers: DashMap<RequestId, watch::Sender<TaskState>>,
    /// Clock time (Unix ms) after which the next admission purges expired records first.
    next_purge_ms: AtomicU64,
}

impl Ledger {
    /// Opens (or creates) the ledger in the sled database at `dir`.
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
        let tasks = db
            .open_tree("bus.tasks")
            .map_err(|e| BusError::storage("open tree bus.tasks", e))?;
        let task_ids = db
            .open_tree("bus.task_ids")
            .map_err(|e| BusError::storage("open tree bus.task_ids", e))?;
        let ledger = Self {
            db: db.clone(),
            tasks,
            task_ids,
            committer: Committer::start(db)?,
            clock,
            window,
            watchers: DashMap::new(),
            next_purge_ms: AtomicU64::new(0),
        };
        ledger.next_purge_ms.store(
            ledger.clock.now_ms() + ledger.purge_every_ms(),
            Ordering::SeqCst,
        );
        let purged = ledger.purge_expired()?;
        if purged > 0 {
            tracing::info!(purged, "Expired ledger records removed.");
        }
        Ok(ledger)
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
            Ok(purged) => tracing::info!(purged, "Expired ledger records removed."),
            Err(e) => {
                tracing::warn!(error = %e, "Purge of expired ledger records failed; retried later.")
            }
        }
    }

    /// The dedup window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Admits `env` as a new task, or answers the existing record for its request id.
    ///
    /// Returns only after the record is durable, so an acknowledged task survives a crash.
    pub async fn admit(&self, env: Envelope) -> Result<Admission, BusError> {
        self.purge_if_due();
        let key = env.request_id.as_str().as_bytes().to_vec();
        loop {
            let old = self
                .tasks
                .get(&key)
                .map_err(|e| BusError::storage("read task", e))?;
            let mut replaced = None;
            if let Some(bytes) = &old {
                let existing = decode(bytes)?;
                if !self.expired(&existing) {
                    self.committer.commit().await?;
                    return Ok(Admission {
                        task: existing,
                        duplicate: true,
                    });
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
                envelope: env.clone(),
                outcome: None,
                created_ms: now,
                updated_ms: now,
                seq,
            };
            // The task id first: a crash between the two writes can leave a task id with no
            // record (which `by_task_id` ignores), never a record its task id cannot find.
            let task_id = record.task_id;
            self.task_ids
                .insert(task_id.as_bytes(), key.as_slice())
                .map_err(|e| BusError::storage("write task id", e))?;
            let swapped = self
                .tasks
                .compare_and_swap(&key, old, Some(encode(&record)?))
                .map_err(|e| BusError::storage("write task", e))?;
            match swapped {
                Ok(()) => {
                    // The expired record this one replaced no longer answers for its task id.
                    if let Some(old_id) = replaced.filter(|id| *id != task_id) {
                        self.task_ids
                            .remove(old_id.as_bytes())
                            .map_err(|e| BusError::storage("remove replaced task id", e))?;
                    }
                    self.committer.commit().await?;
                    return Ok(Admission {
                        task: record,
                        duplicate: false,
                    });
                }
                Err(lost) => {
                    // Another admission of this request id won; unless it is this very task,
                    // our task id entry goes.
                    let winner = lost.current.as_deref().map(decode).transpose()?;
                    if winner.is_none_or(|w| w.task_id != task_id) {
                        self.task_ids
                            .remove(task_id.as_bytes())
                            .map_err(|e| BusError::storage("remove task id", e))?;
                    }
                }
            }
        }
    }

    /// Marks a delivery attempt as started. Returns `None` when the task is already terminal.
    pub async fn start_attempt(
        &self,
        request_id: &RequestId,
        attempt: u32,
    ) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, |r| {
            if r.state.is_terminal() {
                return false;
            }
            r.state = TaskState::Running;
            r.attempts = r.attempts.max(attempt);
            true
        })
        .await
    }

    /// Puts a task back to queued after a failed attempt (nack, lost consumer).
    pub async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, |r| {
            if r.state.is_terminal() {
                return false;
            }
            r.state = TaskState::Queued;
            true
        })
        .await
    }

    /// Records the terminal outcome. The first outcome wins; a later one leaves the record as it is.
    pub async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<TaskRecord, BusError> {
        let updated = self
            .update(request_id, |r| {
                if r.state.is_terminal() {
                    return false;
                }
                r.state = outcome.state();
                r.outcome = Some(outcome.clone());
                true
            })
            .await?;
        match updated {
            Some(record) => Ok(record),
            None => self
                .lookup(request_id)?
                .ok_or_else(|| BusError::UnknownTask(request_id.to_string())),
        }
    }

    /// Applies `change` atomically; returns the new record when `change` said it changed something.
    async fn update(
        &self,
        request_id: &RequestId,
        change: impl Fn(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, BusError> {
        let key = request_id.as_str().as_bytes();
        loop {
            let Some(old) = self
                .tasks
                .get(key)
                .map_err(|e| BusError::storage("read task", e))?
            else {
                return Err(BusError::UnknownTask(request_id.to_string()));
            };
            let mut record = decode(&old)?;
            if !change(&mut record) {
                return Ok(None);
            }
            record.updated_ms = self.clock.now_ms();
            let swapped = self
                .tasks
                .compare_and_swap(key, Some(old), Some(encode(&record)?))
                .map_err(|e| BusError::storage("write task", e))?;
            if swapped.is_ok() {
                self.committer.commit().await?;
                self.notify(&record);
                return Ok(Some(record));
            }
        }
    }

    fn notify(&self, record: &TaskRecord) {
        if let Some(tx) = self.watchers.get(&record.request_id) {
            tx.send_replace(record.state);
        }
        if record.state.is_terminal() {
            self.watchers.remove(&record.request_id);
        }
    }

    /// The record for a request id, if the ledger has one inside the window.
    pub fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        let bytes = self
            .tasks
            .get(request_id.as_str().as_bytes())
            .map_err(|e| BusError::storage("read task", e))?;
        match bytes {
            Some(b) => {
                let r = decode(&b)?;
                Ok((!self.expired(&r)).then_some(r))
            }
            None => Ok(None),
        }
    }

    /// The record for a task id.
    pub fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        let key = self
            .task_ids
            .get(task_id.as_bytes())
            .map_err(|e| BusError::storage("read task id", e))?;
        let Some(key) = key else { return Ok(None) };
        let request_id =
            RequestId::parse(&String::from_utf8_lossy(&key)).map_err(BusError::Corrupt)?;
        // The request id may have been admitted again since (a new task), or the record may
        // never have been written (a crash between the two writes of `admit`).
        Ok(self.lookup(&request_id)?.filter(|r| r.task_id == task_id))
    }

    /// How many request ids have a caller waiting on them right now.
    pub fn watched(&self) -> usize {
        self.watchers.len()
    }

    /// Waits until the task for `request_id` is terminal, or `timeout` passes.
    pub async fn wait(
        &self,
        request_id: &RequestId,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut watch = Watch {
            ledger: self,
            request_id,
            rx: None,
        };
        loop {
            let rx = watch.rx.insert(
                self.watchers
                    .entry(request_id.clone())
                    .or_insert_with(|| watch::channel(TaskState::Queued).0)
                    .subscribe(),
            );
            let record = self
                .lookup(request_id)?
                .ok_or_else(|| BusError::UnknownTask(request_id.to_string()))?;
            if record.state.is_terminal() {
                return Ok(record);
            }
            loop {
                match tokio::time::timeout_at(deadline, rx.changed()).await {
                    Err(_) => return Err(BusError::TimedOut { after: timeout }),
                    Ok(Err(_)) => break, // sender gone: the task turned terminal; re-read
                    Ok(Ok(())) if rx.borrow().is_terminal() => break,
                    Ok(Ok(())) => {}
                }
            }
        }
    }

    /// Every task not yet terminal, in admission order: the work to re-queue after a restart.
    pub fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError> {
        let mut out = Vec::new();
        for item in self.tasks.iter() {
            let (_, v) = item.map_err(|e| BusError::storage("scan tasks", e))?;
            let r = decode(&v)?;
            if !r.state.is_terminal() {
                out.push(r);
            }
        }
        out.sort_by_key(|r| (r.seq, r.created_ms));
        Ok(out)
    }

    /// Removes terminal records older than the window. Returns how many went.
    pub fn purge_expired(&self) -> Result<usize, BusError> {
        let mut purged = 0;
        for item in self.tasks.iter() {
            let (k, v) = item.map_err(|e| BusError::storage("scan tasks", e))?;
            let r = decode(&v)?;
            if self.expired(&r) {
                // Only remove the exact record we judged, in case it was re-admitted meanwhile.
                let gone = self
                    .tasks
                    .compare_and_swap(&k, Some(v), None as Option<&[u8]>)
                    .map_err(|e| BusError::storage("purge task", e))?;
                if gone.is_ok() {
                    self.task_ids
                        .remove(r.task_id.as_bytes())
                        .map_err(|e| BusError::storage("purge task id", e))?;
                    purged += 1;
                }
            }
        }
        Ok(purged)
    }

    fn expired(&self, r: &TaskRecord) -> bool {
        r.state.is_terminal()
            && self.clock.now_ms() > r.updated_ms.saturating_add(self.window.as_millis() as u64)
    }
}

/// A caller's subscription to a request id's state; when it ends (answered, timed out, or the
/// wait dropped) the request id's watcher goes too, unless someone else still waits on it.
struct Watch<'a> {
    ledger: &'a Ledger,
    request_id: &'a RequestId,
    rx: Option<watch::Receiver<TaskState>>,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.rx.take();
        self.ledger
            .watchers
            .remove_if(self.request_id, |_, tx| tx.receiver_count() == 0);
    }
}

fn encode(r: &TaskRecord) -> Result<Vec<u8>, BusError> {
    serde_json::to_vec(r).map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

fn decode(bytes: &[u8]) -> Result<TaskRecord, BusError> {
    serde_json::from_slice(bytes).map_err(|e| BusError::Corrupt(format!("decode task record: {e}")))
}
