//! Jobs, their scheduling state and their run history in sled trees.
//!
//! Every change of a job's state is a compare-and-swap of its whole record, so two schedulers
//! over the same store never both take the same lease.

use super::job::{Job, JobId};
use super::state::{JobState, RunRecord};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Runs kept per job.
pub(crate) const HISTORY_LEN: usize = 50;

/// A store failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// sled failed.
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

fn storage(e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(e.to_string())
}

/// The cron trees of one sled database. Cheap to clone.
#[derive(Clone)]
pub struct CronStore {
    db: sled::Db,
    jobs: sled::Tree,
    state: sled::Tree,
    runs: sled::Tree,
}

impl std::fmt::Debug for CronStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronStore").finish_non_exhaustive()
    }
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(storage)
}

fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

/// The prefix of a job's run keys: the id and a 0 byte.
fn run_prefix(id: &JobId) -> Vec<u8> {
    let mut k = id.as_str().as_bytes().to_vec();
    k.push(0);
    k
}

impl CronStore {
    /// Opens (creating) the trees `cron.jobs`, `cron.state` and `cron.runs` in `db`.
    pub fn open(db: &sled::Db) -> Result<Self, StoreError> {
        Ok(Self {
            db: db.clone(),
            jobs: db.open_tree("cron.jobs").map_err(storage)?,
            state: db.open_tree("cron.state").map_err(storage)?,
            runs: db.open_tree("cron.runs").map_err(storage)?,
        })
    }

    /// Adds a new job with its initial state; [`StoreError::Exists`] if the id is taken.
    pub fn insert(&self, job: &Job, state: &JobState) -> Result<(), StoreError> {
        let key = job.id.as_str().as_bytes();
        let swapped = self
            .jobs
            .compare_and_swap(key, None::<&[u8]>, Some(encode(job)?))
            .map_err(storage)?;
        if swapped.is_err() {
            return Err(StoreError::Exists(job.id.clone()));
        }
        self.state.insert(key, encode(state)?).map_err(storage)?;
        Ok(())
    }

    /// Replaces a job's definition (its state is left alone).
    pub(crate) fn put_job(&self, job: &Job) -> Result<(), StoreError> {
        self.jobs
            .insert(job.id.as_str().as_bytes(), encode(job)?)
            .map_err(storage)?;
        Ok(())
    }

    /// A job by id.
    pub fn job(&self, id: &JobId) -> Result<Option<Job>, StoreError> {
        let key = id.as_str().as_bytes();
        match self.jobs.get(key).map_err(storage)? {
            Some(v) => decode(key, &v).map(Some),
            None => Ok(None),
        }
    }

    /// Every job, by id.
    pub fn jobs(&self) -> Result<Vec<Job>, StoreError> {
        self.jobs
            .iter()
            .map(|kv| {
                let (k, v) = kv.map_err(storage)?;
                decode(&k, &v)
            })
            .collect()
    }

    /// A job's state.
    pub fn state(&self, id: &JobId) -> Result<Option<JobState>, StoreError> {
        let key = id.as_str().as_bytes();
        match self.state.get(key).map_err(storage)? {
            Some(v) => decode(key, &v).map(Some),
            None => Ok(None),
        }
    }

    /// Removes a job, its state and its history; false if it did not exist.
    pub fn remove(&self, id: &JobId) -> Result<bool, StoreError> {
        let key = id.as_str().as_bytes();
        let existed = self.jobs.remove(key).map_err(storage)?.is_some();
        self.state.remove(key).map_err(storage)?;
        for k in self.runs.scan_prefix(run_prefix(id)).keys() {
            self.runs.remove(k.map_err(storage)?).map_err(storage)?;
        }
        Ok(existed)
    }

    /// Changes a job's state by compare-and-swap: `change` sees the current state and answers the
    /// new one with a value, or `None` to leave it. Retried while another writer got in between,
    /// so `change` must be a pure function of the state it is given.
    /// [`StoreError::UnknownJob`] when the job has no state (it was removed).
    pub(crate) fn update_state<T>(
        &self,
        id: &JobId,
        mut change: impl FnMut(&JobState) -> Option<(JobState, T)>,
    ) -> Result<Option<T>, StoreError> {
        let key = id.as_str().as_bytes();
        loop {
            let Some(old) = self.state.get(key).map_err(storage)? else {
                return Err(StoreError::UnknownJob(id.clone()));
            };
            let current: JobState = decode(key, &old)?;
            let Some((new, out)) = change(&current) else {
                return Ok(None);
            };
            let swapped = self
                .state
                .compare_and_swap(key, Some(&old), Some(encode(&new)?))
                .map_err(storage)?;
            if swapped.is_ok() {
                return Ok(Some(out));
            }
        }
    }

    /// Appends a run to a job's history, keeping the last `HISTORY_LEN`.
    pub(crate) fn push_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let mut key = run_prefix(&run.job_id);
        let seq = self.db.generate_id().map_err(storage)?;
        key.extend_from_slice(&seq.to_be_bytes());
        self.runs.insert(key, encode(run)?).map_err(storage)?;
        let keys: Vec<sled::IVec> = self
            .runs
            .scan_prefix(run_prefix(&run.job_id))
            .keys()
            .collect::<Result<_, _>>()
            .map_err(storage)?;
        let excess = keys.len().saturating_sub(HISTORY_LEN);
        for k in keys.into_iter().take(excess) {
            self.runs.remove(k).map_err(storage)?;
        }
        Ok(())
    }

    /// The id of the node that owns this store, made once and kept (tree `cron.meta`): a
    /// scheduler started again over the same store is the same node in a new life.
    pub fn node_id(&self) -> Result<String, StoreError> {
        let meta = self.db.open_tree("cron.meta").map_err(storage)?;
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

    /// A job's history, oldest first.
    pub fn runs(&self, id: &JobId) -> Result<Vec<RunRecord>, StoreError> {
        self.runs
            .scan_prefix(run_prefix(id))
            .map(|kv| {
                let (k, v) = kv.map_err(storage)?;
                decode(&k, &v)
            })
            .collect()
    }
}
