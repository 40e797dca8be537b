//! The task store on JetStream KV: one record per request id, changed by compare-and-set on the
//! key's revision, so every process connected to the bucket sees one history.
//!
//! Records are keyed by [`RequestId::store_key`] in `<prefix>_tasks`; task ids map to request ids
//! in `<prefix>_task_ids`. The revision of that task-id entry is the task's admission order
//! (`seq`): stream sequences only grow. The dedup window is judged on the injected clock, as in
//! the embedded store, so a duplicate outside the stream's own dedup window is still answered
//! from the stored result, on any connection.

use super::Nats;
use crate::clock::Clock;
use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::store::{Completion, TaskStore, end_with, fingerprint, reuse};
use crate::task::{Admission, Outcome, TaskRecord, TaskState};
use async_nats::jetstream::kv;
use async_trait::async_trait;
use futures::TryStreamExt as _;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Task records in JetStream KV.
pub struct NatsTaskStore {
    records: kv::Store,
    task_ids: kv::Store,
    clock: Arc<dyn Clock>,
    window: Duration,
}

/// A record as read, with the revision a write must expect.
struct Read {
    record: TaskRecord,
    revision: u64,
}

impl NatsTaskStore {
    /// Opens (creating when missing) the buckets of `nats`'s prefix.
    pub async fn open(
        nats: &Nats,
        clock: Arc<dyn Clock>,
        window: Duration,
    ) -> Result<Self, BusError> {
        Ok(Self {
            records: nats.bucket("tasks").await?,
            task_ids: nats.bucket("task_ids").await?,
            clock,
            window,
        })
    }

    /// The store's clock.
    pub(super) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The live entry of `key`: `Ok(None)` when absent, `Err(revision)` when deleted (a write
    /// must then expect that revision).
    async fn entry(&self, key: &str) -> Result<Option<Result<Read, u64>>, BusError> {
        let entry = self
            .records
            .entry(key)
            .await
            .map_err(|e| BusError::storage("read task", e))?;
        let Some(entry) = entry else { return Ok(None) };
        if entry.operation != kv::Operation::Put {
            return Ok(Some(Err(entry.revision)));
        }
        let record = decode(&entry.value)?;
        Ok(Some(Ok(Read {
            record,
            revision: entry.revision,
        })))
    }

    fn expired(&self, r: &TaskRecord) -> bool {
        r.state.is_terminal()
            && self.clock.now_ms() > r.updated_ms.saturating_add(self.window.as_millis() as u64)
    }

    /// Writes `record` expecting `revision` (0: the key must not exist). `Ok(false)` when
    /// another writer came first.
    async fn write(&self, key: &str, record: &TaskRecord, revision: u64) -> Result<bool, BusError> {
        let bytes = encode(record)?;
        let written = if revision == 0 {
            self.records
                .create(key, bytes)
                .await
                .map(|_| ())
                .map_err(|e| match e.kind() {
                    kv::CreateErrorKind::AlreadyExists => None,
                    _ => Some(BusError::storage("write task", e)),
                })
        } else {
            self.records
                .update(key, bytes, revision)
                .await
                .map(|_| ())
                .map_err(|e| match e.kind() {
                    kv::UpdateErrorKind::WrongLastRevision => None,
                    _ => Some(BusError::storage("write task", e)),
                })
        };
        match written {
            Ok(()) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(e)) => Err(e),
        }
    }

    /// Applies `change` by compare-and-set; the new record when `change` changed something.
    async fn update(
        &self,
        request_id: &RequestId,
        change: impl Fn(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, BusError> {
        let key = request_id.store_key();
        loop {
            let Some(Ok(read)) = self.entry(&key).await? else {
                return Err(BusError::UnknownTask(request_id.to_string()));
            };
            let mut record = read.record;
            if !change(&mut record) {
                return Ok(None);
            }
            record.updated_ms = self.clock.now_ms();
            if self.write(&key, &record, read.revision).await? {
                return Ok(Some(record));
            }
        }
    }

    async fn forget_task_id(&self, task_id: Uuid) -> Result<(), BusError> {
        self.task_ids
            .purge(task_id.to_string())
            .await
            .map_err(|e| BusError::storage("remove task id", e))
    }

    /// Every live record.
    async fn all(&self) -> Result<Vec<TaskRecord>, BusError> {
        let keys: Vec<String> = self
            .records
            .keys()
            .await
            .map_err(|e| BusError::storage("list tasks", e))?
            .try_collect()
            .await
            .map_err(|e| BusError::storage("list tasks", e))?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(Ok(read)) = self.entry(&key).await? {
                out.push(read.record);
            }
        }
        out.sort_by_key(|r| (r.seq, r.created_ms));
        Ok(out)
    }
}

#[async_trait]
impl TaskStore for NatsTaskStore {
    fn window(&self) -> Duration {
        self.window
    }

    async fn admit(&self, env: Envelope) -> Result<Admission, BusError> {
        let key = env.request_id.store_key();
        loop {
            let mut expect = 0;
            let mut replaced = None;
            match self.entry(&key).await? {
                None => {}
                Some(Err(deleted)) => expect = deleted,
                Some(Ok(read)) => {
                    expect = read.revision;
                    let existing = read.record;
                    if !self.expired(&existing) {
                        let answer = reuse(&existing, &env)?;
                        if !answer.task.state.is_retryable_end() {
                            return Ok(answer);
                        }
                        // An explicit retry: the same task again, as its next attempt.
                        let mut retried = existing;
                        retried.state = TaskState::Queued;
                        retried.outcome = None;
                        retried.progress = None;
                        retried.updated_ms = self.clock.now_ms();
                        if self.write(&key, &retried, read.revision).await? {
                            return Ok(Admission {
                                task: retried,
                                duplicate: false,
                            });
                        }
                        continue; // it changed meanwhile: judge it again
                    }
                    replaced = Some(existing.task_id);
                }
            }
            // The task id first: its revision is the admission order, and a crash between the
            // two writes leaves a task id with no record, never a record its id cannot find.
            let task_id = env.id;
            let seq = self
                .task_ids
                .put(
                    task_id.to_string(),
                    env.request_id.as_str().to_string().into(),
                )
                .await
                .map_err(|e| BusError::storage("write task id", e))?;
            let now = self.clock.now_ms();
            let record = TaskRecord {
                task_id,
                request_id: env.request_id.clone(),
                state: TaskState::Queued,
                attempts: 0,
                fingerprint: Some(fingerprint(&env.payload).into()),
                envelope: Arc::new(env.clone()),
                outcome: None,
                created_ms: now,
                updated_ms: now,
                seq,
                progress: None,
            };
            if self.write(&key, &record, expect).await? {
                if let Some(old) = replaced.filter(|id| *id != task_id) {
                    self.forget_task_id(old).await?;
                }
                return Ok(Admission {
                    task: record,
                    duplicate: false,
                });
            }
            // Another admission of this request id won; unless it is this very task, our task
            // id entry goes.
            let winner = self.entry(&key).await?.and_then(Result::ok);
            if winner.is_none_or(|w| w.record.task_id != task_id) {
                self.forget_task_id(task_id).await?;
            }
        }
    }

    async fn attach(&self, env: &Envelope) -> Result<Option<Admission>, BusError> {
        let Some(existing) = self.lookup(&env.request_id).await? else {
            return Ok(None);
        };
        reuse(&existing, env).map(Some)
    }

    async fn start(
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
        self.update(request_id, |r| {
            if r.state != TaskState::Running {
                return false;
            }
            r.progress = Some(note.clone());
            true
        })
        .await
    }

    async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        let updated = self.update(request_id, |r| end_with(r, &outcome)).await?;
        match updated {
            Some(task) => Ok(Completion {
                task,
                recorded: true,
            }),
            None => match self.entry(&request_id.store_key()).await? {
                Some(Ok(read)) => Ok(Completion {
                    task: read.record,
                    recorded: false,
                }),
                _ => Err(BusError::UnknownTask(request_id.to_string())),
            },
        }
    }

    async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.update(request_id, |r| {
            if r.state.is_terminal() {
                return false;
            }
            r.state = TaskState::Queued;
            true
        })
        .await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        Ok(match self.entry(&request_id.store_key()).await? {
            Some(Ok(read)) if !self.expired(&read.record) => Some(read.record),
            _ => None,
        })
    }

    async fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        let value = self
            .task_ids
            .get(task_id.to_string())
            .await
            .map_err(|e| BusError::storage("read task id", e))?;
        let Some(value) = value else { return Ok(None) };
        let request_id = RequestId::parse(&String::from_utf8_lossy(&value))
            .map_err(|e| BusError::Corrupt(e.to_string()))?;
        Ok(self
            .lookup(&request_id)
            .await?
            .filter(|r| r.task_id == task_id))
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError> {
        let mut all = self.all().await?;
        all.retain(|r| !r.state.is_terminal());
        Ok(all)
    }

    async fn list(&self) -> Result<Vec<TaskRecord>, BusError> {
        let mut all = self.all().await?;
        all.retain(|r| !self.expired(r));
        Ok(all)
    }

    async fn expire(&self) -> Result<usize, BusError> {
        let mut purged = 0;
        for r in self.all().await? {
            if !self.expired(&r) {
                continue;
            }
            let key = r.request_id.store_key();
            let Some(Ok(read)) = self.entry(&key).await? else {
                continue;
            };
            if read.record.task_id != r.task_id || !self.expired(&read.record) {
                continue; // re-admitted meanwhile
            }
            let gone = self
                .records
                .purge_expect_revision(&key, Some(read.revision))
                .await;
            if gone.is_ok() {
                self.forget_task_id(r.task_id).await?;
                purged += 1;
            }
        }
        Ok(purged)
    }
}

fn encode(r: &TaskRecord) -> Result<bytes::Bytes, BusError> {
    serde_json::to_vec(r)
        .map(bytes::Bytes::from)
        .map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

fn decode(bytes: &[u8]) -> Result<TaskRecord, BusError> {
    serde_json::from_slice(bytes).map_err(|e| BusError::Corrupt(format!("decode task record: {e}")))
}
