//! Where approval requests are kept, behind [`Requests`]: the sled tree `approvals` of the
//! process's database (the embedded default), or a key-value store every node shares
//! (`req.<id>` in a JetStream KV bucket on NATS), so a request asked on one node is listed and
//! answered on any. A request changes state by compare-and-set on what was read, so it is
//! answered once.

use super::{ApprovalError, ApprovalRecord, ApprovalState, KEEP_SETTLED, storage};
use async_trait::async_trait;
use bus::kv::{KvError, KvStore};
use futures::{StreamExt as _, TryStreamExt as _};
use std::sync::Arc;
use std::time::Duration;

/// Records read at once by a listing.
const READS_IN_FLIGHT: usize = 16;

/// What a compare-and-set names: the bytes read (sled) or the key's revision (a key-value
/// store). Opaque to callers.
#[derive(Debug, Clone)]
pub(crate) enum Version {
    /// The record as read.
    Bytes(sled::IVec),
    /// The key's revision.
    Revision(u64),
}

/// The requests, by id.
#[async_trait]
pub(crate) trait Requests: Send + Sync + 'static {
    /// Request `id` and the version a swap must name; `None` when there is none.
    async fn get(&self, id: &str) -> Result<Option<(ApprovalRecord, Version)>, ApprovalError>;
    /// Stores a new request.
    async fn create(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError>;
    /// Writes `rec` only when it is still at `version`; false when it is not.
    async fn swap(&self, version: Version, rec: &ApprovalRecord) -> Result<bool, ApprovalError>;
    /// Every request, newest first.
    async fn list(&self) -> Result<Vec<ApprovalRecord>, ApprovalError>;
}

fn decode(bytes: &[u8]) -> Result<ApprovalRecord, ApprovalError> {
    serde_json::from_slice(bytes).map_err(storage)
}

fn encode(rec: &ApprovalRecord) -> Result<Vec<u8>, ApprovalError> {
    serde_json::to_vec(rec).map_err(storage)
}

/// Requests in a sled tree, keyed by id.
pub(crate) struct SledRequests {
    tree: sled::Tree,
}

impl SledRequests {
    /// The tree `approvals` of `db`; at `now_ms` (the daemon starting) every pending request is
    /// marked expired (nobody waits for it any more) and those settled over a week ago go.
    pub(crate) fn open(db: &sled::Db, now_ms: u64) -> Result<Self, ApprovalError> {
        let tree = db.open_tree(super::REQUESTS_TREE).map_err(storage)?;
        for item in tree.iter() {
            let (key, bytes) = item.map_err(storage)?;
            let mut rec = decode(&bytes)?;
            let settled_ms = rec.resolved_ms.unwrap_or(rec.created_ms);
            if rec.state == ApprovalState::Pending {
                rec.state = ApprovalState::Expired;
                rec.resolved_ms = Some(now_ms);
                tree.insert(key, encode(&rec)?).map_err(storage)?;
            } else if now_ms.saturating_sub(settled_ms) > KEEP_SETTLED.as_millis() as u64 {
                tree.remove(key).map_err(storage)?;
            }
        }
        Ok(Self { tree })
    }
}

#[async_trait]
impl Requests for SledRequests {
    async fn get(&self, id: &str) -> Result<Option<(ApprovalRecord, Version)>, ApprovalError> {
        match self.tree.get(id).map_err(storage)? {
            Some(bytes) => Ok(Some((decode(&bytes)?, Version::Bytes(bytes)))),
            None => Ok(None),
        }
    }

    async fn create(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError> {
        self.tree
            .insert(rec.id.as_bytes(), encode(rec)?)
            .map_err(storage)?;
        Ok(())
    }

    async fn swap(&self, version: Version, rec: &ApprovalRecord) -> Result<bool, ApprovalError> {
        let Version::Bytes(old) = version else {
            return Err(storage("a revision is no version of a sled record"));
        };
        let swapped = self
            .tree
            .compare_and_swap(rec.id.as_bytes(), Some(old), Some(encode(rec)?))
            .map_err(storage)?;
        Ok(swapped.is_ok())
    }

    async fn list(&self) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        let mut out = Vec::new();
        // Ids are UUIDv7: the newest last.
        for item in self.tree.iter().rev() {
            let (_, bytes) = item.map_err(storage)?;
            out.push(decode(&bytes)?);
        }
        Ok(out)
    }
}

/// The prefix of every request's key in a key-value store.
pub(crate) const KV_PREFIX: &str = "req.";

/// Requests in a key-value store, as `req.<id>`. A request lives until a week after it was
/// due (pending) or settled: its time to live, so no sweep is needed.
pub(crate) struct KvRequests {
    pub(crate) kv: Arc<dyn KvStore>,
}

/// The key of request `id`; `None` for an id no request can have.
fn kv_key(id: &str) -> Option<String> {
    let key = format!("{KV_PREFIX}{id}");
    (!id.contains('.') && bus::kv::check_key(&key).is_ok()).then_some(key)
}

/// How long a record stays from its last write: a week past its due time while pending, a
/// week once settled.
fn time_to_live(rec: &ApprovalRecord) -> Duration {
    match rec.resolved_ms {
        Some(_) => KEEP_SETTLED,
        None => Duration::from_millis(rec.expires_ms.saturating_sub(rec.created_ms)) + KEEP_SETTLED,
    }
}

#[async_trait]
impl Requests for KvRequests {
    async fn get(&self, id: &str) -> Result<Option<(ApprovalRecord, Version)>, ApprovalError> {
        let Some(key) = kv_key(id) else {
            return Ok(None);
        };
        match self.kv.get(&key).await.map_err(storage)? {
            Some(e) => Ok(Some((decode(&e.value)?, Version::Revision(e.revision)))),
            None => Ok(None),
        }
    }

    async fn create(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError> {
        let key = kv_key(&rec.id).ok_or_else(|| storage(format!("bad id {:?}", rec.id)))?;
        let ttl = time_to_live(rec);
        self.kv
            .create(&key, encode(rec)?, Some(ttl))
            .await
            .map_err(storage)?;
        Ok(())
    }

    async fn swap(&self, version: Version, rec: &ApprovalRecord) -> Result<bool, ApprovalError> {
        let Version::Revision(revision) = version else {
            return Err(storage("bytes are no version of a key-value record"));
        };
        let key = kv_key(&rec.id).ok_or_else(|| storage(format!("bad id {:?}", rec.id)))?;
        let ttl = time_to_live(rec);
        match self
            .kv
            .update(&key, encode(rec)?, revision, Some(ttl))
            .await
        {
            Ok(_) => Ok(true),
            Err(KvError::WrongRevision { .. }) => Ok(false),
            Err(e) => Err(storage(e)),
        }
    }

    async fn list(&self) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        let mut keys = self.kv.keys(KV_PREFIX).await.map_err(storage)?;
        // Sorted by key, so by UUIDv7 id: the newest last.
        keys.reverse();
        let read: Vec<Option<bus::kv::KvEntry>> = futures::stream::iter(keys)
            .map(|key| async move { self.kv.get(&key).await.map_err(storage) })
            .buffered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        // Gone (its time to live ran out) between the listing and the read: not listed.
        read.into_iter()
            .flatten()
            .map(|e| decode(&e.value))
            .collect()
    }
}
