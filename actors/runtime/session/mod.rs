//! Sessions: one actor per live conversation; its own queue is the session lane (one run at a
//! time, in arrival order). Transcripts are append-only JSONL; the index lives in sled. On a
//! shared bus a run also takes its session's lease (one node at a time), the transcript is the
//! session's log in the cluster's log store (`lease`), and the index rows every node lists are
//! the cluster's (`index`).

mod actor;
pub(crate) mod compaction;
pub(crate) mod drain;
mod events;
pub(crate) mod history;
pub mod index;
pub mod lease;
pub(crate) mod run;
pub(crate) mod runtime;
mod shards;
#[cfg(test)]
mod shared_tests;
#[cfg(test)]
mod tests;
pub(crate) mod transcript;
pub mod view;

pub use actor::{SessionActor, SessionOpenError};
pub use compaction::{CompactHow, Compacted};
pub use lease::SessionLeases;
pub use shards::SessionShards;

use crate::origin::Origin;
use actix::{Addr, Message};
use bus::Delivery;
use dashmap::DashMap;
use serde::Serialize;
use std::sync::Arc;
use uuid::Uuid;

/// Where a live session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for work.
    Idle,
    /// A run is in progress.
    Processing,
}

/// What the process knows of a live session, readable without asking the actor.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LiveInfo {
    /// Idle or processing.
    pub state: SessionState,
    /// Runs waiting behind the current one.
    pub queued: usize,
    /// The transcript the live actor writes: an actor stopping after its session was deleted
    /// and opened afresh leaves the new actor's entry alone.
    #[serde(skip)]
    pub session_id: Uuid,
    /// The actor that publishes the entry, one number per actor in the process: an actor that
    /// stops after another opened the same session (evicted, then opened again at once) leaves
    /// that one's entry alone.
    #[serde(skip)]
    pub actor: u64,
}

/// Live sessions of every agent, by session key.
pub type LiveSessions = Arc<DashMap<String, LiveInfo>>;

/// Adds a run to the session lane.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Enqueue {
    /// The task.
    pub delivery: Delivery,
    /// Where it came from and which lane it runs on.
    pub origin: Origin,
}

/// Cancels a queued or running task of this session. Answers whether it was found.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct CancelRun {
    /// The task.
    pub task_id: Uuid,
    /// Why, for the transcript.
    pub reason: String,
}

/// Compacts the session between runs (`sessions compact`): refused while a run of it is running
/// or queued (OpenClaw's rule: retry after it finishes); runs that come meanwhile wait for it.
#[derive(Message)]
#[rtype(result = "Result<Compacted, CompactError>")]
pub struct Compact {
    /// Summarise, or keep the last messages.
    pub how: CompactHow,
}

/// Why a compaction asked for was not done.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// A run of the session is running (or a compaction is).
    #[error("Session {key} has an active run; retry after it finishes.")]
    Running {
        /// The session.
        key: String,
    },
    /// Runs of the session are queued.
    #[error("Session {key} has queued work; retry after it finishes.")]
    Queued {
        /// The session.
        key: String,
    },
    /// The session has no index row.
    #[error("no session {key}")]
    Unknown {
        /// The session.
        key: String,
    },
    /// The agent does not run here (stopped, or hosted on another node).
    #[error("agent \"{agent}\" does not run on this node")]
    AgentNotHere {
        /// The agent.
        agent: String,
    },
    /// The summary or the transcript write failed; the history is as it was.
    #[error("compaction of session {key} failed: {error}")]
    Failed {
        /// The session.
        key: String,
        /// What failed.
        error: String,
    },
}

/// Stops the session actor (it is idle; its state stays on disk).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

/// Sent by a session to its agent when a run has left the session.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RunDone {
    /// The session key.
    pub key: String,
    /// The task.
    pub task_id: Uuid,
    /// The size of the session's history in memory now, about (see the agent's history cache).
    pub history_bytes: usize,
}

/// The typed handle of a session actor.
#[derive(Clone)]
pub struct SessionHandle {
    addr: Addr<SessionActor>,
}

impl SessionHandle {
    /// Wraps a started actor.
    pub fn new(addr: Addr<SessionActor>) -> Self {
        Self { addr }
    }

    /// Queues a run. If the actor is gone the delivery is dropped unsettled and redelivered.
    pub fn enqueue(&self, delivery: Delivery, origin: Origin) {
        self.addr.do_send(Enqueue { delivery, origin });
    }

    /// Cancels a task of this session.
    pub async fn cancel(&self, task_id: Uuid, reason: String) -> bool {
        self.addr
            .send(CancelRun { task_id, reason })
            .await
            .unwrap_or(false)
    }

    /// Compacts the session between runs (see [`Compact`]).
    pub async fn compact(&self, key: &str, how: CompactHow) -> Result<Compacted, CompactError> {
        self.addr.send(Compact { how }).await.unwrap_or_else(|_| {
            Err(CompactError::Failed {
                key: key.to_string(),
                error: "the session stopped before it answered".into(),
            })
        })
    }

    /// Stops the actor.
    pub fn stop(&self) {
        self.addr.do_send(Stop);
    }
}
