//! The cron backend on a [`KvStore`]: `job.<id>`, `state.<id>` and `run.<id>.<seq>` (a job id is
//! one key token: `[A-Za-z0-9_-]`). On NATS the store is one JetStream KV bucket that every
//! node's scheduler shares, so a fire's lease is taken by one node of the cluster.

use super::{CronBackend, StateVersion, StoreError, storage};
use crate::cron::job::JobId;
use async_trait::async_trait;
use bus::kv::{KvError, KvStore};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use std::sync::Arc;

/// Cron records in a key-value store.
#[derive(Clone)]
pub struct KvCron {
    kv: Arc<dyn KvStore>,
}

impl KvCron {
    /// The records in `kv`.
    pub fn new(kv: Arc<dyn KvStore>) -> Self {
        Self { kv }
    }

    async fn value(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.kv.get(key).await.map_err(storage)?.map(|e| e.value))
    }
}

fn job_key(id: &JobId) -> String {
    format!("job.{id}")
}

fn state_key(id: &JobId) -> String {
    format!("state.{id}")
}

fn runs_prefix(id: &JobId) -> String {
    format!("run.{id}.")
}

#[async_trait]
impl CronBackend for KvCron {
    async fn insert(&self, id: &JobId, job: Vec<u8>, state: Vec<u8>) -> Result<bool, StoreError> {
        // A job listed before its state is written is passed over by a tick (nothing to swap).
        match self.kv.create(&job_key(id), job, None).await {
            Ok(_) => {}
            Err(KvError::Exists { .. }) => return Ok(false),
            Err(e) => return Err(storage(e)),
        }
        self.kv.put(&state_key(id), state).await.map_err(storage)?;
        Ok(true)
    }

    async fn put_job(&self, id: &JobId, job: Vec<u8>) -> Result<(), StoreError> {
        self.kv.put(&job_key(id), job).await.map_err(storage)?;
        Ok(())
    }

    async fn job(&self, id: &JobId) -> Result<Option<Vec<u8>>, StoreError> {
        self.value(&job_key(id)).await
    }

    async fn jobs(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for key in self.kv.keys("job.").await.map_err(storage)? {
            // Removed between the listing and the read: not listed.
            if let Some(v) = self.value(&key).await? {
                let id = key.strip_prefix("job.").unwrap_or(&key).to_string();
                out.push((id, v));
            }
        }
        Ok(out)
    }

    async fn state(&self, id: &JobId) -> Result<Option<(Vec<u8>, StateVersion)>, StoreError> {
        let entry = self.kv.get(&state_key(id)).await.map_err(storage)?;
        Ok(entry.map(|e| (e.value, StateVersion::Revision(e.revision))))
    }

    async fn swap_state(
        &self,
        id: &JobId,
        version: &StateVersion,
        state: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let StateVersion::Revision(revision) = version else {
            return Ok(false);
        };
        match self.kv.update(&state_key(id), state, *revision, None).await {
            Ok(_) => Ok(true),
            Err(KvError::WrongRevision { .. }) => Ok(false),
            Err(e) => Err(storage(e)),
        }
    }

    async fn remove(&self, id: &JobId) -> Result<bool, StoreError> {
        let existed = self.kv.get(&job_key(id)).await.map_err(storage)?.is_some();
        self.kv.delete(&job_key(id), None).await.map_err(storage)?;
        self.kv
            .delete(&state_key(id), None)
            .await
            .map_err(storage)?;
        for key in self.kv.keys(&runs_prefix(id)).await.map_err(storage)? {
            self.kv.delete(&key, None).await.map_err(storage)?;
        }
        Ok(existed)
    }

    async fn push_run(&self, id: &JobId, run: Vec<u8>, keep: usize) -> Result<(), StoreError> {
        // UUIDv7 in hex sorts by time (and within one process by order of making).
        let seq = uuid::Uuid::now_v7().simple();
        let key = format!("{}{seq}", runs_prefix(id));
        self.kv.put(&key, run).await.map_err(storage)?;
        let keys = self.kv.keys(&runs_prefix(id)).await.map_err(storage)?;
        let excess = keys.len().saturating_sub(keep);
        for key in keys.into_iter().take(excess) {
            self.kv.delete(&key, None).await.map_err(storage)?;
        }
        Ok(())
    }

    async fn watch(&self) -> Option<BoxStream<'static, ()>> {
        // Jobs added, changed or removed, and states (a lease let go, a next fire moved).
        let mut streams = Vec::new();
        for prefix in ["job.", "state."] {
            match self.kv.watch(prefix).await {
                Ok(w) => streams.push(w.map(|_| ()).boxed()),
                Err(e) => tracing::warn!(error = %e, "cron: no watch on the shared jobs"),
            }
        }
        Some(futures::stream::select_all(streams).boxed())
    }

    async fn runs(&self, id: &JobId) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut out = Vec::new();
        for key in self.kv.keys(&runs_prefix(id)).await.map_err(storage)? {
            if let Some(v) = self.value(&key).await? {
                out.push(v);
            }
        }
        Ok(out)
    }
}
