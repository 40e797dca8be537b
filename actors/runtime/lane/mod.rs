//! Global lanes: named concurrency caps shared by every agent and session.
//!
//! A run that left its session lane takes a slot in a global lane (`main` for inbound messages,
//! `cron` for scheduled jobs, `subagent` for spawned work, or any lane named in `[lanes]` of
//! `clawbus.toml`). Each lane lets at most `cap` runs hold a slot; the others wait in FIFO order.
//!
//! One actor (`actor::LaneActor`) owns every queue; [`Lanes`] is its whole public API:
//! - [`Lanes::acquire`] waits for a slot and returns a [`LanePermit`]; dropping the permit frees
//!   the slot. A waiting acquire ends early when its [`Ticket`]'s deadline passes
//!   ([`LaneError::DeadlineExceeded`]), when its cancel signal fires ([`LaneError::Cancelled`]),
//!   or when the caller drops the future; in every case its queue entry is removed at once, so the
//!   next release goes to the next live waiter.
//! - Re-entrancy: a run holding a slot passes [`LanePermit::token`] to the work it spawns
//!   ([`Ticket::parent`]). That work, acquiring the SAME lane, shares the parent's slot: it runs at
//!   once, takes no extra slot, and the slot is freed only when parent and nested permits are all
//!   gone. On another lane it queues normally; the token carries the whole chain, so work that comes
//!   back to an ancestor's lane shares that ancestor's slot. A run never waits on its own slot, so
//!   `cron = 1` cannot self-deadlock.
//!
//! Every enqueue and dequeue is logged (debug) with `lane`, `queue_size` and `wait_ms`; a wait
//! longer than `[lanes] warn_after` (2 s) is a warning. Metrics per lane: `clawbus_lane_active`,
//! `clawbus_lane_queued`, `clawbus_lane_capacity` (gauges), `clawbus_lane_wait_seconds`
//! (histogram) and `clawbus_lane_abandoned_total{reason}` (waits that ended without a slot).

mod actor;
mod permit;

#[cfg(test)]
mod tests;

use crate::metrics::Metrics;
use actix::{Actor, Addr, Message};
use actor::LaneActor;
use bus::Clock;
use clawbus_core::config::LanesDef;
use permit::Slot;
pub use permit::{LanePermit, ParentToken, Ticket};
use std::future::pending;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

pub use clawbus_core::config::{CRON_LANE, MAIN_LANE, SUBAGENT_LANE};

/// Why an acquire ended without a slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaneError {
    /// No lane has this name.
    #[error("unknown lane \"{lane}\" (configured: {})", known.join(", "))]
    UnknownLane {
        /// The name asked for.
        lane: String,
        /// The configured lanes.
        known: Vec<String>,
    },
    /// The ticket's deadline passed before the run got a slot: while it was queued behind
    /// busy slots (`queued`), or before it reached the lane at all.
    #[error("{}", deadline_text(lane, *waited, *queued))]
    DeadlineExceeded {
        /// The lane.
        lane: String,
        /// How long the run waited.
        waited: Duration,
        /// True when the lane had queued the run (no slot was free when it asked); false when
        /// the deadline passed before the lane answered, or had passed before the run asked.
        queued: bool,
    },
    /// The ticket's cancel signal fired, or `Lanes::cancel_waiting` named the run.
    #[error("lane \"{lane}\": the wait was cancelled")]
    Cancelled {
        /// The lane.
        lane: String,
    },
    /// The lanes actor has stopped (the daemon is shutting down).
    #[error("the lanes actor has stopped")]
    Closed,
}

/// The message of [`LaneError::DeadlineExceeded`]: "no free slot" only when that was the case.
fn deadline_text(lane: &str, waited: Duration, queued: bool) -> String {
    if queued {
        format!(
            "lane \"{lane}\": no free slot before the task's deadline (waited {} ms)",
            waited.as_millis()
        )
    } else {
        format!(
            "the task's deadline passed before its turn started (before lane \"{lane}\" gave it a slot)"
        )
    }
}

/// One lane as [`Lanes::status`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneStatus {
    /// The lane's name.
    pub name: String,
    /// Its concurrency cap.
    pub cap: usize,
    /// Runs holding a slot, oldest grant first (nested runs sharing a slot are not listed).
    pub holding: Vec<Uuid>,
    /// Runs waiting, in the order they will be served.
    pub waiting: Vec<Uuid>,
}

/// Why a waiter left its queue without a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaveReason {
    /// The caller dropped the acquire future.
    Dropped,
    /// The ticket's cancel signal fired.
    Cancelled,
    /// The ticket's deadline passed.
    Deadline,
}

impl LeaveReason {
    fn as_str(self) -> &'static str {
        match self {
            Self::Dropped => "dropped",
            Self::Cancelled => "cancelled",
            Self::Deadline => "deadline",
        }
    }
}

/// Queue a run; the slot (or the error) comes back on `reply`.
#[derive(Message)]
#[rtype(result = "()")]
struct Enqueue {
    lane: String,
    waiter: u64,
    run_id: Uuid,
    /// When the caller started waiting: the wait includes the trip through the mailbox.
    since: Instant,
    reply: oneshot::Sender<Result<Slot, LaneError>>,
}

/// A waiter gave up; remove it from its queue.
#[derive(Message)]
#[rtype(result = "()")]
struct Leave {
    lane: String,
    waiter: u64,
    reason: LeaveReason,
}

/// A slot is free again.
#[derive(Message)]
#[rtype(result = "()")]
struct Release {
    lane: Arc<str>,
    grant: u64,
}

/// Cancel every wait of a run; answers how many there were.
#[derive(Message)]
#[rtype(result = "usize")]
struct CancelRun {
    run_id: Uuid,
}

/// Every lane's state.
#[derive(Message)]
#[rtype(result = "Vec<LaneStatus>")]
struct Status;

/// Sends [`Leave`] when a wait ends without a slot, including when the future is dropped.
struct Queued {
    actor: Addr<LaneActor>,
    lane: String,
    waiter: u64,
    reason: Option<LeaveReason>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(reason) = self.reason {
            // do_send ignores capacity: lost only if the actor is gone, with the queue itself.
            self.actor.do_send(Leave {
                lane: std::mem::take(&mut self.lane),
                waiter: self.waiter,
                reason,
            });
        }
    }
}

/// The handle of the lanes actor.
#[derive(Clone)]
pub struct Lanes {
    actor: Addr<LaneActor>,
    next_waiter: Arc<AtomicU64>,
    /// The one clock: waits are measured and deadlines kept on its monotonic time.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("running", &self.actor.connected())
            .finish()
    }
}

impl Lanes {
    /// Starts the lanes actor with these lanes, reporting to `metrics`, keeping time on `clock`
    /// (a [`Ticket`]'s deadline is an instant of its monotonic time). Must be called inside a
    /// running actix `System`.
    pub fn start(def: &LanesDef, metrics: Metrics, clock: Arc<dyn Clock>) -> Lanes {
        let actor = LaneActor::new(def, &metrics, clock.clone()).start();
        Lanes {
            actor,
            next_waiter: Arc::new(AtomicU64::new(0)),
            clock,
        }
    }

    /// Waits for a slot in `lane` (FIFO), or shares the slot of the ticket's parent on that lane.
    ///
    /// Cancel-safe: dropping the future removes the queue entry, and a slot granted at that very
    /// moment is released.
    pub async fn acquire(&self, lane: &str, ticket: Ticket) -> Result<LanePermit, LaneError> {
        let Ticket {
            run_id,
            deadline,
            parent,
            cancel,
        } = ticket;
        let parent = parent.unwrap_or_default();
        if let Some(slot) = parent.slot_on(lane) {
            tracing::debug!(lane, run_id = %run_id, "Nested run shares its parent's lane slot.");
            return Ok(LanePermit::new(slot, &parent, run_id, Duration::ZERO, true));
        }
        let clock = &self.clock;
        let started = clock.now();
        if deadline.is_some_and(|d| d.instant() <= started) {
            return Err(LaneError::DeadlineExceeded {
                lane: lane.to_string(),
                waited: Duration::ZERO,
                queued: false,
            });
        }
        let waiter = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let (reply, granted) = oneshot::channel();
        let mut queued = Queued {
            actor: self.actor.clone(),
            lane: lane.to_string(),
            waiter,
            reason: Some(LeaveReason::Dropped),
        };
        // `send` queues the message now (or when first polled if the mailbox is full).
        let enqueue = self.actor.send(Enqueue {
            lane: lane.to_string(),
            waiter,
            run_id,
            since: started,
            reply,
        });
        // Set once the lanes actor has queued the run: it grants at once when a slot is free.
        let queued_by_lane = AtomicBool::new(false);
        let wait = async {
            enqueue.await.map_err(|_| LaneError::Closed)?;
            queued_by_lane.store(true, Ordering::Relaxed);
            granted.await.map_err(|_| LaneError::Closed)?
        };
        let cancelled = async move {
            match cancel {
                Some(signal) => signal.await,
                None => pending().await,
            }
        };
        let expired = async move {
            match deadline {
                Some(at) => clock.sleep_until(at.instant()).await,
                None => pending().await,
            }
        };
        let reason = tokio::select! {
            biased;
            result = wait => {
                queued.reason = None;
                let slot = result?;
                let waited = clock.since(started);
                return Ok(LanePermit::new(Arc::new(slot), &parent, run_id, waited, false));
            }
            () = cancelled => LeaveReason::Cancelled,
            () = expired => LeaveReason::Deadline,
        };
        queued.reason = Some(reason);
        Err(match reason {
            LeaveReason::Deadline => LaneError::DeadlineExceeded {
                lane: lane.to_string(),
                waited: clock.since(started),
                queued: queued_by_lane.load(Ordering::Relaxed),
            },
            _ => LaneError::Cancelled {
                lane: lane.to_string(),
            },
        })
    }

    #[cfg(test)]
    /// Cancels every queued wait of `run_id` (each ends with [`LaneError::Cancelled`]); answers
    /// how many there were. A run already holding its slot is not affected.
    pub(crate) async fn cancel_waiting(&self, run_id: Uuid) -> Result<usize, LaneError> {
        self.actor
            .send(CancelRun { run_id })
            .await
            .map_err(|_| LaneError::Closed)
    }

    /// Every lane's cap, holders and waiters, by lane name.
    pub async fn status(&self) -> Result<Vec<LaneStatus>, LaneError> {
        self.actor.send(Status).await.map_err(|_| LaneError::Closed)
    }
}
