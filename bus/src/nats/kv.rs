//! The key-value store on a JetStream KV bucket (history 1, per-key TTL with limit markers).
//!
//! Writes with a time to live go out as raw publishes with `Nats-TTL` and
//! `Nats-Expected-Last-Subject-Sequence`: the client's `create_with_ttl` falls back to an update
//! without the TTL when the key's last entry is a delete or expiry marker, and it has no update
//! with a TTL at all (NATS-FACTS §4).

use super::Nats;
use crate::error::BusError;
use crate::kv::{KvEntry, KvError, KvEvent, KvStore, KvWatch, check_key, check_prefix, check_ttl};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::kv;
use async_nats::jetstream::message::PublishMessage;
use async_trait::async_trait;
use futures::{StreamExt as _, TryStreamExt as _};
use std::time::Duration;

/// How long the marker of a key removed by its TTL stays, so watchers see it.
const MARKER_TTL: Duration = Duration::from_secs(60);

/// A key-value store in the bucket `<prefix>_<name>`.
#[derive(Clone)]
pub struct NatsKv {
    nats: Nats,
    store: kv::Store,
    bucket: String,
}

impl NatsKv {
    /// Opens the bucket `<prefix>_<name>`, creating it (per-key TTL on) when missing.
    pub async fn open(nats: &Nats, name: &str) -> Result<Self, BusError> {
        let bucket = format!("{}_{name}", nats.subjects.prefix);
        let store = match nats.js.get_key_value(&bucket).await {
            Ok(store) => store,
            Err(_) => {
                let config = kv::Config {
                    bucket: bucket.clone(),
                    history: 1,
                    storage: async_nats::jetstream::stream::StorageType::File,
                    limit_markers: Some(MARKER_TTL),
                    ..Default::default()
                };
                nats.js.create_key_value(config).await.map_err(|e| {
                    BusError::transport(format!("NATS at {}: bucket {bucket}", nats.url()), e)
                })?
            }
        };
        Ok(Self {
            nats: nats.clone(),
            store,
            bucket,
        })
    }

    /// Publishes `value` to `key` expecting its last entry at `expected` (0: none), with `ttl`.
    /// `Ok(None)` when the expectation failed.
    async fn publish(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: u64,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, KvError> {
        let mut message = PublishMessage::build()
            .payload(value.into())
            .expected_last_subject_sequence(expected);
        if let Some(ttl) = ttl {
            message = message.ttl(ttl);
        }
        let subject = format!("$KV.{}.{key}", self.bucket);
        let sent = self.nats.js.send_publish(subject, message).await;
        let acked = match sent {
            Ok(pending) => pending.await,
            Err(e) => Err(e),
        };
        match acked {
            Ok(ack) => Ok(Some(ack.sequence)),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(None),
            Err(e) => Err(KvError::storage(format!("write {key}"), e)),
        }
    }

    /// The last entry of `key`, live or a marker.
    async fn last(&self, key: &str) -> Result<Option<kv::Entry>, KvError> {
        self.store
            .entry(key)
            .await
            .map_err(|e| KvError::storage(format!("read {key}"), e))
    }
}

fn live(entry: kv::Entry) -> Option<KvEntry> {
    (entry.operation == kv::Operation::Put).then(|| KvEntry {
        key: entry.key,
        value: entry.value.to_vec(),
        revision: entry.revision,
    })
}

#[async_trait]
impl KvStore for NatsKv {
    async fn get(&self, key: &str) -> Result<Option<KvEntry>, KvError> {
        check_key(key)?;
        Ok(self.last(key).await?.and_then(live))
    }

    async fn create(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<u64, KvError> {
        check_key(key)?;
        check_ttl(key, ttl)?;
        let mut expected = 0;
        loop {
            if let Some(revision) = self.publish(key, value.clone(), expected, ttl).await? {
                return Ok(revision);
            }
            match self.last(key).await? {
                Some(e) if e.operation == kv::Operation::Put => {
                    return Err(KvError::Exists {
                        key: key.to_string(),
                    });
                }
                // A delete or expiry marker: create over it.
                Some(e) if e.revision != expected => expected = e.revision,
                // Nothing there, or the marker we just expected: it went meanwhile.
                _ => expected = 0,
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
        // A revision that is a marker's is no live value to update.
        let current = self.last(key).await?;
        if !current.is_some_and(|e| e.operation == kv::Operation::Put && e.revision == revision) {
            return Err(wrong());
        }
        self.publish(key, value, revision, ttl)
            .await?
            .ok_or_else(wrong)
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<u64, KvError> {
        check_key(key)?;
        self.store
            .put(key, value.into())
            .await
            .map_err(|e| KvError::storage(format!("write {key}"), e))
    }

    async fn delete(&self, key: &str, revision: Option<u64>) -> Result<(), KvError> {
        check_key(key)?;
        let Some(expected) = revision else {
            return self
                .store
                .delete(key)
                .await
                .map_err(|e| KvError::storage(format!("delete {key}"), e));
        };
        let current = self.last(key).await?;
        if !current.is_some_and(|e| e.operation == kv::Operation::Put && e.revision == expected) {
            return Err(KvError::WrongRevision {
                key: key.to_string(),
                expected,
            });
        }
        self.store
            .delete_expect_revision(key, Some(expected))
            .await
            .map_err(|e| match e.kind() {
                kv::DeleteErrorKind::WrongLastRevision => KvError::WrongRevision {
                    key: key.to_string(),
                    expected,
                },
                _ => KvError::storage(format!("delete {key}"), e),
            })
    }

    async fn keys(&self, prefix: &str) -> Result<Vec<String>, KvError> {
        check_prefix(prefix)?;
        let keys = self
            .store
            .keys()
            .await
            .map_err(|e| KvError::storage("list keys", e))?;
        let mut out: Vec<String> = keys
            .try_filter(|k| futures::future::ready(k.starts_with(prefix)))
            .try_collect()
            .await
            .map_err(|e| KvError::storage("list keys", e))?;
        out.sort();
        Ok(out)
    }

    async fn watch(&self, prefix: &str) -> Result<KvWatch, KvError> {
        check_prefix(prefix)?;
        let watch = self
            .store
            .watch(format!("{prefix}>"))
            .await
            .map_err(|e| KvError::storage(format!("watch {prefix}>"), e))?;
        let events = watch.map(|item| {
            let entry = item.map_err(|e| KvError::storage("watch", e))?;
            Ok(match entry.operation {
                kv::Operation::Put => KvEvent::Put(KvEntry {
                    key: entry.key,
                    value: entry.value.to_vec(),
                    revision: entry.revision,
                }),
                kv::Operation::Delete | kv::Operation::Purge => KvEvent::Deleted { key: entry.key },
            })
        });
        Ok(events.boxed())
    }
}
