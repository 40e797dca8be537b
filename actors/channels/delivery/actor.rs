//! The delivery actor's state and handlers.

use super::{
    Backoff, DeliveryDeps, DeliveryRecord, DeliveryState, Enqueue, Pending, PendingView, SendError,
    Sink, Tick,
};
use crate::{OutboundMessage, is_silent};
use actix::prelude::*;
use bus::events::TaskEventKind;
use bus::{Bus, Clock, Delivery};
use clawbus_runtime::outbox::{Claim, Outbox, OutboxError};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Deliveries waiting or being tried at once; past it a new one is recorded failed at once.
pub(super) const MAX_PENDING: usize = 10_000;

/// Where a job stands with its claim (on a shared outbox, taken before the first try).
enum Claimed {
    /// Being taken: the job waits, and holds back later messages to its target.
    Waiting,
    /// Taken (or none needed): the job may be tried.
    Held(Claim),
}

struct Job {
    msg: OutboundMessage,
    claim: Claimed,
    /// Taken over from another node's entry by a sweep.
    adopted: bool,
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
    /// A sweep for entries to adopt is under way.
    sweeping: bool,
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
            sweeping: false,
        }
    }

    /// Takes `msg` for delivery (`adopted`: from another node's entry): staged, claimed, then
    /// tried in its target's order.
    fn enqueue(&mut self, msg: OutboundMessage, adopted: bool, ctx: &mut Context<Self>) {
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
        let Some(to) = msg.to.clone().filter(|t| !t.is_empty()) else {
            self.end(
                msg,
                String::new(),
                0,
                0,
                Some("no target (`to`) to deliver to".into()),
                Claim::none(),
            );
            return;
        };
        if self.jobs.len() >= MAX_PENDING {
            let error = format!("{MAX_PENDING} deliveries already pending on this channel");
            self.end(msg, to, 0, 0, Some(error), Claim::none());
            return;
        }
        let parts = self.sink.parts(&msg.text);
        self.next_id += 1;
        let job_id = self.next_id;
        let (outbox, channel, staged) = (self.outbox.clone(), self.channel.clone(), msg.clone());
        ctx.spawn(
            async move {
                // An adopted entry was just read from the shared outbox: it is staged already.
                if !adopted && let Err(e) = outbox.stage(&channel, &staged).await {
                    tracing::error!(channel = %channel, delivery = ?staged.delivery_id(), error = %e, "Delivery not staged in the outbox; a restart would not resume it.");
                }
                outbox.claim(&channel, &staged).await
            }
            .into_actor(self)
            .map(move |claim, act, ctx| act.claimed(job_id, claim, ctx)),
        );
        let job = Job {
            msg,
            claim: Claimed::Waiting,
            adopted,
            to,
            parts,
            part: 0,
            tries: 0,
            attempts: 0,
            due_ms: self.clock.now_ms(),
            in_flight: false,
        };
        self.jobs.insert(job_id, job);
    }

    /// The claim of job `id` was taken (or not): it may be tried, or it is another node's.
    fn claimed(
        &mut self,
        id: u64,
        claim: Result<Option<Claim>, OutboxError>,
        ctx: &mut Context<Self>,
    ) {
        let Some(job) = self.jobs.get_mut(&id) else {
            if let Ok(Some(claim)) = claim {
                actix::spawn(claim.release());
            }
            return;
        };
        match claim {
            Ok(Some(claim)) => job.claim = Claimed::Held(claim),
            Ok(None) => {
                tracing::debug!(channel = %self.channel, delivery = ?job.msg.delivery_id(), "Delivery claimed by another node, or already delivered.");
                self.jobs.remove(&id);
            }
            Err(e) if job.adopted => {
                tracing::warn!(channel = %self.channel, delivery = ?job.msg.delivery_id(), error = %e, "Delivery not claimed; left for a later sweep.");
                self.jobs.remove(&id);
            }
            Err(e) => {
                tracing::warn!(channel = %self.channel, delivery = ?job.msg.delivery_id(), error = %e, "Delivery not claimed in the shared outbox; sending it unclaimed.");
                job.claim = Claimed::Held(Claim::none());
            }
        }
        self.pump(ctx);
    }

    /// Looks for entries of dead nodes (or lapsed claims) to adopt: one sweep at a time.
    fn sweep(&mut self, ctx: &mut Context<Self>) {
        // A full node adopts nothing: a message it could not queue would be recorded failed,
        // while a node with room delivers it.
        if self.sweeping || self.jobs.len() >= MAX_PENDING {
            return;
        }
        self.sweeping = true;
        let in_hand: HashSet<String> = self
            .jobs
            .values()
            .filter_map(|j| j.msg.delivery_id())
            .collect();
        let (outbox, channel) = (self.outbox.clone(), self.channel.clone());
        ctx.spawn(
            async move { outbox.adoptable(&channel, &in_hand).await }
                .into_actor(self)
                .map(|found, act, ctx| {
                    act.sweeping = false;
                    match found {
                        Ok(found) => {
                            for msg in found {
                                tracing::info!(channel = %act.channel, delivery = ?msg.delivery_id(), "Adopting a delivery whose node died or whose claim lapsed.");
                                act.enqueue(msg, true, ctx);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(channel = %act.channel, error = %e, "Shared outbox not swept; trying again later.")
                        }
                    }
                }),
        );
    }

    /// Starts every try that is due, one target at a time in arrival order, and sets a timer
    /// for the next one that is not.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now_ms();
        let mut busy: Vec<String> = Vec::new();
        let mut next_due: Option<u64> = None;
        let mut starts = Vec::new();
        let mut lost = Vec::new();
        for (&id, job) in self.jobs.iter_mut() {
            if busy.contains(&job.to) {
                continue;
            }
            // A job whose claim was lost goes before it holds back its target's next message.
            if !job.in_flight && matches!(&job.claim, Claimed::Held(claim) if claim.is_lost()) {
                lost.push(id);
                continue;
            }
            busy.push(job.to.clone());
            if job.in_flight || matches!(job.claim, Claimed::Waiting) {
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
        for id in lost {
            if let Some(job) = self.jobs.remove(&id) {
                tracing::warn!(channel = %self.channel, delivery = ?job.msg.delivery_id(), "Delivery claim lost; left to the node that takes it over.");
            }
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
            let claim = match job.claim {
                Claimed::Held(claim) => claim,
                Claimed::Waiting => Claim::none(),
            };
            self.end(job.msg, job.to, job.attempts, parts, error, claim);
        }
    }

    /// Takes the channel's pending outbox entries this node staged, in the order they were
    /// staged, before any new message (the actor waits for the read).
    fn resume(&mut self, ctx: &mut Context<Self>) {
        let (outbox, channel) = (self.outbox.clone(), self.channel.clone());
        ctx.wait(
            async move { outbox.pending(&channel).await }
                .into_actor(self)
                .map(|pending, act, ctx| match pending {
                    Ok(pending) => {
                        if !pending.is_empty() {
                            tracing::info!(channel = %act.channel, pending = pending.len(), "Resuming deliveries from the outbox.");
                        }
                        for msg in pending {
                            act.enqueue(msg, false, ctx);
                        }
                    }
                    Err(e) => {
                        tracing::error!(channel = %act.channel, error = %e, "The outbox could not be read; its deliveries wait for the next start.")
                    }
                }),
        );
    }

    /// Removes a message's outbox entry once it needs no more delivering.
    fn unstage(&self, msg: &OutboundMessage) {
        let (outbox, channel, msg) = (self.outbox.clone(), self.channel.clone(), msg.clone());
        actix::spawn(async move {
            if let Err(e) = outbox.remove(&channel, &msg).await {
                tracing::error!(channel = %channel, delivery = ?msg.delivery_id(), error = %e, "Outbox entry not removed; it will be delivered again after a restart.");
            }
        });
    }

    /// Records how a delivery ended, in the delivery records and on its task's events, then
    /// removes its entry and releases its claim.
    fn end(
        &self,
        msg: OutboundMessage,
        to: String,
        attempts: u32,
        parts: usize,
        error: Option<String>,
        claim: Claim,
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
        let kind = match error {
            None => TaskEventKind::Delivered { target, attempts },
            Some(reason) => TaskEventKind::DeliveryFailed {
                target,
                attempts,
                reason,
            },
        };
        let (bus, outbox, channel) = (self.bus.clone(), self.outbox.clone(), self.channel.clone());
        actix::spawn(async move {
            outbox.settle(&channel, &msg, &record, claim).await;
            let Some(task_id) = msg.task_id else {
                return;
            };
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
        if self.outbox.is_shared() {
            ctx.run_interval(clawbus_runtime::outbox::shared::SWEEP_EVERY, |act, ctx| {
                act.sweep(ctx)
            });
        }
    }
}

impl StreamHandler<Delivery> for DeliveryActor {
    fn handle(&mut self, item: Delivery, ctx: &mut Context<Self>) {
        if !self.outbox.sends(&item.envelope().headers) {
            // Staged by another node's outbox: that node's delivery actor sends it.
            return;
        }
        match serde_json::from_value::<OutboundMessage>(item.envelope().payload.clone()) {
            Ok(msg) => self.enqueue(msg, false, ctx),
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
        self.enqueue(msg.0, false, ctx);
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
