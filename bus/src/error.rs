//! Bus errors.

use std::time::Duration;

/// What can go wrong on the bus. Callers that branch match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The local store failed.
    #[error("storage: {what}: {cause}")]
    Storage {
        /// What was being done.
        what: String,
        /// The store's error.
        cause: String,
    },
    /// A stored record could not be read back.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// No task is known under that id.
    #[error("no task with id {0:?}")]
    UnknownTask(String),
    /// A wait ran out of time.
    #[error("timed out after {after:?}")]
    TimedOut {
        /// How long was waited.
        after: Duration,
    },
    /// The bus (or a part of it) has shut down.
    #[error("bus closed: {0}")]
    Closed(String),
    /// The envelope cannot be accepted as it is.
    #[error("invalid envelope: {0}")]
    Invalid(String),
    /// The transport failed (network backends).
    #[error("transport: {0}")]
    Transport(String),
}

impl BusError {
    /// A storage error with context.
    pub fn storage(what: impl Into<String>, cause: impl std::fmt::Display) -> Self {
        Self::Storage {
            what: what.into(),
            cause: cause.to_string(),
        }
    }
}
