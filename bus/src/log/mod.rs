//! Append-only logs (transcripts): many named logs, each a sequence of records appended in
//! batches and read back whole, with an optional fence on the last sequence so that of two
//! writers that both think they own a log only one gets its append in.
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
    /// Appends `records` to `name` as one batch (all or none); with `expected`, only when the
    /// log's last sequence is that ([`LogError::Fenced`] otherwise; 0: empty). Returns the last
    /// sequence after the append.
    async fn append(
        &self,
        name: &str,
        records: Vec<Vec<u8>>,
        expected: Option<u64>,
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

/// Checks a batch: records are lines.
pub fn check_records(name: &str, records: &[Vec<u8>]) -> Result<(), LogError> {
    if records.iter().any(|r| r.contains(&b'\n')) {
        return Err(LogError::InvalidRecord {
            name: name.to_string(),
            reason: "a record holds a newline".into(),
        });
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
