//! Task records: what the ledger keeps per request id.

use crate::envelope::{Envelope, RequestId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// Where a task is in its life. Every task ends in exactly one terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskState {
    /// Journaled, waiting for a consumer.
    Queued,
    /// A consumer has it.
    Running,
    /// Finished with a result.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Stopped on request.
    Cancelled,
    /// Its deadline passed first.
    TimedOut,
    /// Failed on every attempt its retry policy allowed; retried only when asked
    /// (re-posting the same request id and payload, or `tasks retry`).
    DeadLettered,
}

impl TaskState {
    /// True for the states a task never leaves.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }

    /// The state's wire name (`queued`, `running`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::DeadLettered => "dead_lettered",
        }
    }

    /// True for the ends a re-post of the same request id and payload retries: `failed` and
    /// `dead_lettered`. A success, a cancel and a timeout are answered from the store.
    pub fn is_retryable_end(self) -> bool {
        matches!(self, Self::Failed | Self::DeadLettered)
    }
}

/// How a consumer finished a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Done; `result` is answered to every caller of this request id.
    Succeeded {
        /// The result value.
        result: serde_json::Value,
    },
    /// Gave up; `error` is answered to every caller of this request id.
    Failed {
        /// What went wrong, for people.
        error: String,
    },
    /// Stopped on request.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// Ran out of time.
    TimedOut {
        /// What timed out.
        error: String,
    },
    /// Failed on every attempt allowed.
    DeadLettered {
        /// The last attempt's error.
        error: String,
    },
}

impl Outcome {
    /// The terminal state this outcome leads to.
    pub fn state(&self) -> TaskState {
        match self {
            Self::Succeeded { .. } => TaskState::Succeeded,
            Self::Failed { .. } => TaskState::Failed,
            Self::Cancelled { .. } => TaskState::Cancelled,
            Self::TimedOut { .. } => TaskState::TimedOut,
            Self::DeadLettered { .. } => TaskState::DeadLettered,
        }
    }
}

/// The durable record of one task, keyed by its request id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task's id (the id of the envelope that first carried the request).
    pub task_id: Uuid,
    /// The idempotency key.
    pub request_id: RequestId,
    /// Where it stands.
    pub state: TaskState,
    /// Deliveries so far.
    pub attempts: u32,
    /// The envelope as first admitted (redeliveries raise `attempt`), shared: a record is
    /// copied several times a turn (the store's cache, each reader), its envelope never is.
    pub envelope: Arc<Envelope>,
    /// The terminal outcome, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Unix ms when admitted.
    pub created_ms: u64,
    /// Unix ms of the last change.
    pub updated_ms: u64,
    /// Admission order: grows with every task admitted, across restarts (0 in records written
    /// before it existed).
    #[serde(default)]
    pub seq: u64,
    /// The last progress note of the running attempt (see [`crate::store::TaskStore::progress`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
    /// A fingerprint of the admitted payload ([`crate::store::fingerprint`]); `None` in records
    /// written before it existed, which are compared by their stored payload instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Arc<str>>,
}

impl TaskRecord {
    /// The result value, when the task succeeded.
    pub fn result(&self) -> Option<&serde_json::Value> {
        match &self.outcome {
            Some(Outcome::Succeeded { result }) => Some(result),
            _ => None,
        }
    }

    /// The error text, when the task ended in any other terminal state.
    pub fn error(&self) -> Option<&str> {
        match &self.outcome {
            Some(Outcome::Failed { error })
            | Some(Outcome::TimedOut { error })
            | Some(Outcome::DeadLettered { error }) => Some(error),
            Some(Outcome::Cancelled { reason }) => Some(reason),
            _ => None,
        }
    }
}

/// The answer to a submission.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The task as it stands now.
    pub task: TaskRecord,
    /// True when this request id was already known: nothing new was started.
    pub duplicate: bool,
}

/// The notice published on [`Topic::cancellations`](crate::Topic::cancellations) when a task
/// ends from outside its consumer (cancelled, timed out, failed by an operator): the consumer
/// running it stops. On the wire: `{"task_id": …, "request_id": …, "reason": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelNotice {
    /// The task that ended.
    pub task_id: Uuid,
    /// Its request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// Why it ended (the outcome's reason or error).
    #[serde(default = "CancelNotice::default_reason")]
    pub reason: String,
}

impl CancelNotice {
    fn default_reason() -> String {
        "cancelled".to_string()
    }

    /// The notice on [`Topic::cancellations`](crate::Topic::cancellations) telling the consumer
    /// of `record`, just ended from outside, to stop, with the reason of its recorded outcome.
    pub(crate) fn for_ended(record: &TaskRecord) -> Envelope {
        let reason = match &record.outcome {
            Some(Outcome::Cancelled { reason }) => reason.clone(),
            Some(
                Outcome::Failed { error }
                | Outcome::TimedOut { error }
                | Outcome::DeadLettered { error },
            ) => error.clone(),
            Some(Outcome::Succeeded { .. }) | None => "ended".to_string(),
        };
        let payload = CancelNotice {
            task_id: record.task_id,
            request_id: Some(record.request_id.clone()),
            reason,
        }
        .to_payload();
        let mut notice = Envelope::event(crate::Topic::cancellations(), payload);
        notice.request_id = record.request_id.clone();
        notice
    }

    /// Its payload on the bus.
    pub fn to_payload(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The notice in a `tasks.cancelled` payload; `None` when the payload is not one (no
    /// `task_id` uuid).
    pub fn from_payload(payload: &serde_json::Value) -> Option<Self> {
        Self::deserialize(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cancel_notice_keeps_its_wire_shape() {
        let task_id = Uuid::nil();
        let notice = CancelNotice {
            task_id,
            request_id: RequestId::parse("r-1").ok(),
            reason: "stop".into(),
        };
        let payload = notice.to_payload();
        assert_eq!(
            payload,
            json!({ "task_id": task_id, "request_id": "r-1", "reason": "stop" })
        );
        assert_eq!(CancelNotice::from_payload(&payload), Some(notice));
        let bare = CancelNotice::from_payload(&json!({ "task_id": task_id.to_string() }));
        assert_eq!(bare.map(|n| n.reason), Some("cancelled".to_string()));
        assert_eq!(CancelNotice::from_payload(&json!({ "task_id": "x" })), None);
    }
}
