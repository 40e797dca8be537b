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

    /// Stops the actor.
    pub fn stop(&self) {
        self.addr.do_send(Stop);
    }
}
