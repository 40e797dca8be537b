//! What a tool may know of, and do with, the run that calls it: its task, the chain of agents
//! waiting on it, its deadline, and its lane slot.

use crate::lane::{LaneError, LanePermit, Lanes, Ticket};
use bus::Clock;
use clawbus_core::ids::SessionKey;
use std::sync::Arc;
use uuid::Uuid;

/// The run calling a tool.
pub struct RunContext {
    /// The run's task.
    pub task_id: Uuid,
    /// Its request id.
    pub request_id: String,
    /// Its session.
    pub session: SessionKey,
    /// The agents whose turns wait on this one, outermost first, ending with this run's agent:
    /// the path of waiting calls in the agents' wait-for graph.
    pub call_chain: Vec<clawbus_core::ids::AgentId>,
    /// Unix ms after which the task is no longer wanted.
    pub deadline_ms: Option<u64>,
    /// The one clock.
    pub clock: Arc<dyn Clock>,
    /// How many subagent spawns deep the run is (0 for work nobody spawned).
    pub depth: u32,
    /// Subagents this run has spawned so far.
    pub spawned: std::sync::atomic::AtomicU32,
    /// Messages this run has sent into sessions so far (`sessions_send`).
    pub sent: std::sync::atomic::AtomicU32,
    /// The run's lane slot.
    pub slot: RunSlot,
}

/// A run's slot in its lane, which a tool that waits on other work gives up while it waits, so
/// waiting never starves the lane.
pub struct RunSlot {
    lanes: Lanes,
    lane: String,
    run_id: Uuid,
    permit: tokio::sync::Mutex<Option<LanePermit>>,
}

impl RunSlot {
    /// The slot `permit` of run `run_id` in `lane`.
    pub fn new(lanes: Lanes, lane: String, run_id: Uuid, permit: LanePermit) -> Self {
        Self {
            lanes,
            lane,
            run_id,
            permit: tokio::sync::Mutex::new(Some(permit)),
        }
    }

    /// Gives the slot back to the lane while the run waits.
    pub async fn release(&self) {
        if self.permit.lock().await.take().is_some() {
            tracing::debug!(lane = %self.lane, run_id = %self.run_id, "Run gave its lane slot up while it waits.");
        }
    }

    /// Takes a slot again after a wait (queueing behind the runs already waiting).
    pub(crate) async fn reacquire(&self) -> Result<(), LaneError> {
        let mut held = self.permit.lock().await;
        if held.is_none() {
            *held = Some(
                self.lanes
                    .acquire(&self.lane, Ticket::new(self.run_id))
                    .await?,
            );
        }
        Ok(())
    }
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("task_id", &self.task_id)
            .field("request_id", &self.request_id)
            .field("session", &self.session)
            .field("call_chain", &self.call_chain)
            .field("deadline_ms", &self.deadline_ms)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}
