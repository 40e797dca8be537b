//! The embedded cron backend: the trees `cron.jobs`, `cron.state` and `cron.runs` of the
//! process's sled database (the layout of earlier versions, unchanged).

use super::{CronBackend, StateVersion, StoreError, storage};
use crate::cron::job::JobId;
use async_trait::async_trait;

/// The cron trees of one sled database.
#[derive(Clone)]
pub struct SledCron {
    db: sled::Db,
    jobs: sled::Tree,
    state: sled::Tree,
    runs: sled::Tree,
}

/// The prefix of a job's run keys: the id and a 0 byte.
fn run_prefix(id: &JobId) -> Vec<u8> {
    let mut k = id.as_str().as_bytes().to_vec();
    k.push(0);
    k
}

impl SledCron {
    /// Opens (creating) the trees `cron.jobs`, `cron.state` and `cron.runs` in `db`.
    pub fn open(db: &sled::Db) -> Result<Self, StoreError> {
        Ok(Self {
            db: db.clone(),
            jobs: db.open_tree("cron.jobs").map_err(storage)?,
            state: db.open_tree("cron.state").map_err(storage)?,
            runs: db.open_tree("cron.runs").map_err(storage)?,
        })
    }
}

#[async_trait]
impl CronBackend for SledCron {
    async fn insert(&self, id: &JobId, job: Vec<u8>, state: Vec<u8>) -> Result<bool, StoreError> {
        let key = id.as_str().as_bytes();
        let swapped = self
            .jobs
            .compare_and_swap(key, None::<&[u8]>, Some(job))
            .map_err(storage)?;
        if swapped.is_err() {
            return Ok(false);
        }
        self.state.insert(key, state).map_err(storage)?;
        Ok(true)
    }

    async fn put_job(&self, id: &JobId, job: Vec<u8>) -> Result<(), StoreError> {
        self.jobs
            .insert(id.as_str().as_bytes(), job)
            .map_err(storage)?;
        Ok(())
    }

    async fn job(&self, id: &JobId) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.jobs.get(id.as_str().as_bytes()).map_err(storage)?;
        Ok(v.map(|v| v.to_vec()))
    }

    async fn jobs(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.jobs
            .iter()
            .map(|kv| {
                let (k, v) = kv.map_err(storage)?;
                Ok((String::from_utf8_lossy(&k).into_owned(), v.to_vec()))
            })
            .collect()
    }

    async fn state(&self, id: &JobId) -> Result<Option<(Vec<u8>, StateVersion)>, StoreError> {
        let v = self.state.get(id.as_str().as_bytes()).map_err(storage)?;
        Ok(v.map(|v| (v.to_vec(), StateVersion::Bytes(v.to_vec()))))
    }

    async fn swap_state(
        &self,
        id: &JobId,
        version: &StateVersion,
        state: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let StateVersion::Bytes(old) = version else {
            return Ok(false);
        };
        let swapped = self
            .state
            .compare_and_swap(id.as_str().as_bytes(), Some(&old[..]), Some(state))
            .map_err(storage)?;
        Ok(swapped.is_ok())
    }

    async fn remove(&self, id: &JobId) -> Result<bool, StoreError> {
        let key = id.as_str().as_bytes();
        let existed = self.jobs.remove(key).map_err(storage)?.is_some();
        self.state.remove(key).map_err(storage)?;
        for k in self.runs.scan_prefix(run_prefix(id)).keys() {
            self.runs.remove(k.map_err(storage)?).map_err(storage)?;
        }
        Ok(existed)
    }

    async fn push_run(&self, id: &JobId, run: Vec<u8>, keep: usize) -> Result<(), StoreError> {
        let mut key = run_prefix(id);
        let seq = self.db.generate_id().map_err(storage)?;
        key.extend_from_slice(&seq.to_be_bytes());
        self.runs.insert(key, run).map_err(storage)?;
        let keys: Vec<sled::IVec> = self
            .runs
            .scan_prefix(run_prefix(id))
            .keys()
            .collect::<Result<_, _>>()
            .map_err(storage)?;
        let excess = keys.len().saturating_sub(keep);
        for k in keys.into_iter().take(excess) {
            self.runs.remove(k).map_err(storage)?;
        }
        Ok(())
    }

    async fn runs(&self, id: &JobId) -> Result<Vec<Vec<u8>>, StoreError> {
        self.runs
            .scan_prefix(run_prefix(id))
            .values()
            .map(|v| v.map(|v| v.to_vec()).map_err(storage))
            .collect()
    }
}
