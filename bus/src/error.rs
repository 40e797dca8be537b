//! Bus errors.

use crate::envelope::RequestId;
use crate::topic::Topic;
use std::time::Duration;
use uuid::Uuid;

/// Why a known request id cannot be answered as a duplicate of its task.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// The request id was first used for work on another topic.
    OtherTarget {
        /// The topic the request id was first submitted to.
        original: Topic,
    },
    /// The request id was first used on this topic with another payload.
    OtherPayload,
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OtherTarget { original } => write!(f, "it was first submitted to {original}"),
            Self::OtherPayload => f.write_str("it was first submitted with another payload"),
        }
    }
}

/// What can go wrong on the bus. Callers that branch match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The local store failed.
    #[error("storage: {what}: {source}")]
    Storage {
        /// What was being done.
        what: String,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
    /// A request id inside its dedup window was reused for different work.
    #[error("request id {request_id} is taken by task {task_id}: {reason}")]
    Conflict {
        /// The reused request id.
        request_id: RequestId,
        /// The task the request id belongs to.
        task_id: Uuid,
        /// How the new submission differs from the first.
        reason: ConflictReason,
    },
    /// The transport failed (network backends).
    #[error("transport: {what}: {source}")]
    Transport {
        /// What was being done, and where (`NATS at <url>: bucket …`).
        what: String,
        /// The transport's error (a message for a refusal that has no error value of its own).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BusError {
    /// A transport error with context; `source` is the client's error or a message.
    pub fn transport(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Transport {
            what: what.into(),
            source: source.into(),
        }
    }

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
