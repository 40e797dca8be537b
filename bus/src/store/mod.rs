//! The task store: durable task records keyed by request id, and the task rules, written once.
//!
//! Every backend keeps its tasks in a [`TaskStore`]; [`SledTaskStore`] is the embedded one. The
//! rules shared by all of them (when a known request id is a duplicate, when it is a conflict)
//! live here as plain functions, so a store only decides where the bytes go.

mod decoded;
mod journal;
mod record_bytes;
mod records;
mod refusals;
mod rules;
mod sled;

pub use self::sled::{SledTaskStore, StoreExtras};
pub use refusals::{Refusal, RefusalJournal};
pub(crate) use rules::end_with;
pub use rules::{fingerprint, reuse};

use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::task::{Admission, Outcome, TaskRecord};
use async_trait::async_trait;
use std::time::Duration;
use uuid::Uuid;

/// The default dedup window for tasks: 24 hours.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// What [`TaskStore::complete`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The record as it stands now: with this outcome, or with the one that came first.
    pub task: TaskRecord,
    /// True when this call recorded the outcome; false when the task had already ended.
    pub recorded: bool,
}

/// Durable task records keyed by request id.
///
/// A record leaves the store only when it is terminal and older than the dedup window.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// The dedup window.
    fn window(&self) -> Duration;

    /// Admits `env` as a new task (state queued, durable before this returns), or answers the
    /// existing record of its request id as a duplicate; a request id reused for other work is
    /// [`BusError::Conflict`] (see [`reuse`]).
    async fn admit(&self, env: Envelope) -> Result<Admission, BusError>;

    /// The answer for a known, unexpired request id without admitting anything: the existing
    /// record as a duplicate, or [`BusError::Conflict`]; `None` when the request id is unknown or
    /// expired (then [`TaskStore::admit`] would start a new task).
    async fn attach(&self, env: &Envelope) -> Result<Option<Admission>, BusError>;

    /// Marks delivery `attempt` as running. `None` when the task is already terminal.
    async fn start(
        &self,
        request_id: &RequestId,
        attempt: u32,
    ) -> Result<Option<TaskRecord>, BusError>;

    /// Records a liveness or progress mark on a running task (its `progress` and `updated_ms`).
    /// Not flushed to disk. `None` when the task is not running.
    async fn progress(
        &self,
        request_id: &RequestId,
        note: serde_json::Value,
    ) -> Result<Option<TaskRecord>, BusError>;

    /// Records the terminal outcome, durably. The first outcome wins; a later one leaves the
    /// record as it is (`recorded: false`).
    async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError>;

    /// [`TaskStore::complete`], asked by a store that announces what it records (the bus's task
    /// events): the same write, not counted among [`TaskStore::unannounced_outcomes`].
    async fn complete_announced(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        self.complete(request_id, outcome).await
    }

    /// How many outcomes this store was asked to record by [`TaskStore::complete`] (not
    /// [`TaskStore::complete_announced`]) so far, each counted before it is written; `None` when
    /// it does not count them. `Some(0)`: every outcome it holds was announced (or is being).
    fn unannounced_outcomes(&self) -> Option<u64> {
        None
    }

    /// Puts a task back to queued after a failed attempt. `None` when it is already terminal.
    async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError>;

    /// The record of a request id inside the dedup window.
    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError>;

    /// The record of a task id (not the record of a later task that reused its request id).
    async fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError>;

    /// Every task not yet terminal, in admission order: the work to re-queue after a restart.
    async fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError>;

    /// Every task inside the dedup window (ended ones too), in admission order: for listings and
    /// task trees.
    async fn list(&self) -> Result<Vec<TaskRecord>, BusError>;

    /// Removes terminal records older than the window. Returns how many went.
    async fn expire(&self) -> Result<usize, BusError>;
}
