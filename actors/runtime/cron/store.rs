//! Jobs, their scheduling state and their run history, behind [`CronBackend`]: sled trees of the
//! process's database (embedded, [`CronStore::open`]) or a key-value store that every node shares
//! ([`CronStore::on_kv`], a JetStream KV bucket on NATS).
//!
//! Every change of a job's state is a compare-and-swap of its whole record, so any number of
//! schedulers over the same store, in one process or on several nodes, never both take the same
//! lease.

mod kv;
mod sled;

pub use self::kv::KvCron;
pub use self::sled::SledCron;

use super::job::{Job, JobId};
use super::state::{JobState, RunRecord};
use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Runs kept per job.
pub(crate) const HISTORY_LEN: usize = 50;

/// A store failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The storage failed.
    #[error("cron store: {0}")]
    Storage(String),
    /// A record could not be read back.
    #[error("cron store: corrupt record {key}: {reason}")]
    Corrupt {
        /// The record's key.
        key: String,
        /// Why.
        reason: String,
    },
    /// No job with that id.
    #[error("unknown cron job \"{0}\"")]
    UnknownJob(JobId),
    /// A job with that id already exists.
    #[error("a cron job with id \"{0}\" already exists")]
    Exists(JobId),
}

pub(crate) fn storage(e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(e.to_string())
}

/// What a compare-and-swap of a job's state must name: the bytes read (sled) or the revision
/// (a key-value store). Opaque to callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateVersion {
    /// The record as read.
    Bytes(Vec<u8>),
    /// The key's revision.
    Revision(u64),
}

/// Where the records live. Values are the JSON of [`Job`], [`JobState`] and [`RunRecord`];
/// the backend only stores bytes. One conformance suite (`cron::tests::store`) runs against
/// each implementation.
#[async_trait]
pub trait CronBackend: Send + Sync + 'static {
    /// Stores a new job and its initial state; false (nothing stored) when the id is taken.
    async fn insert(&self, id: &JobId, job: Vec<u8>, state: Vec<u8>) -> Result<bool, StoreError>;
    /// Replaces a job's definition.
    async fn put_job(&self, id: &JobId, job: Vec<u8>) -> Result<(), StoreError>;
    /// A job's definition.
    async fn job(&self, id: &JobId) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every job's definition, by id.
    async fn jobs(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
    /// A job's state and the version a swap must name.
    async fn state(&self, id: &JobId) -> Result<Option<(Vec<u8>, StateVersion)>, StoreError>;
    /// Writes a job's state only when it is still at `version`; false when it is not.
    async fn swap_state(
        &self,
        id: &JobId,
        version: &StateVersion,
        state: Vec<u8>,
    ) -> Result<bool, StoreError>;
    /// Removes a job, its state and its history; false when there was no job.
    async fn remove(&self, id: &JobId) -> Result<bool, StoreError>;
    /// Appends a run to a job's history, keeping the last `keep`.
    async fn push_run(&self, id: &JobId, run: Vec<u8>, keep: usize) -> Result<(), StoreError>;
    /// A job's history, oldest first.
    async fn runs(&self, id: &JobId) -> Result<Vec<Vec<u8>>, StoreError>;
    /// A signal per change of a job or its state made through another handle (another node),
    /// when the backend can tell; `None` when every writer is in this process.
    async fn watch(&self) -> Option<BoxStream<'static, ()>> {
        None
    }
}

/// The cron store: typed records over a [`CronBackend`]. Cheap to clone.
#[derive(Clone)]
pub struct CronStore {
    backend: Arc<dyn CronBackend>,
}

impl std::fmt::Debug for CronStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronStore").finish_non_exhaustive()
    }
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(storage)
}

fn decode<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: key.to_string(),
        reason: e.to_string(),
    })
}

impl CronStore {
    /// The embedded store: the trees `cron.jobs`, `cron.state` and `cron.runs` of `db`.
    pub fn open(db: &::sled::Db) -> Result<Self, StoreError> {
        Ok(Self::with(Arc::new(SledCron::open(db)?)))
    }

    /// The store in a key-value store (shared by every node when it is a JetStream bucket).
    pub fn on_kv(kv: Arc<dyn bus::kv::KvStore>) -> Self {
        Self::with(Arc::new(KvCron::new(kv)))
    }

    /// The store over any backend.
    pub fn with(backend: Arc<dyn CronBackend>) -> Self {
        Self { backend }
    }

    /// Adds a new job with its initial state; [`StoreError::Exists`] if the id is taken.
    pub async fn insert(&self, job: &Job, state: &JobState) -> Result<(), StoreError> {
        if self
            .backend
            .insert(&job.id, encode(job)?, encode(state)?)
            .await?
        {
            Ok(())
        } else {
            Err(StoreError::Exists(job.id.clone()))
        }
    }

    /// Replaces a job's definition (its state is left alone).
    pub(crate) async fn put_job(&self, job: &Job) -> Result<(), StoreError> {
        self.backend.put_job(&job.id, encode(job)?).await
    }

    /// A job by id.
    pub async fn job(&self, id: &JobId) -> Result<Option<Job>, StoreError> {
        match self.backend.job(id).await? {
            Some(v) => decode(id.as_str(), &v).map(Some),
            None => Ok(None),
        }
    }

    /// Every job, by id.
    pub async fn jobs(&self) -> Result<Vec<Job>, StoreError> {
        self.backend
            .jobs()
            .await?
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect()
    }

    /// A job's state.
    pub async fn state(&self, id: &JobId) -> Result<Option<JobState>, StoreError> {
        match self.backend.state(id).await? {
            Some((v, _)) => decode(id.as_str(), &v).map(Some),
            None => Ok(None),
        }
    }

    /// Removes a job, its state and its history; false if it did not exist.
    pub async fn remove(&self, id: &JobId) -> Result<bool, StoreError> {
        self.backend.remove(id).await
    }

    /// Changes a job's state by compare-and-swap: `change` sees the current state and answers the
    /// new one with a value, or `None` to leave it. Retried while another writer got in between,
    /// so `change` must be a pure function of the state it is given.
    /// [`StoreError::UnknownJob`] when the job has no state (it was removed).
    pub(crate) async fn update_state<T>(
        &self,
        id: &JobId,
        mut change: impl FnMut(&JobState) -> Option<(JobState, T)> + Send,
    ) -> Result<Option<T>, StoreError> {
        loop {
            let Some((old, version)) = self.backend.state(id).await? else {
                return Err(StoreError::UnknownJob(id.clone()));
            };
            let current: JobState = decode(id.as_str(), &old)?;
            let Some((new, out)) = change(&current) else {
                return Ok(None);
            };
            if self.backend.swap_state(id, &version, encode(&new)?).await? {
                return Ok(Some(out));
            }
        }
    }

    /// Appends a run to a job's history, keeping the last `HISTORY_LEN`.
    pub(crate) async fn push_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.backend
            .push_run(&run.job_id, encode(run)?, HISTORY_LEN)
            .await
    }

    /// A signal per change made through another handle, when the backend can tell (see
    /// [`CronBackend::watch`]).
    pub async fn watch(&self) -> Option<BoxStream<'static, ()>> {
        self.backend.watch().await
    }

    /// A job's history, oldest first.
    pub async fn runs(&self, id: &JobId) -> Result<Vec<RunRecord>, StoreError> {
        self.backend
            .runs(id)
            .await?
            .iter()
            .map(|v| decode(id.as_str(), v))
            .collect()
    }
}

/// The id of the node whose database `db` is, made once and kept (tree `cron.meta`): a
/// scheduler started again over the same database is the same node in a new life. It stays in
/// the node's own database when the jobs are shared.
pub(crate) fn node_id(db: &::sled::Db) -> Result<String, StoreError> {
    let meta = db.open_tree("cron.meta").map_err(storage)?;
    let fresh = uuid::Uuid::now_v7().simple().to_string();
    let old = meta
        .compare_and_swap(b"node", None::<&[u8]>, Some(fresh.as_bytes()))
        .map_err(storage)?;
    match old {
        Ok(()) => Ok(fresh),
        Err(e) => match e.current {
            Some(id) => Ok(String::from_utf8_lossy(&id).into_owned()),
            None => Err(StoreError::Storage("cron.meta node id vanished".into())),
        },
    }
}
