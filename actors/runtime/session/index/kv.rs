//! Index rows in a [`KvStore`] (on NATS a JetStream KV bucket every node shares): the JSON of
//! each row under the session's key in the store (`s.` and the escaped session key, as its
//! lease is named). A finished run is counted by compare-and-set on the row's revision, tried
//! again when another node's write got there first, so no count is lost.

use super::{FinishedRun, IndexError, IndexRows, SessionMeta};
use async_trait::async_trait;
use bus::kv::{KvError, KvStore};
use futures::{StreamExt as _, TryStreamExt as _};
use std::sync::Arc;

/// The prefix every row's key starts with.
const PREFIX: &str = "s.";
/// Rows read at once by a listing.
const READS_IN_FLIGHT: usize = 16;
/// Lost races on one row before a count gives up (each lost race is another writer's success).
const MAX_RACES: usize = 64;

/// Index rows in a key-value store.
#[derive(Clone)]
pub struct KvIndex {
    kv: Arc<dyn KvStore>,
}

impl KvIndex {
    /// The rows in `kv`.
    pub fn new(kv: Arc<dyn KvStore>) -> Self {
        Self { kv }
    }

    /// The row stored under `store_key`, with its revision.
    async fn read(&self, store_key: &str) -> Result<Option<(SessionMeta, u64)>, IndexError> {
        let Some(entry) = self.kv.get(store_key).await.map_err(IndexError::of)? else {
            return Ok(None);
        };
        let meta = serde_json::from_slice(&entry.value)
            .map_err(|e| IndexError(format!("entry {store_key} unreadable: {e}")))?;
        Ok(Some((meta, entry.revision)))
    }
}

/// The store key of a session's row.
pub(super) fn store_key(session: &str) -> String {
    crate::session::lease::lease_key(session)
}

#[async_trait]
impl IndexRows for KvIndex {
    async fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        Ok(self.read(&store_key(key)).await?.map(|(meta, _)| meta))
    }

    async fn create(&self, meta: SessionMeta) -> Result<SessionMeta, IndexError> {
        let k = store_key(&meta.key);
        let bytes = serde_json::to_vec(&meta).map_err(IndexError::of)?;
        match self.kv.create(&k, bytes, None).await {
            Ok(_) => Ok(meta),
            // Another node made it first: theirs stands.
            Err(KvError::Exists { .. }) => self
                .read(&k)
                .await?
                .map(|(meta, _)| meta)
                .ok_or_else(|| IndexError(format!("session {} vanished", meta.key))),
            Err(e) => Err(IndexError::of(e)),
        }
    }

    async fn record_run(&self, key: &str, run: FinishedRun) -> Result<(), IndexError> {
        let k = store_key(key);
        for _ in 0..MAX_RACES {
            let Some((mut meta, revision)) = self.read(&k).await? else {
                return Err(IndexError(format!("no entry for session {key}")));
            };
            meta.count(&run);
            let bytes = serde_json::to_vec(&meta).map_err(IndexError::of)?;
            match self.kv.update(&k, bytes, revision, None).await {
                Ok(_) => return Ok(()),
                Err(KvError::WrongRevision { .. }) => continue,
                Err(e) => return Err(IndexError::of(e)),
            }
        }
        Err(IndexError(format!(
            "session {key}: the count lost {MAX_RACES} races to other writers"
        )))
    }

    async fn set_archived(
        &self,
        key: &str,
        archived_ms: Option<u64>,
    ) -> Result<Option<SessionMeta>, IndexError> {
        let k = store_key(key);
        for _ in 0..MAX_RACES {
            let Some((mut meta, revision)) = self.read(&k).await? else {
                return Ok(None);
            };
            meta.archived_ms = archived_ms;
            let bytes = serde_json::to_vec(&meta).map_err(IndexError::of)?;
            match self.kv.update(&k, bytes, revision, None).await {
                Ok(_) => return Ok(Some(meta)),
                Err(KvError::WrongRevision { .. }) => continue,
                Err(e) => return Err(IndexError::of(e)),
            }
        }
        Err(IndexError(format!(
            "session {key}: the archive mark lost {MAX_RACES} races to other writers"
        )))
    }

    async fn remove(&self, key: &str) -> Result<bool, IndexError> {
        let k = store_key(key);
        if self.read(&k).await?.is_none() {
            return Ok(false);
        }
        self.kv.delete(&k, None).await.map_err(IndexError::of)?;
        Ok(true)
    }

    async fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        let keys = self.kv.keys(PREFIX).await.map_err(IndexError::of)?;
        let rows: Vec<Option<(SessionMeta, u64)>> = futures::stream::iter(keys)
            .map(|k| async move { self.read(&k).await })
            .buffered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        // A row gone between the listing and its read is not listed.
        let mut out: Vec<SessionMeta> = rows
            .into_iter()
            .flatten()
            .map(|(meta, _)| meta)
            .filter(|m| agent.is_none_or(|a| a == m.agent))
            .collect();
        out.sort_by_key(|m| std::cmp::Reverse(m.updated_ms));
        Ok(out)
    }
}
