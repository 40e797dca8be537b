//! The delivery actor's state and handlers.

use super::{
    Backoff, DeliveryDeps, DeliveryRecord, DeliveryState, Enqueue, Pending, PendingView, SendError,
    Sink, Tick,
};
use crate::{OutboundMessage, is_silent};
use actix::prelude::*;
use bus::events::TaskEventKind;
use bus::{Bus, Clock, Delivery};
use clawbus_runtime::outbox::Outbox;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Deliveries waiting or being tried at once; past it a new one is recorded failed at once.
pub(super) const MAX_PENDING: usize = 10_000;

struct Job {
    msg: OutboundMessage,
    to: String,
    parts: Vec<String>,
    part: usize,
    /// Tries of the current part.
    tries: u32,
    /// Tries over every part.
    attempts: u32,
    due_ms: u64,
    in_flight: bool,
}

/// The actor: the deliveries of one channel, by arrival order.
pub(crate) struct DeliveryActor {
    channel: String,
    sink: Arc<dyn Sink>,
    bus: Arc<dyn Bus>,
    clock: Arc<dyn Clock>,
    outbox: Outbox,
    backoff: Backoff,
    jitter: fn() -> f64,
    metrics: clawbus_runtime::metrics::Metrics,
    jobs: BTreeMap<u64, Job>,
    next_id: u64,
}

/// The end of one try.
#[derive(Message)]
#[rtype(result = "()")]
struct Tried {
    id: u64,
    result: Result<(), SendError>,
}

impl DeliveryActor {
    pub(super) fn new(channel: String, sink: Arc<dyn Sink>, deps: DeliveryDeps) -> Self {
        Self {
            channel,
            sink,
            bus: deps.bus,
            clock: deps.clock,
            outbox: deps.outbox,
            backoff: deps.backoff,
            jitter: deps.jitter,
            metrics: deps.metrics,
            jobs: BTreeMap::new(),
            next_id: 0,
        }
    }

    fn enqueue(&mut self, msg: OutboundMessage, ctx: &mut Context<Self>) {
        if is_silent(&msg.text) {
            tracing::debug!(channel = %self.channel, "Silent reply not delivered.");
            self.unstage(&msg);
            return;
        }
        let id = msg.delivery_id();
        if id.is_some() && self.jobs.values().any(|j| j.msg.delivery_id() == id) {
            tracing::debug!(channel = %self.channel, delivery = ?id, "Already being delivered.");
            return;
        }
        if let Err(e) = self.outbox.stage(&self.channel, &msg) {
            tracing::error!(channel = %self.channel, delivery = ?id, error = %e, "Delivery not staged in the outbox; a restart would not resume it.");
        }
        let Some(to) = msg.to.clone().filter(|t| !t.is_empty()) else {
            self.end(
                msg,
                String::new(),
                0,
                0,
                Some("no target (`to`) to deliver to".into()),
            );
            return;
        };
        if self.jobs.len() >= MAX_PENDING {
            let error = format!("{MAX_PENDING} deliveries already pending on this channel");
            self.end(msg, to, 0, 0, Some(error));
            return;
        }
        let parts = self.sink.parts(&msg.text);
        self.next_id += 1;
        let job = Job {
            msg,
            to,
            parts,
            part: 0,
            tries: 0,
            attempts: 0,
            due_ms: self.clock.now_ms(),
            in_flight: false,
        };
        self.jobs.insert(self.next_id, job);
        self.pump(ctx);
    }

    /// Starts every try that is due, one target at a time in arrival order, and sets a timer
    /// for the next one that is not.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now_ms();
        let mut busy: Vec<String> = Vec::new();
        let mut next_due: Option<u64> = None;
        let mut starts = Vec::new();
        for (&id, job) in self.jobs.iter_mut() {
            if busy.contains(&job.to) {
                continue;
            }
            busy.push(job.to.clone());
            if job.in_flight {
                continue;
            }
            if job.due_ms > now {
                next_due = Some(next_due.map_or(job.due_ms, |d| d.min(job.due_ms)));
                continue;
            }
            let Some(part) = job.parts.get(job.part).cloned() else {
                continue;
            };
            job.in_flight = true;
            job.tries += 1;
            job.attempts += 1;
            starts.push((id, job.msg.clone(), job.to.clone(), part));
        }
        for (id, msg, to, part) in starts {
            let sink = self.sink.clone();
            ctx.spawn(
                async move { sink.send(&msg, &to, &part).await }
                    .into_actor(self)
                    .map(move |result, _, ctx| ctx.notify(Tried { id, result })),
            );
        }
        if let Some(due) = next_due {
            ctx.run_later(
                Duration::from_millis(due.saturating_sub(now)),
                |act, ctx| act.pump(ctx),
            );
        }
    }

    fn tried(&mut self, id: u64, result: Result<(), SendError>) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.in_flight = false;
        let error = match result {
            Ok(()) => {
                job.part += 1;
                job.tries = 0;
                job.due_ms = self.clock.now_ms();
                if job.part < job.parts.len() {
                    return;
                }
                None
            }
            Err(SendError::Transient {
                reason,
                retry_after,
            }) if !self.backoff.exhausted(job.tries) => {
                let wait = self.backoff.delay(job.tries, (self.jitter)(), retry_after);
                job.due_ms = self.clock.now_ms().saturating_add(wait.as_millis() as u64);
                self.metrics
                    .counter(
                        "clawbus_delivery_retries_total",
                        "Delivery tries that failed and are tried again, by channel.",
                        &[("channel", self.channel.as_str())],
                    )
                    .inc();
                tracing::warn!(channel = %self.channel, to = %job.to, tries = job.tries, wait_ms = wait.as_millis() as u64, error = %reason, "Delivery failed; trying again.");
                return;
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(job) = self.jobs.remove(&id) {
            let parts = job.parts.len();
            self.end(job.msg, job.to, job.attempts, parts, error);
        }
    }

    /// Takes the channel's pending outbox entries, in the order they were staged.
    fn resume(&mut self, ctx: &mut Context<Self>) {
        match self.outbox.pending(&self.channel) {
            Ok(pending) => {
                if !pending.is_empty() {
                    tracing::info!(channel = %self.channel, pending = pending.len(), "Resuming deliveries from the outbox.");
                }
                for msg in pending {
                    self.enqueue(msg, ctx);
                }
            }
            Err(e) => {
                tracing::error!(channel = %self.channel, error = %e, "The outbox could not be read; its deliveries wait for the next start.")
            }
        }
    }

    /// Removes a message's outbox entry once it needs no more delivering.
    fn unstage(&self, msg: &OutboundMessage) {
        if let Err(e) = self.outbox.remove(&self.channel, msg) {
            tracing::error!(channel = %self.channel, delivery = ?msg.delivery_id(), error = %e, "Outbox entry not removed; it will be delivered again after a restart.");
        }
    }

    /// Records how a delivery ended, in sled and on its task's events.
    fn end(
        &self,
        msg: OutboundMessage,
        to: String,
        attempts: u32,
        parts: usize,
        error: Option<String>,
    ) {
        let target = format!("{}:{to}", self.channel);
        let state = match &error {
            None => {
                tracing::info!(channel = %self.channel, %to, attempts, parts, task_id = ?msg.task_id, "Delivered.");
                DeliveryState::Delivered
            }
            Some(e) => {
                tracing::error!(channel = %self.channel, %to, attempts, task_id = ?msg.task_id, job = ?msg.job, error = %e, "Delivery failed for good.");
                DeliveryState::Failed
            }
        };
        let outcome = match state {
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        };
        self.metrics
            .counter(
                "clawbus_deliveries_total",
                "Replies and announcements sent out, by channel and outcome.",
                &[("channel", self.channel.as_str()), ("outcome", outcome)],
            )
            .inc();
        let record = DeliveryRecord {
            channel: self.channel.clone(),
            to,
            task_id: msg.task_id,
            job: msg.job.clone(),
            state,
            attempts,
            parts,
            error: error.clone(),
            ended_ms: self.clock.now_ms(),
        };
        match self.outbox.records().put(&record) {
            Ok(()) => self.unstage(&msg),
            Err(e) => {
                tracing::error!(channel = %self.channel, error = %e, "Delivery outcome not recorded in the store; it stays in the outbox.")
            }
        }
        let Some(task_id) = msg.task_id else {
            return;
        };
        let kind = match error {
            None => TaskEventKind::Delivered { target, attempts },
            Some(reason) => TaskEventKind::DeliveryFailed {
                target,
                attempts,
                reason,
            },
        };
        let bus = self.bus.clone();
        actix::spawn(async move {
            if let Err(e) = bus.emit(task_id, kind).await {
                tracing::error!(%task_id, error = %e, "Delivery event not recorded on the task.");
            }
        });
    }
}

impl Actor for DeliveryActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.resume(ctx);
    }
}

impl StreamHandler<Delivery> for DeliveryActor {
    fn handle(&mut self, item: Delivery, ctx: &mut Context<Self>) {
        if !self.outbox.sends(&item.envelope().headers) {
            // Staged by another node's outbox: that node's delivery actor sends it.
            return;
        }
        match serde_json::from_value::<OutboundMessage>(item.envelope().payload.clone()) {
            Ok(msg) => self.enqueue(msg, ctx),
            Err(e) => {
                tracing::error!(channel = %self.channel, error = %e, "Unreadable outbound message dropped.")
            }
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        tracing::info!(channel = %self.channel, pending = self.jobs.len(), "Delivery subscription ended.");
    }
}

impl Handler<Enqueue> for DeliveryActor {
    type Result = ();
    fn handle(&mut self, msg: Enqueue, ctx: &mut Context<Self>) {
        self.enqueue(msg.0, ctx);
    }
}

impl Handler<Tick> for DeliveryActor {
    type Result = ();
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        self.pump(ctx);
    }
}

impl Handler<Tried> for DeliveryActor {
    type Result = ();
    fn handle(&mut self, msg: Tried, ctx: &mut Context<Self>) {
        self.tried(msg.id, msg.result);
        self.pump(ctx);
    }
}

impl Handler<Pending> for DeliveryActor {
    type Result = MessageResult<Pending>;
    fn handle(&mut self, _: Pending, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.jobs
                .values()
                .map(|j| PendingView {
                    to: j.to.clone(),
                    part: j.part,
                    parts: j.parts.len(),
                    attempts: j.attempts,
                    due_ms: j.due_ms,
                    in_flight: j.in_flight,
                })
                .collect(),
        )
    }
}
