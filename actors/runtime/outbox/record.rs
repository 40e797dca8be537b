//! What became of each delivery: in sled (tree `deliveries`, keyed by a time-ordered id), or on
//! a shared bus in a key-value store every node shares (`r.<time-ordered id>` in the bucket
//! `cb_deliveries`, each kept [`KEEP_SHARED`]), so any node shows the records of every node.

use bus::kv::KvStore;
use futures::{StreamExt as _, TryStreamExt as _};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// The sled tree of delivery records.
pub(crate) const DELIVERIES_TREE: &str = "deliveries";
/// The key-value store (bucket) of the records on a shared bus.
pub const RECORDS_STORE: &str = "deliveries";
/// How long a record stays in the shared store.
pub const KEEP_SHARED: Duration = Duration::from_secs(30 * 24 * 3600);
/// The prefix of every record's key in the shared store.
const KV_PREFIX: &str = "r.";
/// Records read at once by a listing of the shared store.
const READS_IN_FLIGHT: usize = 16;

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Every part reached the target.
    Delivered,
    /// A try failed for good, or the last allowed try failed.
    Failed,
}

/// One delivery, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The channel (`telegram`, `webhook`).
    pub channel: String,
    /// The target on the channel (a chat id, a webhook's name).
    pub to: String,
    /// The task whose reply it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// The cron job that announced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// How it ended.
    pub state: DeliveryState,
    /// Tries made, over every part.
    pub attempts: u32,
    /// The parts the text was sent as (Telegram splits long texts).
    pub parts: usize,
    /// The last error (failed deliveries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Unix ms when it ended.
    pub ended_ms: u64,
}

/// The delivery records; cheap to clone.
#[derive(Clone)]
pub struct DeliveryRecords {
    tree: sled::Tree,
    /// On a shared bus: the cluster's records (the tree is then unused).
    shared: Option<Arc<dyn KvStore>>,
}

/// The records could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("deliveries store: {0}")]
pub struct RecordError(#[source] Box<dyn std::error::Error + Send + Sync>);

fn err(e: impl std::error::Error + Send + Sync + 'static) -> RecordError {
    RecordError(Box::new(e))
}

impl DeliveryRecords {
    /// Opens the tree in `db`.
    pub fn open(db: &sled::Db) -> Result<Self, RecordError> {
        Ok(Self {
            tree: db.open_tree(DELIVERIES_TREE).map_err(err)?,
            shared: None,
        })
    }

    /// The records of a shared bus, in `kv`.
    pub fn with_shared(mut self, kv: Arc<dyn KvStore>) -> Self {
        self.shared = Some(kv);
        self
    }

    /// Adds a record (embedded: sled's periodic flush makes it durable).
    pub async fn put(&self, rec: &DeliveryRecord) -> Result<(), RecordError> {
        let bytes = serde_json::to_vec(rec).map_err(err)?;
        let id = Uuid::now_v7();
        match &self.shared {
            Some(kv) => {
                let key = format!("{KV_PREFIX}{}", id.simple());
                kv.create(&key, bytes, Some(KEEP_SHARED))
                    .await
                    .map_err(err)?;
            }
            None => {
                self.tree.insert(id.as_bytes(), bytes).map_err(err)?;
            }
        }
        Ok(())
    }

    /// The newest `limit` records, oldest first.
    pub async fn list(&self, limit: usize) -> Result<Vec<DeliveryRecord>, RecordError> {
        match &self.shared {
            Some(kv) => {
                // Keys are sorted, and their ids time-ordered: the newest last.
                let keys = kv.keys(KV_PREFIX).await.map_err(err)?;
                let newest = keys[keys.len().saturating_sub(limit)..].to_vec();
                let read: Vec<Option<bus::kv::KvEntry>> = futures::stream::iter(newest)
                    .map(|key| async move { kv.get(&key).await.map_err(err) })
                    .buffered(READS_IN_FLIGHT)
                    .try_collect()
                    .await?;
                // Gone (past its time to live) between the listing and the read: not listed.
                read.into_iter()
                    .flatten()
                    .map(|e| serde_json::from_slice(&e.value).map_err(err))
                    .collect()
            }
            None => {
                let mut newest = self
                    .tree
                    .iter()
                    .rev()
                    .take(limit)
                    .map(|item| {
                        let (_, bytes) = item.map_err(err)?;
                        serde_json::from_slice(&bytes).map_err(err)
                    })
                    .collect::<Result<Vec<DeliveryRecord>, _>>()?;
                newest.reverse();
                Ok(newest)
            }
        }
    }
}
