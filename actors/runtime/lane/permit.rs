//! What a run holds and carries: [`Ticket`] (the request), [`LanePermit`] (the slot),
//! [`ParentToken`] (the slots it lends to nested work).

use super::{LaneActor, Release};
use actix::Addr;
use bus::Deadline;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;
use uuid::Uuid;

/// Who waits for a slot, until when, on whose behalf, and what cancels the wait.
pub struct Ticket {
    pub(super) run_id: Uuid,
    pub(super) deadline: Option<Deadline>,
    pub(super) parent: Option<ParentToken>,
    pub(super) cancel: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Ticket {
    /// A ticket for this run (its task or run id, used in logs and status), with no deadline.
    pub fn new(run_id: Uuid) -> Self {
        Self {
            run_id,
            deadline: None,
            parent: None,
            cancel: None,
        }
    }

    /// Bounds the wait: once the lanes' clock reaches `at` (made on that clock:
    /// [`Deadline::after`]), the acquire fails with
    /// [`LaneError::DeadlineExceeded`](super::LaneError::DeadlineExceeded).
    pub fn deadline(mut self, at: Deadline) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Marks the run as nested work of the run holding `token` (see [`LanePermit::token`]).
    pub fn parent(mut self, token: ParentToken) -> Self {
        self.parent = Some(token);
        self
    }

    #[cfg(test)]
    /// Ends the wait with [`LaneError::Cancelled`](super::LaneError::Cancelled) when `signal`
    /// completes (for example `cancel_token.cancelled_owned()`, or a `oneshot::Receiver` mapped
    /// to `()`).
    pub(crate) fn cancel_on(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.cancel = Some(Box::pin(signal));
        self
    }

    /// The run this ticket is for.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("run_id", &self.run_id)
            .field("deadline", &self.deadline)
            .field("parent", &self.parent)
            .field("cancellable", &self.cancel.is_some())
            .finish()
    }
}

/// A held slot. Freed when the last permit sharing it is dropped: the release is a message to
/// the lanes actor sent with `do_send`, which ignores mailbox capacity, so it is lost only when
/// the actor is gone and there is nothing left to release.
pub(super) struct Slot {
    pub(super) lane: Arc<str>,
    pub(super) grant: u64,
    pub(super) actor: Option<Addr<LaneActor>>,
}

impl Slot {
    /// Forgets the actor: the caller frees the slot itself (the actor, when a grant bounced).
    pub(super) fn defuse(mut self) {
        self.actor = None;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(actor) = self.actor.take() {
            actor.do_send(Release {
                lane: self.lane.clone(),
                grant: self.grant,
            });
        }
    }
}

/// Names the slots a run holds, for the work it spawns (see [`Ticket::parent`]). Holds no slot
/// itself: once the parent's permit is gone, nested work queues like any other.
#[derive(Clone, Default)]
pub struct ParentToken {
    /// The run's own slot first, then its ancestors' on other lanes.
    chain: Vec<(Arc<str>, Weak<Slot>)>,
}

impl ParentToken {
    /// The live slot this chain holds on `lane`.
    pub(super) fn slot_on(&self, lane: &str) -> Option<Arc<Slot>> {
        self.chain
            .iter()
            .filter(|(l, _)| &**l == lane)
            .find_map(|(_, slot)| slot.upgrade())
    }

    /// Whether a run with this token would share a slot on `lane` instead of queueing.
    pub fn holds(&self, lane: &str) -> bool {
        self.slot_on(lane).is_some()
    }
}

impl std::fmt::Debug for ParentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lanes: Vec<&str> = self.chain.iter().map(|(l, _)| &**l).collect();
        f.debug_struct("ParentToken")
            .field("lanes", &lanes)
            .finish()
    }
}

/// A slot in a lane, held until dropped.
pub struct LanePermit {
    slot: Arc<Slot>,
    token: ParentToken,
    run_id: Uuid,
    waited: Duration,
    shared: bool,
}

impl LanePermit {
    pub(super) fn new(
        slot: Arc<Slot>,
        parent: &ParentToken,
        run_id: Uuid,
        waited: Duration,
        shared: bool,
    ) -> Self {
        let lane = slot.lane.clone();
        let mut chain = vec![(lane.clone(), Arc::downgrade(&slot))];
        chain.extend(parent.chain.iter().filter(|(l, _)| *l != lane).cloned());
        Self {
            slot,
            token: ParentToken { chain },
            run_id,
            waited,
            shared,
        }
    }

    /// The lane.
    pub fn lane(&self) -> &str {
        &self.slot.lane
    }

    /// The run that holds it.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// How long the run waited in the queue.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    #[cfg(test)]
    /// True when this permit shares a parent's slot instead of holding its own.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }

    /// The token to put on the [`Ticket`]s of work this run spawns.
    pub fn token(&self) -> ParentToken {
        self.token.clone()
    }
}

impl std::fmt::Debug for LanePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanePermit")
            .field("lane", &self.lane())
            .field("run_id", &self.run_id)
            .field("waited", &self.waited)
            .field("shared", &self.shared)
            .finish()
    }
}
