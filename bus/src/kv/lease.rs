//! Leases on a [`KvStore`]: one holder of a key at a time, across every process that shares the
//! store (NATS-FACTS §4).
//!
//! - **Acquire** is `create` with the lease's time to live; a held key answers
//!   [`KvError::Exists`], and [`Leases::acquire`] waits (bounded) for it to be released or to
//!   expire, woken by the store's delete event where it reports one and polling with backoff
//!   otherwise (sled reports no expiry; JetStream's marker may be missed).
//! - **Renew** is `update` naming the revision of the last write, with the time to live again;
//!   [`Lease::keep`] renews every third of it. A renewal that finds another revision means the
//!   lease was lost (it expired and someone else took it).
//! - **Release** is `delete` naming that revision, so a holder that lost its lease never removes
//!   the next holder's.
//! - **Fencing:** revisions only grow, so the revision a holder writes with tells its writes from
//!   an earlier holder's. [`Lease::is_held`] says whether a renewal has succeeded recently enough
//!   (measured on the holder's monotonic clock from when that write was sent) that the store
//!   cannot have let the key go; a holder stops writing once it is false.
//!
//! Time to live: whole seconds, at least one (what JetStream keeps); the store's clock decides
//! expiry (sled: the injected clock; JetStream: the server's), never a comparison of wall clocks
//! across hosts.

use super::{KvError, KvEvent, KvStore, KvWatch};
use crate::clock::Clock;
use futures::StreamExt as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest pause between two tries of a held key while waiting for it.
const MAX_POLL: Duration = Duration::from_secs(1);
/// The first pause between two tries.
const FIRST_POLL: Duration = Duration::from_millis(20);

/// Why a lease could not be taken or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Another holder kept the key for the whole wait.
    #[error("lease {key:?} is held by {holder:?}; not free within {waited:?}")]
    Busy {
        /// The key.
        key: String,
        /// Its holder, as last read (empty when it could not be read).
        holder: String,
        /// How long the wait lasted.
        waited: Duration,
    },
    /// The lease is no longer this holder's: a renewal or the release found another revision, or
    /// no renewal succeeded in time.
    #[error("lease {key:?} lost: {why}")]
    Lost {
        /// The key.
        key: String,
        /// What showed it.
        why: String,
    },
    /// The store failed.
    #[error(transparent)]
    Kv(#[from] KvError),
}

/// Leases of one holder (a process's life on a node) in one store.
#[derive(Clone)]
pub struct Leases {
    kv: Arc<dyn KvStore>,
    clock: Arc<dyn Clock>,
    holder: String,
    ttl: Duration,
}

impl std::fmt::Debug for Leases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leases")
            .field("holder", &self.holder)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl Leases {
    /// Leases held as `holder` in `kv`, each living `ttl` past its last renewal (rounded up to
    /// whole seconds, at least one); waits and renewals are timed on `clock`.
    pub fn new(
        kv: Arc<dyn KvStore>,
        clock: Arc<dyn Clock>,
        holder: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        Self {
            kv,
            clock,
            holder: holder.into(),
            ttl: Duration::from_secs(secs.max(1)),
        }
    }

    /// The holder's name, the value of every lease it takes.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// How long a lease lives past its last renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Who holds `key` now; `None` when it is free.
    pub async fn holder_of(&self, key: &str) -> Result<Option<String>, KvError> {
        Ok(self
            .kv
            .get(key)
            .await?
            .map(|e| String::from_utf8_lossy(&e.value).into_owned()))
    }

    /// Takes `key` when it is free; `None` when someone holds it.
    pub async fn try_acquire(&self, key: &str) -> Result<Option<Lease>, KvError> {
        let sent = self.clock.now();
        match self
            .kv
            .create(key, self.holder.as_bytes().to_vec(), Some(self.ttl))
            .await
        {
            Ok(revision) => Ok(Some(Lease {
                kv: self.kv.clone(),
                clock: self.clock.clone(),
                key: key.to_string(),
                holder: self.holder.clone(),
                ttl: self.ttl,
                first: revision,
                revision,
                renewed_at: sent,
            })),
            Err(KvError::Exists { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes `key`, waiting at most `within` (on the clock) for its holder to release it or for
    /// it to expire.
    pub async fn acquire(&self, key: &str, within: Duration) -> Result<Lease, LeaseError> {
        let started = self.clock.now();
        let deadline = started + within;
        if let Some(lease) = self.try_acquire(key).await? {
            return Ok(lease);
        }
        // Held: deletes (and, on JetStream, expiries) of the key wake the wait early; made
        // before the next try, so a release in between is not missed.
        let prefix = key.rfind('.').map_or("", |i| &key[..=i]);
        let mut watch = self.kv.watch(prefix).await.ok();
        let mut pause = FIRST_POLL;
        loop {
            if let Some(lease) = self.try_acquire(key).await? {
                return Ok(lease);
            }
            let now = self.clock.now();
            if now >= deadline {
                let holder = self.holder_of(key).await.ok().flatten();
                return Err(LeaseError::Busy {
                    key: key.to_string(),
                    holder: holder.unwrap_or_default(),
                    waited: self.clock.since(started),
                });
            }
            let wake = self.clock.sleep_until((now + pause).min(deadline));
            match watch.as_mut() {
                Some(w) => {
                    tokio::select! {
                        () = wake => {}
                        alive = deleted(w, key) => {
                            if !alive {
                                watch = None;
                            }
                        }
                    }
                }
                None => wake.await,
            }
            pause = (pause * 2).min(MAX_POLL).min(self.ttl / 2);
        }
    }
}

/// Returns once `watch` reports `key` deleted (true) or ends (false).
async fn deleted(watch: &mut KvWatch, key: &str) -> bool {
    while let Some(event) = watch.next().await {
        match event {
            Ok(KvEvent::Deleted { key: k }) if k == key => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// A lease held: the key, and the revision of the last write that took or renewed it.
pub struct Lease {
    kv: Arc<dyn KvStore>,
    clock: Arc<dyn Clock>,
    key: String,
    holder: String,
    ttl: Duration,
    first: u64,
    revision: u64,
    /// When the write that set `revision` was sent, on the holder's monotonic clock.
    renewed_at: Instant,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key)
            .field("holder", &self.holder)
            .field("first", &self.first)
            .field("revision", &self.revision)
            .finish()
    }
}

impl Lease {
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The holder.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The revision the lease was taken at.
    pub fn first_revision(&self) -> u64 {
        self.first
    }

    /// The revision of the last write that took or renewed it: the fencing token.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The part of the time to live after which a holder no longer counts on its lease: a
    /// quarter short of it, for the time a write takes to reach the store.
    fn safe_for(&self) -> Duration {
        self.ttl - self.ttl / 4
    }

    /// True while the last successful write was sent recently enough that the store cannot have
    /// let the key expire.
    pub fn is_held(&self) -> bool {
        self.clock.since(self.renewed_at) < self.safe_for()
    }

    /// Renews the lease for another time to live; returns the new revision.
    pub async fn renew(&mut self) -> Result<u64, LeaseError> {
        let sent = self.clock.now();
        match self
            .kv
            .update(
                &self.key,
                self.holder.as_bytes().to_vec(),
                self.revision,
                Some(self.ttl),
            )
            .await
        {
            Ok(revision) => {
                self.revision = revision;
                self.renewed_at = sent;
                Ok(revision)
            }
            Err(KvError::WrongRevision { .. }) => Err(LeaseError::Lost {
                key: self.key.clone(),
                why: format!(
                    "revision {} is no longer the key's (it expired or was taken)",
                    self.revision
                ),
            }),
            Err(e) => Err(LeaseError::Kv(e)),
        }
    }

    /// Renews the lease every third of its time to live, for as long as it is held; returns
    /// (with why) only once it is lost. A failed renewal is tried again at the next tick until
    /// the lease is no longer surely held. Dropping the future stops the renewals.
    pub async fn keep(&mut self) -> LeaseError {
        let every = self.ttl / 3;
        loop {
            self.clock.sleep(every).await;
            match self.renew().await {
                Ok(_) => {}
                Err(lost @ LeaseError::Lost { .. }) => return lost,
                Err(e) if !self.is_held() => {
                    return LeaseError::Lost {
                        key: self.key.clone(),
                        why: format!("no renewal succeeded in time: {e}"),
                    };
                }
                Err(e) => {
                    tracing::warn!(key = %self.key, error = %e, "Lease renewal failed; trying again.");
                }
            }
        }
    }

    /// Releases the lease, so the next holder need not wait for it to expire.
    pub async fn release(self) -> Result<(), LeaseError> {
        match self.kv.delete(&self.key, Some(self.revision)).await {
            Ok(()) => Ok(()),
            Err(KvError::WrongRevision { .. }) => Err(LeaseError::Lost {
                key: self.key,
                why: format!("revision {} is no longer the key's", self.revision),
            }),
            Err(e) => Err(LeaseError::Kv(e)),
        }
    }
}
