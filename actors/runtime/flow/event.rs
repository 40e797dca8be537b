//! What a run publishes on `events.flow.<runId>`: each node starting, retrying, ending, and the
//! run ending. `clawbus flow watch` and the SSE stream of `GET /v1/flow-runs/{id}/events` follow it.

use bus::{BusError, Topic};
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowEventKind {
    /// The run started (or resumed after a restart).
    RunStarted,
    /// A node (or one of its items) submitted a task.
    NodeStarted,
    /// An attempt failed and the node tries again.
    NodeRetrying,
    /// A node ended (succeeded, failed, skipped or cancelled).
    NodeFinished,
    /// The run ended.
    RunFinished,
}

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEvent {
    /// The run.
    pub run_id: String,
    /// What happened.
    pub kind: FlowEventKind,
    /// The node concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The `for_each` item concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// The attempt concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The node's or run's state after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The error or reason, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The topic of a run's events.
pub(crate) fn topic(run_id: &str) -> Result<Topic, BusError> {
    Topic::parse(&format!("events.flow.{run_id}")).map_err(|e| BusError::Invalid(e.to_string()))
}
