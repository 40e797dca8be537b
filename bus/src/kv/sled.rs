//! The embedded key-value store: one sled tree, each value stored behind its revision and its
//! expiry (Unix ms on the injected clock, 0 for none). An expired value reads as absent and is
//! replaced by the next `create`; sled's watch reports writes and deletes, not expiries.

use super::{KvEntry, KvError, KvEvent, KvStore, KvWatch, check_key, check_prefix, check_ttl};
use crate::clock::Clock;
use async_trait::async_trait;
use futures::StreamExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes before the value: revision and expiry, both big-endian u64.
const HEADER: usize = 16;
/// How often a write removes the expired values first, at most.
const PURGE_EVERY_MS: u64 = 60_000;

/// A key-value store in one sled tree.
#[derive(Clone)]
pub struct SledKv {
    db: sled::Db,
    tree: sled::Tree,
    clock: Arc<dyn Clock>,
    /// Clock time (Unix ms) after which the next write purges expired values first.
    next_purge_ms: Arc<AtomicU64>,
}

struct Stored {
    revision: u64,
    expires_ms: u64,
    value: Vec<u8>,
}

impl SledKv {
    /// The store in tree `name` of `db`.
    pub fn open(db: &sled::Db, name: &str, clock: Arc<dyn Clock>) -> Result<Self, KvError> {
        let tree = db
            .open_tree(name)
            .map_err(|e| KvError::storage(format!("open tree {name}"), e))?;
        Ok(Self {
            db: db.clone(),
            tree,
            clock,
            next_purge_ms: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Removes the values whose time to live ran out. Returns how many went.
    pub fn purge_expired(&self) -> Result<usize, KvError> {
        let mut purged = 0;
        for item in self.tree.iter() {
            let (k, v) = item.map_err(|e| KvError::storage("scan for expired values", e))?;
            let key = String::from_utf8_lossy(&k).into_owned();
            if self.live(&decode(&key, &v)?) {
                continue;
            }
            let gone = self
                .tree
                .compare_and_swap(&k, Some(v), None::<Vec<u8>>)
                .map_err(|e| KvError::storage(format!("purge {key}"), e))?;
            purged += usize::from(gone.is_ok());
        }
        Ok(purged)
    }

    /// Purges expired values when the last purge is a minute old, so values nobody reads again
    /// do not stay for ever.
    fn purge_if_due(&self) {
        let now = self.clock.now_ms();
        let due = self.next_purge_ms.load(Ordering::SeqCst);
        if now < due
            || self
                .next_purge_ms
                .compare_exchange(
                    due,
                    now + PURGE_EVERY_MS,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
        {
            return;
        }
        match self.purge_expired() {
            Ok(0) => {}
            Ok(purged) => tracing::debug!(purged, "Expired key-value entries removed."),
            Err(e) => {
                tracing::warn!(error = %e, "Purge of expired key-value entries failed; retried later.")
            }
        }
    }

    fn live(&self, s: &Stored) -> bool {
        s.expires_ms == 0 || self.clock.now_ms() < s.expires_ms
    }

    fn read(&self, key: &str) -> Result<Option<(sled::IVec, Stored)>, KvError> {
        let Some(bytes) = self
            .tree
            .get(key.as_bytes())
            .map_err(|e| KvError::storage(format!("read {key}"), e))?
        else {
            return Ok(None);
        };
        let stored = decode(key, &bytes)?;
        Ok(Some((bytes, stored)))
    }

    /// Swaps `old` for `value` at a fresh revision; `Ok(None)` when `old` is no longer there.
    fn swap(
        &self,
        key: &str,
        old: Option<sled::IVec>,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, KvError> {
        let revision = self
            .db
            .generate_id()
            .map_err(|e| KvError::storage("next revision", e))?
            + 1;
        let expires_ms = ttl.map_or(0, |t| self.clock.now_ms() + t.as_millis() as u64);
        let mut bytes = Vec::with_capacity(HEADER + value.len());
        bytes.extend_from_slice(&revision.to_be_bytes());
        bytes.extend_from_slice(&expires_ms.to_be_bytes());
        bytes.extend_from_slice(value);
        let swapped = self
            .tree
            .compare_and_swap(key.as_bytes(), old, Some(bytes))
            .map_err(|e| KvError::storage(format!("write {key}"), e))?;
        Ok(swapped.ok().map(|()| revision))
    }
}

fn decode(key: &str, bytes: &[u8]) -> Result<Stored, KvError> {
    let corrupt = || KvError::storage(format!("read {key}"), "record shorter than its header");
    let revision = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(corrupt)?;
    let expires_ms = bytes
        .get(8..HEADER)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(corrupt)?;
    Ok(Stored {
        revision,
        expires_ms,
        value: bytes.get(HEADER..).unwrap_or_default().to_vec(),
    })
}

#[async_trait]
impl KvStore for SledKv {
    async fn get(&self, key: &str) -> Result<Option<KvEntry>, KvError> {
        check_key(key)?;
        Ok(self
            .read(key)?
            .filter(|(_, s)| self.live(s))
            .map(|(_, s)| KvEntry {
                key: key.to_string(),
                value: s.value,
                revision: s.revision,
            }))
    }

    async fn create(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<u64, KvError> {
        check_key(key)?;
        check_ttl(key, ttl)?;
        self.purge_if_due();
        loop {
            let old = match self.read(key)? {
                Some((_, s)) if self.live(&s) => {
                    return Err(KvError::Exists {
                        key: key.to_string(),
                    });
                }
                Some((bytes, _)) => Some(bytes),
                None => None,
            };
            if let Some(revision) = self.swap(key, old, &value, ttl)? {
                return Ok(revision);
            }
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        revision: u64,
        ttl: Option<Duration>,
    ) -> Result<u64, KvError> {
        check_key(key)?;
        check_ttl(key, ttl)?;
        let wrong = || KvError::WrongRevision {
            key: key.to_string(),
            expected: revision,
        };
        match self.read(key)? {
            Some((bytes, s)) if self.live(&s) && s.revision == revision => {
                self.swap(key, Some(bytes), &value, ttl)?.ok_or_else(wrong)
            }
            _ => Err(wrong()),
        }
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<u64, KvError> {
        check_key(key)?;
        loop {
            let old = self.read(key)?.map(|(bytes, _)| bytes);
            if let Some(revision) = self.swap(key, old, &value, None)? {
                return Ok(revision);
            }
        }
    }

    async fn delete(&self, key: &str, revision: Option<u64>) -> Result<(), KvError> {
        check_key(key)?;
        let Some(expected) = revision else {
            self.tree
                .remove(key.as_bytes())
                .map_err(|e| KvError::storage(format!("delete {key}"), e))?;
            return Ok(());
        };
        let wrong = || KvError::WrongRevision {
            key: key.to_string(),
            expected,
        };
        match self.read(key)? {
            Some((bytes, s)) if self.live(&s) && s.revision == expected => self
                .tree
                .compare_and_swap(key.as_bytes(), Some(bytes), None::<Vec<u8>>)
                .map_err(|e| KvError::storage(format!("delete {key}"), e))?
                .map_err(|_| wrong()),
            _ => Err(wrong()),
        }
    }

    async fn keys(&self, prefix: &str) -> Result<Vec<String>, KvError> {
        check_prefix(prefix)?;
        let mut out = Vec::new();
        for item in self.tree.scan_prefix(prefix.as_bytes()) {
            let (k, v) = item.map_err(|e| KvError::storage("list keys", e))?;
            let key = String::from_utf8_lossy(&k).into_owned();
            if self.live(&decode(&key, &v)?) {
                out.push(key);
            }
        }
        Ok(out)
    }

    async fn watch(&self, prefix: &str) -> Result<KvWatch, KvError> {
        check_prefix(prefix)?;
        let sub = self.tree.watch_prefix(prefix.as_bytes());
        let events = futures::stream::unfold(sub, |mut sub| async move {
            let event = (&mut sub).await?;
            let item = match event {
                sled::Event::Insert { key, value } => {
                    let key = String::from_utf8_lossy(&key).into_owned();
                    decode(&key, &value).map(|s| {
                        KvEvent::Put(KvEntry {
                            key,
                            value: s.value,
                            revision: s.revision,
                        })
                    })
                }
                sled::Event::Remove { key } => Ok(KvEvent::Deleted {
                    key: String::from_utf8_lossy(&key).into_owned(),
                }),
            };
            Some((item, sub))
        });
        Ok(events.boxed())
    }
}
