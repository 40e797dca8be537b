//! Where the next `getUpdates` offset (last `update_id` + 1) is kept, so a restart, or another
//! node taking the channel over, does not poll again what was taken.
//!
//! - The embedded bus: the node's sled tree `telegram` (key `offset`, 8 bytes big-endian).
//! - A shared bus (NATS): the key-value store every node shares ([`CHANNEL_STORE`], key
//!   `telegram.offset`, the offset in decimal), so the node that takes the channel's lease
//!   resumes where the last holder stopped. It only ever moves forward (compare-and-set by
//!   revision): a holder that lost its lease and has not noticed yet cannot move it back.

use bus::kv::{KvError, KvStore};
use std::sync::Arc;

/// The key-value store (a JetStream KV bucket on NATS) of the chat channels' shared state: the
/// Telegram lease and offset.
pub(crate) const CHANNEL_STORE: &str = "channels";

/// The sled tree of the poller's state on the embedded bus.
pub(super) const TELEGRAM_TREE: &str = "telegram";
const LOCAL_KEY: &[u8] = b"offset";
/// The offset's key in the shared store.
const SHARED_KEY: &str = "telegram.offset";
/// Compare-and-set tries before an advance gives up (each lost one means another writer moved
/// the offset in between).
const ADVANCE_TRIES: usize = 8;

/// The next `getUpdates` offset, kept for the next poller.
#[derive(Clone)]
pub(crate) enum OffsetStore {
    /// This node's sled tree (the embedded bus).
    Local(sled::Tree),
    /// The store every node shares (a shared bus).
    Shared(Arc<dyn KvStore>),
}

impl OffsetStore {
    /// The offset in the tree `telegram` of `db`.
    pub(crate) fn local(db: &sled::Db) -> Result<Self, sled::Error> {
        Ok(Self::Local(db.open_tree(TELEGRAM_TREE)?))
    }

    /// The stored offset.
    pub(crate) async fn get(&self) -> Result<Option<i64>, KvError> {
        match self {
            Self::Local(tree) => Ok(tree
                .get(LOCAL_KEY)
                .map_err(|e| KvError::storage("read the telegram offset", e))?
                .and_then(|v| {
                    let bytes: [u8; 8] = v.as_ref().try_into().ok()?;
                    Some(i64::from_be_bytes(bytes))
                })),
            Self::Shared(kv) => Ok(kv.get(SHARED_KEY).await?.and_then(|e| decode(&e.value))),
        }
    }

    /// Stores `offset`; in the shared store only when it is past the stored one.
    pub(crate) async fn advance(&self, offset: i64) -> Result<(), KvError> {
        match self {
            Self::Local(tree) => {
                tree.insert(LOCAL_KEY, &offset.to_be_bytes())
                    .map_err(|e| KvError::storage("store the telegram offset", e))?;
                Ok(())
            }
            Self::Shared(kv) => advance_shared(kv.as_ref(), offset).await,
        }
    }
}

async fn advance_shared(kv: &dyn KvStore, offset: i64) -> Result<(), KvError> {
    let value = offset.to_string().into_bytes();
    for _ in 0..ADVANCE_TRIES {
        let written = match kv.get(SHARED_KEY).await? {
            Some(e) if decode(&e.value).is_some_and(|stored| stored >= offset) => return Ok(()),
            Some(e) => kv
                .update(SHARED_KEY, value.clone(), e.revision, None)
                .await
                .map(drop),
            None => kv.create(SHARED_KEY, value.clone(), None).await.map(drop),
        };
        match written {
            Ok(()) => return Ok(()),
            // Another writer got there first: read again.
            Err(KvError::WrongRevision { .. } | KvError::Exists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Err(KvError::storage(
        "store the telegram offset",
        format!("{ADVANCE_TRIES} compare-and-set tries lost to other writers"),
    ))
}

fn decode(value: &[u8]) -> Option<i64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::ManualClock;
    use bus::kv::SledKv;

    fn shared_on(db: &sled::Db) -> OffsetStore {
        let kv = SledKv::open(db, "kv.channels", ManualClock::new(1_700_000_000_000)).unwrap();
        OffsetStore::Shared(Arc::new(kv))
    }

    #[actix_rt::test]
    async fn a_shared_offset_is_seen_by_every_handle_and_never_moves_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let (node1, node2) = (shared_on(&db), shared_on(&db));
        assert_eq!(node1.get().await.unwrap(), None);
        node1.advance(1005).await.unwrap();
        assert_eq!(
            node2.get().await.unwrap(),
            Some(1005),
            "the next holder reads it"
        );
        node2.advance(1009).await.unwrap();
        // A holder that lost its lease and has not noticed yet.
        node1.advance(1006).await.unwrap();
        assert_eq!(
            node1.get().await.unwrap(),
            Some(1009),
            "a late, lower offset does not move it back"
        );
    }

    #[actix_rt::test]
    async fn the_embedded_offset_stays_in_the_nodes_sled_tree() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let local = OffsetStore::local(&db).unwrap();
        local.advance(42).await.unwrap();
        let raw = db.open_tree(TELEGRAM_TREE).unwrap().get(LOCAL_KEY).unwrap();
        assert_eq!(raw.as_deref(), Some(&42i64.to_be_bytes()[..]));
        assert_eq!(
            OffsetStore::local(&db).unwrap().get().await.unwrap(),
            Some(42)
        );
        assert!(
            db.tree_names().iter().all(|n| n.as_ref() != b"kv.channels"),
            "no shared store on the embedded bus"
        );
    }
}
