//! The lanes actor: every lane's queue, holders and metrics.

use super::{CancelRun, Enqueue, LaneError, LaneStatus, Leave, Release, Slot, Status};
use crate::metrics::{Counter, Gauge, Histogram, Metrics, SECONDS_BUCKETS};
use actix::{Actor, Addr, AsyncContext, Context, Handler};
use bus::Clock;
use clawbus_core::config::LanesDef;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

/// Releases and leaves are `do_send`s that ignore this; it bounds the `send`s (enqueues, queries).
const MAILBOX_CAPACITY: usize = 4096;

/// Owns every lane. Handlers are short and never await, so the actor answers at once.
pub(crate) struct LaneActor {
    lanes: BTreeMap<Arc<str>, Lane>,
    warn_after: Duration,
    next_grant: u64,
    /// The one clock (how long runs waited and held their slots).
    clock: Arc<dyn Clock>,
}

struct Lane {
    name: Arc<str>,
    cap: usize,
    /// Granted slots by grant id (ascending = oldest first).
    holders: BTreeMap<u64, Holder>,
    queue: VecDeque<Waiter>,
    metrics: LaneMetrics,
}

struct Holder {
    run_id: Uuid,
    since: Instant,
}

struct Waiter {
    id: u64,
    run_id: Uuid,
    since: Instant,
    reply: oneshot::Sender<Result<Slot, LaneError>>,
}

struct LaneMetrics {
    active: Gauge,
    queued: Gauge,
    wait: Histogram,
    dropped: Counter,
    cancelled: Counter,
    deadline: Counter,
}

impl LaneMetrics {
    fn register(metrics: &Metrics, lane: &str, cap: usize) -> Self {
        let labels = [("lane", lane)];
        let abandoned = |reason: &str| {
            metrics.counter(
                "clawbus_lane_abandoned_total",
                "Waits for a lane slot that ended without one, by reason (dropped, cancelled, deadline).",
                &[("lane", lane), ("reason", reason)],
            )
        };
        metrics
            .gauge(
                "clawbus_lane_capacity",
                "Concurrency cap of the lane.",
                &labels,
            )
            .set(cap as i64);
        Self {
            active: metrics.gauge(
                "clawbus_lane_active",
                "Runs holding a slot in the lane.",
                &labels,
            ),
            queued: metrics.gauge(
                "clawbus_lane_queued",
                "Runs waiting for a slot in the lane.",
                &labels,
            ),
            wait: metrics.histogram(
                "clawbus_lane_wait_seconds",
                "Time a run waited for its lane slot, in seconds.",
                SECONDS_BUCKETS,
                &labels,
            ),
            dropped: abandoned("dropped"),
            cancelled: abandoned("cancelled"),
            deadline: abandoned("deadline"),
        }
    }
}

impl Lane {
    fn sync_gauges(&self) {
        self.metrics.active.set(self.holders.len() as i64);
        self.metrics.queued.set(self.queue.len() as i64);
    }

    /// Grants free slots to the waiters at the head of the queue.
    fn pump(
        &mut self,
        next_grant: &mut u64,
        me: &Addr<LaneActor>,
        warn_after: Duration,
        now: Instant,
    ) {
        while self.holders.len() < self.cap {
            let Some(waiter) = self.queue.pop_front() else {
                break;
            };
            let grant = *next_grant;
            *next_grant += 1;
            let slot = Slot {
                lane: self.name.clone(),
                grant,
                actor: Some(me.clone()),
            };
            let waited = now.saturating_duration_since(waiter.since);
            if let Err(bounced) = waiter.reply.send(Ok(slot)) {
                // The waiter's future is gone; its Leave message is on the way. Keep the slot.
                if let Ok(slot) = bounced {
                    slot.defuse();
                }
                continue;
            }
            self.holders.insert(
                grant,
                Holder {
                    run_id: waiter.run_id,
                    since: now,
                },
            );
            self.metrics.wait.observe(waited.as_secs_f64());
            let wait_ms = waited.as_millis() as u64;
            let queue_size = self.queue.len();
            let active = self.holders.len();
            if waited > warn_after {
                tracing::warn!(lane = %self.name, run_id = %waiter.run_id, queue_size, active, wait_ms, "Run waited long for a lane slot.");
            } else {
                tracing::debug!(lane = %self.name, run_id = %waiter.run_id, queue_size, active, wait_ms, "Run took a lane slot.");
            }
        }
        self.sync_gauges();
    }
}

impl LaneActor {
    pub(super) fn new(def: &LanesDef, metrics: &Metrics, clock: Arc<dyn Clock>) -> Self {
        let lanes = def
            .caps
            .iter()
            .map(|(name, &cap)| {
                let name: Arc<str> = Arc::from(name.as_str());
                let lane = Lane {
                    name: name.clone(),
                    cap: cap.max(1),
                    holders: BTreeMap::new(),
                    queue: VecDeque::new(),
                    metrics: LaneMetrics::register(metrics, &name, cap.max(1)),
                };
                lane.sync_gauges();
                (name, lane)
            })
            .collect();
        Self {
            lanes,
            warn_after: def.warn_after,
            next_grant: 0,
            clock,
        }
    }
}

impl Actor for LaneActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
        let lanes: Vec<String> = self
            .lanes
            .values()
            .map(|l| format!("{}={}", l.name, l.cap))
            .collect();
        tracing::info!(lanes = %lanes.join(","), "Lanes started.");
    }
}

impl Handler<Enqueue> for LaneActor {
    type Result = ();

    fn handle(&mut self, msg: Enqueue, ctx: &mut Self::Context) {
        let Some(lane) = self.lanes.get_mut(msg.lane.as_str()) else {
            let known = self.lanes.keys().map(|k| k.to_string()).collect();
            tracing::warn!(lane = %msg.lane, run_id = %msg.run_id, "Run asked for an unknown lane.");
            // The caller may be gone already; then nobody is waiting for this answer.
            let _ = msg.reply.send(Err(LaneError::UnknownLane {
                lane: msg.lane,
                known,
            }));
            return;
        };
        lane.queue.push_back(Waiter {
            id: msg.waiter,
            run_id: msg.run_id,
            since: msg.since,
            reply: msg.reply,
        });
        tracing::debug!(lane = %lane.name, run_id = %msg.run_id, queue_size = lane.queue.len(), active = lane.holders.len(), "Run queued for a lane slot.");
        let now = self.clock.now();
        lane.pump(&mut self.next_grant, &ctx.address(), self.warn_after, now);
    }
}

impl Handler<Leave> for LaneActor {
    type Result = ();

    fn handle(&mut self, msg: Leave, _: &mut Self::Context) {
        let Some(lane) = self.lanes.get_mut(msg.lane.as_str()) else {
            return;
        };
        match msg.reason {
            super::LeaveReason::Dropped => lane.metrics.dropped.inc(),
            super::LeaveReason::Cancelled => lane.metrics.cancelled.inc(),
            super::LeaveReason::Deadline => lane.metrics.deadline.inc(),
        }
        // Not found: the slot was granted as the waiter left; the dropped grant releases it.
        let Some(at) = lane.queue.iter().position(|w| w.id == msg.waiter) else {
            return;
        };
        let Some(waiter) = lane.queue.remove(at) else {
            return;
        };
        let waited = self.clock.since(waiter.since);
        let wait_ms = waited.as_millis() as u64;
        let queue_size = lane.queue.len();
        let reason = msg.reason.as_str();
        if waited > self.warn_after {
            tracing::warn!(lane = %lane.name, run_id = %waiter.run_id, queue_size, wait_ms, reason, "Run left the lane queue after a long wait.");
        } else {
            tracing::debug!(lane = %lane.name, run_id = %waiter.run_id, queue_size, wait_ms, reason, "Run left the lane queue.");
        }
        lane.sync_gauges();
    }
}

impl Handler<Release> for LaneActor {
    type Result = ();

    fn handle(&mut self, msg: Release, ctx: &mut Self::Context) {
        let Some(lane) = self.lanes.get_mut(&*msg.lane) else {
            return;
        };
        let Some(holder) = lane.holders.remove(&msg.grant) else {
            tracing::debug!(lane = %lane.name, grant = msg.grant, "Release of a slot not held; ignored.");
            return;
        };
        let held_ms = self.clock.since(holder.since).as_millis() as u64;
        tracing::debug!(lane = %lane.name, run_id = %holder.run_id, queue_size = lane.queue.len(), active = lane.holders.len(), held_ms, "Run released its lane slot.");
        let now = self.clock.now();
        lane.pump(&mut self.next_grant, &ctx.address(), self.warn_after, now);
    }
}

impl Handler<CancelRun> for LaneActor {
    type Result = usize;

    fn handle(&mut self, msg: CancelRun, _: &mut Self::Context) -> usize {
        let mut cancelled = 0;
        for lane in self.lanes.values_mut() {
            let (gone, kept): (VecDeque<Waiter>, VecDeque<Waiter>) =
                std::mem::take(&mut lane.queue)
                    .into_iter()
                    .partition(|w| w.run_id == msg.run_id);
            lane.queue = kept;
            for waiter in gone {
                cancelled += 1;
                lane.metrics.cancelled.inc();
                let wait_ms = self.clock.since(waiter.since).as_millis() as u64;
                tracing::debug!(lane = %lane.name, run_id = %waiter.run_id, queue_size = lane.queue.len(), wait_ms, "Queued run cancelled.");
                // A waiter that is already gone needs no answer.
                let _ = waiter.reply.send(Err(LaneError::Cancelled {
                    lane: lane.name.to_string(),
                }));
            }
            lane.sync_gauges();
        }
        cancelled
    }
}

impl Handler<Status> for LaneActor {
    type Result = Vec<LaneStatus>;

    fn handle(&mut self, _: Status, _: &mut Self::Context) -> Vec<LaneStatus> {
        self.lanes
            .values()
            .map(|lane| LaneStatus {
                name: lane.name.to_string(),
                cap: lane.cap,
                holding: lane.holders.values().map(|h| h.run_id).collect(),
                waiting: lane.queue.iter().map(|w| w.run_id).collect(),
            })
            .collect()
    }
}
