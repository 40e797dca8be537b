//! What became of each delivery, in sled (tree `deliveries`, keyed by a time-ordered id).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The sled tree of delivery records.
pub(crate) const DELIVERIES_TREE: &str = "deliveries";

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
        })
    }

    /// Adds a record (sled's periodic flush makes it durable).
    pub fn put(&self, rec: &DeliveryRecord) -> Result<(), RecordError> {
        let bytes = serde_json::to_vec(rec).map_err(err)?;
        self.tree
            .insert(Uuid::now_v7().as_bytes(), bytes)
            .map_err(err)?;
        Ok(())
    }

    /// Every record, oldest first.
    pub fn list(&self) -> Result<Vec<DeliveryRecord>, RecordError> {
        self.tree
            .iter()
            .map(|item| {
                let (_, bytes) = item.map_err(err)?;
                serde_json::from_slice(&bytes).map_err(err)
            })
            .collect()
    }
}
