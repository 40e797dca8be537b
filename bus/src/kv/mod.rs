//! A small key-value store for durable state that more than one process may share: create if
//! absent, compare-and-set by revision, a time to live per key, and a watch.
//!
//! [`SledKv`] is the embedded implementation (one sled tree; time from the injected clock);
//! `bus::nats::NatsKv` is the distributed one (a JetStream KV bucket; time from the server).
//! One conformance suite (`bus/tests/kv/`) runs against both, leases ([`Leases`]) included.
//!
//! Keys are 1-256 characters of `A-Z a-z 0-9 - _ = / .`, not starting or ending with `.` (the
//! alphabet JetStream KV accepts); `.` separates the tokens a watch prefix matches whole.

pub mod lease;
mod sled;

pub use self::lease::{Lease, LeaseError, Leases};
pub use self::sled::SledKv;

use async_trait::async_trait;
use futures::stream::BoxStream;
use std::time::Duration;

/// The longest key.
pub const MAX_KEY_LEN: usize = 256;

/// A live value and the revision a compare-and-set must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEntry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// Grows with every write to the store; an update must name the key's current one.
    pub revision: u64,
}

/// What a watch sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEvent {
    /// A key was written.
    Put(KvEntry),
    /// A key was deleted (a time to live that ran out may show here too, where the backend
    /// reports it: JetStream does, sled does not).
    Deleted {
        /// The key.
        key: String,
    },
}

impl KvEvent {
    /// The key the event is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Put(e) => &e.key,
            Self::Deleted { key } => key,
        }
    }
}

/// The changes under a prefix, from the moment the watch was made.
pub type KvWatch = BoxStream<'static, Result<KvEvent, KvError>>;

/// What can go wrong. Callers that branch match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvError {
    /// `create` found a live value.
    #[error("key {key:?} already exists")]
    Exists {
        /// The key.
        key: String,
    },
    /// `update` or `delete` named a revision that is not the key's current one (or the key is
    /// gone).
    #[error("key {key:?} is not at revision {expected}")]
    WrongRevision {
        /// The key.
        key: String,
        /// The revision named.
        expected: u64,
    },
    /// The key is outside the alphabet.
    #[error(
        "invalid key {key:?}: 1-{MAX_KEY_LEN} of A-Z a-z 0-9 - _ = / . (not starting or ending with .)"
    )]
    InvalidKey {
        /// The key.
        key: String,
    },
    /// A time to live under one second (JetStream counts whole seconds).
    #[error("time to live {ttl:?} for key {key:?} is under one second")]
    InvalidTtl {
        /// The key.
        key: String,
        /// The time to live asked for.
        ttl: Duration,
    },
    /// The store failed.
    #[error("kv store: {what}: {source}")]
    Storage {
        /// What was being done.
        what: String,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl KvError {
    /// A storage error with context; `source` is the store's error (a message for a fault that
    /// has no error value of its own).
    pub fn storage(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Storage {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// A key-value store with revisions.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    /// The live value of `key`; `None` when absent, deleted or past its time to live.
    async fn get(&self, key: &str) -> Result<Option<KvEntry>, KvError>;

    /// Writes `key` only when it has no live value ([`KvError::Exists`] otherwise), to live
    /// `ttl` when given. Returns the new revision.
    async fn create(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<u64, KvError>;

    /// Writes `key` only when its current revision is `revision` ([`KvError::WrongRevision`]
    /// otherwise); the time to live starts again from `ttl` (none when `None`). Returns the new
    /// revision.
    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        revision: u64,
        ttl: Option<Duration>,
    ) -> Result<u64, KvError>;

    /// Writes `key` whatever it holds, with no time to live. Returns the new revision.
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<u64, KvError>;

    /// Deletes `key`; with `revision`, only when that is its current one.
    async fn delete(&self, key: &str, revision: Option<u64>) -> Result<(), KvError>;

    /// The keys with a live value that start with `prefix`, sorted.
    async fn keys(&self, prefix: &str) -> Result<Vec<String>, KvError>;

    /// The changes to keys under `prefix` (whole tokens: `jobs.` watches `jobs.a`, `jobs.a.b`;
    /// empty: every key), from now on.
    async fn watch(&self, prefix: &str) -> Result<KvWatch, KvError>;
}

/// Checks a key against the alphabet every implementation accepts.
pub fn check_key(key: &str) -> Result<(), KvError> {
    let ok = !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && !key.starts_with('.')
        && !key.ends_with('.')
        && !key.contains("..")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'=' | b'/' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(KvError::InvalidKey {
            key: key.to_string(),
        })
    }
}

/// The longest key kept verbatim by [`escaped_key`]; a longer one is cut and a hash of the
/// whole appended, inside [`MAX_KEY_LEN`].
pub const MAX_VERBATIM: usize = 200;

/// A key made of `prefix` and `text` with every byte of `text` outside `A-Z a-z 0-9 - _`
/// written `=XX` (so any text is one token of the alphabet); a very long one cut, with a hash
/// of the whole.
pub fn escaped_key(prefix: &str, text: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + text.len() + 8);
    out.push_str(prefix);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    if out.len() > MAX_VERBATIM {
        // Escapes are ASCII: any byte index is a char boundary.
        out.truncate(MAX_VERBATIM);
        out.push_str(&format!("=h{:016x}", fnv1a(text.as_bytes())));
    }
    out
}

/// FNV-1a, 64 bits: the same on every node and every build.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a, 64 bits, of `bytes` following a hash already taken (`hash`), for a hash fed in parts.
pub fn fnv1a_from(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks a watch or listing prefix: empty, or whole tokens ending in `.`.
pub fn check_prefix(prefix: &str) -> Result<(), KvError> {
    if prefix.is_empty() {
        return Ok(());
    }
    match prefix.strip_suffix('.') {
        Some(head) => check_key(head),
        None => Err(KvError::InvalidKey {
            key: prefix.to_string(),
        }),
    }
}

/// Checks a time to live: whole seconds are what JetStream keeps, so under one is refused.
pub fn check_ttl(key: &str, ttl: Option<Duration>) -> Result<(), KvError> {
    match ttl {
        Some(ttl) if ttl < Duration::from_secs(1) => Err(KvError::InvalidTtl {
            key: key.to_string(),
            ttl,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_jetstream_alphabet() {
        for ok in ["a", "cron.lease.job-1", "a/b=c_d", "A9"] {
            assert!(check_key(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "a:b", "a b", "a*", "a>"] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert!(check_key(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
    }
}
