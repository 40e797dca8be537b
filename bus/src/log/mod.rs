//! Append-only logs (transcripts): many named logs, each a sequence of records appended in
//! batches and read back whole, with an optional [`Fence`]: on the last sequence, so that of two
//! writers that both think they own a log only one gets its append in, and on the writer's lease
//! revision, stamped on each append, so a writer whose lease was taken over is refused even when
//! it names the right sequence.
//!
//! [`FilesLog`] is the embedded implementation (a JSONL file per log); `bus::nats::NatsLog` the
//! distributed one (one JetStream stream per kind of log, a subject per log). One conformance
//! suite (`bus/tests/log/`) runs against both.
//!
//! Names are 1-256 characters of `A-Z a-z 0-9 - _ .`, not starting or ending with `.` nor with
//! `..` (dot-separated tokens: a subject on NATS, a folder path in files). Records are lines: no
//! `\n` in them.

mod files;

pub use self::files::FilesLog;

use async_trait::async_trait;

/// The longest name.
pub const MAX_NAME_LEN: usize = 256;

/// The most bytes one append may hold (its records and the newlines between them): a backend
/// with a smaller message limit splits an append into parts up to this, and its reader never
/// joins more.
pub const MAX_APPEND_BYTES: usize = 16 * 1024 * 1024;

/// What an append must find in the log for it to go in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fence {
    /// The log's last sequence (0: empty); `None`: wherever it is.
    pub last: Option<u64>,
    /// The writer's lease revision, stamped on the append: refused ([`LogError::LeaseBehind`])
    /// when an append stamped with a higher one is in the log already. `None`: not stamped,
    /// and not checked.
    pub lease: Option<u64>,
}

impl Fence {
    /// No fence: the append goes in wherever the log is.
    pub const NONE: Self = Self {
        last: None,
        lease: None,
    };

    /// Only when the log's last sequence is `last`.
    pub fn at(last: u64) -> Self {
        Self {
            last: Some(last),
            lease: None,
        }
    }

    /// The same fence, stamped with lease revision `revision`.
    pub fn with_lease(self, revision: u64) -> Self {
        Self {
            lease: Some(revision),
            ..self
        }
    }
}

/// One record and its sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The sequence of the append that wrote it: grows with every append (not necessarily by
    /// one); the records of one append may share it. The last one is what [`LogStore::last`]
    /// answers and a fenced append names.
    pub seq: u64,
    /// The record.
    pub data: Vec<u8>,
}

/// What can go wrong. Callers that branch match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The append named a last sequence the log is no longer at: another writer got in.
    #[error("log {name:?} is not at sequence {expected} (it is at {actual})")]
    Fenced {
        /// The log.
        name: String,
        /// The sequence named.
        expected: u64,
        /// The log's last sequence (0: empty), where the backend reports it.
        actual: u64,
    },
    /// The append's lease revision is below one already stamped on the log: a newer holder
    /// of the lease wrote to it.
    #[error("log {name:?}: lease revision {lease} is older than {latest}, already in the log")]
    LeaseBehind {
        /// The log.
        name: String,
        /// The append's lease revision.
        lease: u64,
        /// The highest lease revision stamped on the log.
        latest: u64,
    },
    /// The name is outside the alphabet.
    #[error(
        "invalid log name {name:?}: 1-{MAX_NAME_LEN} of A-Z a-z 0-9 - _ . (dot-separated tokens)"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A record holds a newline, or the batch is over the backend's limit.
    #[error("log {name:?}: {reason}")]
    InvalidRecord {
        /// The log.
        name: String,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error("log store: {what}: {source}")]
    Storage {
        /// What was being done.
        what: String,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl LogError {
    /// A storage error with context.
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

/// Append-only logs by name.
#[async_trait]
pub trait LogStore: Send + Sync + 'static {
    /// Appends `records` to `name` as one batch (all or none, at most [`MAX_APPEND_BYTES`]);
    /// with `fence.last`, only when the log's last sequence is that ([`LogError::Fenced`]
    /// otherwise; 0: empty); with `fence.lease`, stamped with that lease revision and only when
    /// no higher one is stamped on the log ([`LogError::LeaseBehind`]). Returns the last
    /// sequence after the append.
    async fn append(
        &self,
        name: &str,
        records: Vec<Vec<u8>>,
        fence: Fence,
    ) -> Result<u64, LogError>;

    /// Every record of `name`, oldest first (empty when there is none).
    async fn read(&self, name: &str) -> Result<Vec<LogRecord>, LogError>;

    /// The last sequence of `name`; 0 when empty.
    async fn last(&self, name: &str) -> Result<u64, LogError>;

    /// Removes every record of `name`.
    async fn delete(&self, name: &str) -> Result<(), LogError>;
}

/// Checks a log name.
pub fn check_name(name: &str) -> Result<(), LogError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(LogError::InvalidName {
            name: name.to_string(),
        })
    }
}

/// Checks a batch: records are lines, [`MAX_APPEND_BYTES`] at most in all.
pub fn check_records(name: &str, records: &[Vec<u8>]) -> Result<(), LogError> {
    let invalid = |reason: String| LogError::InvalidRecord {
        name: name.to_string(),
        reason,
    };
    if records.iter().any(|r| r.contains(&b'\n')) {
        return Err(invalid("a record holds a newline".into()));
    }
    let bytes = records.iter().map(|r| r.len() + 1).sum::<usize>();
    if bytes.saturating_sub(1) > MAX_APPEND_BYTES {
        return Err(invalid(format!(
            "an append of {} bytes is over the limit of {MAX_APPEND_BYTES}",
            bytes - 1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dot_separated_tokens() {
        for ok in ["a", "tx.agent-1.0190e3b2", "A_9"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", ".a", "a.", "a..b", "a/b", "../x", "a b", "a*", "a>", "a=b",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
