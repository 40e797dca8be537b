//! The task coordinator: the one live owner of what crosses tasks.
//!
//! The task store (sled, behind the bus) stays the source of truth for every task's record;
//! the coordinator keeps only what its live duties need, and hears everything over the bus:
//!
//! - **the wait-for graph** (`graph`): a waiting `agent_call` registers its wait on
//!   `coord.wait` (request/reply) and drops it on `coord.unwait`; a wait that would close a cycle
//!   is refused with the cycle named. The graph is the authority; the call chain on the envelope
//!   is only the fast path that refuses a cycle inside one tree before any task is posted.
//! - **deadlines**: every unfinished task with a deadline is in a heap; when the injected clock
//!   passes it, the task is ended `timed_out` through [`bus::Bus::end`] (the path a cancel takes),
//!   so a task whose worker is stuck or lost still gets its one terminal answer.
//! - **cascading cancel**: a cancelled task's unfinished children are cancelled (theirs in
//!   turn, as their own cancels come by).
//! - **broadcast groups**: a task posted to a shared topic with `broadcast` is a group task
//!   nobody consumes, with one member task per subscriber; when every member has ended the
//!   coordinator ends the group with their answers.
//! - **telling the poster**: a task ended from outside (cancelled, timed out) whose poster is a
//!   session (a subagent, an `agent_call` that did not wait) gets its outcome announced there,
//!   under the same request id the run would use, so the session hears it exactly once.
//!
//! It follows tasks on [`bus::Topic::task_lifecycle`] (their `queued` and `terminal` events).

mod actor;
pub(crate) mod graph;
mod group;
mod lifecycle;
mod notice;
#[cfg(test)]
mod tests;
pub mod tree;

pub use actor::Coordinator;
pub use graph::{Cycle, WaitEdge, WaitGraph};
pub use notice::outcome_notice;

use actix::{Actor, Addr};
use bus::{Bus, BusError, Clock, Envelope, Topic};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The request a waiting call makes before it waits.
pub const WAIT: &str = "wait";
/// The notice a waiting call sends when its wait ends.
pub(crate) const UNWAIT: &str = "unwait";
/// How long a waiting call waits for the coordinator's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How the coordinator runs.
#[derive(Debug, Clone, Copy)]
pub struct CoordinatorOptions {
    /// How often it compares the earliest deadline with the clock (time on the clock).
    pub tick: Duration,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        Self {
            tick: Duration::from_millis(100),
        }
    }
}

/// What the coordinator tracks right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoordinatorStatus {
    /// Unfinished tasks it follows.
    pub live: usize,
    /// Waits in the wait-for graph.
    pub waits: usize,
    /// Entries in the deadline heap (some may belong to tasks that already ended).
    pub deadlines: usize,
    /// Tasks it ended because their deadline passed.
    pub timed_out: u64,
    /// Overdue tasks it left alone because their run had already announced their outcome (the
    /// run records it next), so a session is never told one outcome while the record holds
    /// another.
    pub spared: u64,
    /// Tasks it cancelled because their parent was cancelled.
    pub cascaded: u64,
}

/// The coordinator's answer to a wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum WaitAnswer {
    /// The wait is registered.
    Granted,
    /// The wait would close this cycle of agents; nothing was registered.
    Deadlock {
        /// The agents around the cycle.
        cycle: Vec<String>,
    },
}

/// Why a wait could not be registered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// It would close a cycle.
    #[error(transparent)]
    Deadlock(#[from] Cycle),
    /// The coordinator did not answer.
    #[error("the task coordinator did not answer: {0}")]
    Unavailable(#[source] BusError),
}

/// Why the coordinator could not start.
#[derive(Debug, thiserror::Error)]
#[error("task coordinator: {0}")]
pub struct CoordinatorError(#[from] BusError);

/// The coordinator's handle: the whole public API of the actor.
#[derive(Clone)]
pub struct CoordinatorHandle {
    addr: Addr<Coordinator>,
}

impl CoordinatorHandle {
    /// Subscribes to the task lifecycle and the coordinator's requests, then starts the actor,
    /// which first picks up the unfinished tasks already in the store.
    pub async fn start(
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
        opts: CoordinatorOptions,
    ) -> Result<Self, CoordinatorError> {
        let lifecycle = bus.subscribe(Topic::task_lifecycle()).await?;
        let requests = bus.subscribe(Topic::coordinator_requests()).await?;
        let actor = Coordinator::new(bus, clock, opts);
        let addr = Coordinator::create(move |ctx| {
            actor.attach(ctx, lifecycle, requests);
            actor
        });
        Ok(Self { addr })
    }

    /// What it tracks now.
    pub async fn status(&self) -> CoordinatorStatus {
        self.addr.send(actor::Status).await.unwrap_or_default()
    }

    /// Stops the actor (its subscriptions end with it).
    pub fn stop(&self) {
        self.addr.do_send(actor::Stop);
    }
}

impl std::fmt::Debug for CoordinatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoordinatorHandle")
    }
}

/// Registers `edge` with the coordinator over the bus before a call waits: `Ok` when the wait
/// may go ahead, [`WaitError::Deadlock`] naming the cycle it would close.
pub async fn register_wait(bus: &dyn Bus, edge: &WaitEdge) -> Result<(), WaitError> {
    let unavailable = WaitError::Unavailable;
    let inbox = Topic::inbox();
    let mut replies = bus.subscribe(inbox.clone()).await.map_err(unavailable)?;
    let payload = serde_json::to_value(edge)
        .map_err(|e| unavailable(BusError::Invalid(format!("encode wait: {e}"))))?;
    let mut ask = Envelope::event(Topic::coordinator(WAIT), payload);
    ask.reply_to = Some(inbox);
    bus.publish(ask).await.map_err(unavailable)?;
    let reply = tokio::time::timeout(ANSWER_TIMEOUT, replies.next())
        .await
        .map_err(|_| {
            unavailable(BusError::TimedOut {
                after: ANSWER_TIMEOUT,
            })
        })?
        .ok_or_else(|| unavailable(BusError::Closed("coordinator replies ended".into())))?;
    match serde_json::from_value(reply.envelope().payload.clone()) {
        Ok(WaitAnswer::Granted) => Ok(()),
        Ok(WaitAnswer::Deadlock { cycle }) => Err(Cycle { agents: cycle }.into()),
        Err(e) => Err(unavailable(BusError::Invalid(format!(
            "not a coordinator answer: {e}"
        )))),
    }
}

/// Tells the coordinator that the wait of `edge` ended. A lost notice is harmless: the edge also
/// goes when either task ends.
pub async fn end_wait(bus: &dyn Bus, edge: &WaitEdge) {
    let Ok(payload) = serde_json::to_value(edge) else {
        return;
    };
    if let Err(e) = bus
        .publish(Envelope::event(Topic::coordinator(UNWAIT), payload))
        .await
    {
        tracing::warn!(waiter = %edge.waiter, callee = %edge.callee, error = %e, "Could not tell the coordinator a wait ended; it goes when the task ends.");
    }
}
