//! The broker actor: routes events to subscribers and tasks to one consumer each.

use crate::backend::{Acker, Delivery, Settle};
use crate::envelope::Envelope;
use crate::fast_map::FastMap;
use crate::local::listeners::Listeners;
use crate::store::TaskStore;
use crate::task::Outcome;
use crate::topic::Topic;
use actix::{Actor, ActorFutureExt as _, AsyncContext, Context, Handler, Message, WrapFuture as _};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

/// How often parked tasks are offered to consumers again.
const PARKED_RETRY: Duration = Duration::from_millis(50);

pub(super) enum Mode {
    Broadcast,
    Consume,
}

struct Sub {
    id: u64,
    pattern: Topic,
    mode: Mode,
    tx: mpsc::Sender<Delivery>,
}

pub(super) struct Broker {
    acker: Arc<dyn Acker>,
    /// Deliveries of one task before it fails for good.
    max_attempts: u32,
    subs: Vec<Sub>,
    /// Broadcast subscriptions to one concrete topic (a waiter's `events.task.<id>`), by topic:
    /// a publish finds them without matching every subscription.
    exact: FastMap<Topic, Vec<Sub>>,
    /// The topic of each subscription in `exact`, by id.
    exact_of: FastMap<u64, Topic>,
    next_id: u64,
    /// Round-robin cursor over consumers.
    turn: usize,
    /// Tasks with no consumer able to take them yet.
    parked: VecDeque<Envelope>,
    /// Whether a retry of the parked tasks is scheduled (only while some are parked: an idle
    /// broker sets no timer).
    retry_armed: bool,
    /// Events dropped because a subscriber's queue was full.
    lagged: u64,
    /// The store whose unfinished tasks are dispatched on start, before any other message.
    recover: Option<Arc<dyn TaskStore>>,
    /// The broadcast subscriptions, shared with the event log (kept in step with `subs` and
    /// `exact`).
    listeners: Arc<Listeners>,
}

impl Broker {
    /// A broker; on start it first dispatches the unfinished tasks of `recover`.
    pub(super) fn new(
        acker: Arc<dyn Acker>,
        max_attempts: u32,
        recover: Option<Arc<dyn TaskStore>>,
        listeners: Arc<Listeners>,
    ) -> Self {
        Self {
            acker,
            max_attempts,
            subs: Vec::new(),
            exact: FastMap::default(),
            exact_of: FastMap::default(),
            next_id: 0,
            turn: 0,
            parked: VecDeque::new(),
            retry_armed: false,
            lagged: 0,
            recover,
            listeners,
        }
    }

    /// Re-queues the unfinished tasks of the store, in admission order, before the broker
    /// handles anything else (a task submitted now must not overtake them).
    fn recover(&mut self, ctx: &mut Context<Self>) {
        let Some(store) = self.recover.take() else {
            return;
        };
        let unfinished = async move { store.unfinished().await };
        ctx.wait(unfinished.into_actor(self).map(|found, this, ctx| {
            let records = match found {
                Ok(records) => records,
                Err(e) => {
                    tracing::error!(error = %e, "Unfinished tasks could not be read; not re-queued.");
                    return;
                }
            };
            if !records.is_empty() {
                tracing::info!(
                    tasks = records.len(),
                    "Unfinished tasks re-queued from the journal."
                );
            }
            for record in records {
                let mut env = Arc::unwrap_or_clone(record.envelope);
                env.attempt = record.attempts + 1;
                this.dispatch(env);
            }
            this.retry_parked_later(ctx);
        }));
    }

    /// Hands `env` to every subscriber (not consumer) whose pattern matches, all sharing one
    /// copy (`shared`, or one made for the first of them); one that lags misses it.
    fn broadcast(&mut self, env: &Envelope, shared: Option<&Arc<Envelope>>) {
        let mut copy = shared.cloned();
        let mut closed = Vec::new();
        let exact = self.exact.get(&env.topic).into_iter().flatten();
        for s in exact.chain(self.subs.iter()) {
            if !matches!(s.mode, Mode::Broadcast) || !s.pattern.matches(&env.topic) {
                continue;
            }
            let copy = copy.get_or_insert_with(|| Arc::new(env.clone())).clone();
            match s.tx.try_send(Delivery::shared(copy, None)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    self.lagged += 1;
                    tracing::warn!(topic = %env.topic, pattern = %s.pattern, lagged_total = self.lagged, "Subscriber lagging; event dropped for it.");
                }
                Err(TrySendError::Closed(_)) => closed.push(s.id),
            }
        }
        self.prune(closed);
    }

    fn dispatch(&mut self, env: Envelope) {
        if env.attempt > self.max_attempts {
            // Every attempt was dropped unsettled (its consumer died) or lost in a crash.
            let error = format!("gave up after {} attempts", self.max_attempts);
            tracing::warn!(request_id = %env.request_id, attempts = self.max_attempts, "Task dead-lettered.");
            let acker = self.acker.clone();
            actix::spawn(async move {
                let outcome = Settle::Complete(Outcome::DeadLettered { error });
                if let Err(e) = acker.settle(&env, outcome).await {
                    tracing::error!(request_id = %env.request_id, error = %e, "Could not record the failed task.");
                }
            });
            return;
        }
        // Subscribers to the topic (`clawbus tail 'agent.>'`) see the task go by; they cannot
        // settle it (no acker), only one consumer runs it.
        self.broadcast(&env, None);
        // Tasks parked for the same topic go first: a new one must not overtake them.
        if self.parked.iter().any(|p| p.topic == env.topic) {
            self.parked.push_back(env);
            self.offer_parked();
            return;
        }
        if let Some(env) = self.offer(env) {
            tracing::debug!(topic = %env.topic, parked = self.parked.len() + 1, "No consumer ready; task parked.");
            self.parked.push_back(env);
        }
    }

    /// Hands a task to one matching consumer; returns it when none could take it.
    fn offer(&mut self, env: Envelope) -> Option<Envelope> {
        let candidates: Vec<usize> = (0..self.subs.len())
            .filter(|&i| {
                matches!(self.subs[i].mode, Mode::Consume)
                    && self.subs[i].pattern.matches(&env.topic)
            })
            .collect();
        if candidates.is_empty() {
            return Some(env);
        }
        let mut delivery = Delivery::new(env, Some(self.acker.clone()));
        let mut closed = Vec::new();
        for k in 0..candidates.len() {
            let i = candidates[(self.turn + k) % candidates.len()];
            match self.subs[i].tx.try_send(delivery) {
                Ok(()) => {
                    self.turn = self.turn.wrapping_add(k + 1);
                    self.prune(closed);
                    return None;
                }
                Err(TrySendError::Full(d)) => delivery = d,
                Err(TrySendError::Closed(d)) => {
                    closed.push(self.subs[i].id);
                    delivery = d;
                }
            }
        }
        self.prune(closed);
        Some(take_envelope(delivery))
    }

    fn prune(&mut self, closed: Vec<u64>) {
        for id in closed {
            self.remove(id);
        }
    }

    /// Ends subscription `id` (a broadcast one is taken out of the listeners too).
    fn remove(&mut self, id: u64) {
        if let Some(topic) = self.exact_of.remove(&id) {
            if let Some(v) = self.exact.get_mut(&topic) {
                v.retain(|s| s.id != id);
                if v.is_empty() {
                    self.exact.remove(&topic);
                }
            }
            self.listeners.remove(&topic);
            return;
        }
        if let Some(i) = self.subs.iter().position(|s| s.id == id) {
            let sub = self.subs.remove(i);
            if matches!(sub.mode, Mode::Broadcast) {
                self.listeners.remove(&sub.pattern);
            }
        }
    }

    /// Offers the parked tasks again after [`PARKED_RETRY`], and so on while some stay parked.
    fn retry_parked_later(&mut self, ctx: &mut Context<Self>) {
        if self.parked.is_empty() || self.retry_armed {
            return;
        }
        self.retry_armed = true;
        ctx.run_later(PARKED_RETRY, |this, ctx| {
            this.retry_armed = false;
            this.offer_parked();
            this.retry_parked_later(ctx);
        });
    }

    fn offer_parked(&mut self) {
        let parked = std::mem::take(&mut self.parked);
        for env in parked {
            if let Some(env) = self.offer(env) {
                self.parked.push_back(env);
            }
        }
    }
}

/// Takes the envelope back out of an undelivered delivery without triggering its redelivery.
fn take_envelope(delivery: Delivery) -> Envelope {
    delivery.into_envelope()
}

impl Actor for Broker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(4096);
        self.recover(ctx);
    }
}

#[derive(Message)]
#[rtype(result = "u64")]
pub(super) struct Subscribe {
    pub pattern: Topic,
    pub mode: Mode,
    pub tx: mpsc::Sender<Delivery>,
}

impl Handler<Subscribe> for Broker {
    type Result = u64;
    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) -> u64 {
        self.next_id += 1;
        let consume = matches!(msg.mode, Mode::Consume);
        if !consume {
            self.listeners.add(&msg.pattern);
        }
        if !consume && !msg.pattern.is_pattern() {
            self.exact_of.insert(self.next_id, msg.pattern.clone());
            self.exact
                .entry(msg.pattern.clone())
                .or_default()
                .push(Sub {
                    id: self.next_id,
                    pattern: msg.pattern,
                    mode: msg.mode,
                    tx: msg.tx,
                });
            return self.next_id;
        }
        self.subs.push(Sub {
            id: self.next_id,
            pattern: msg.pattern,
            mode: msg.mode,
            tx: msg.tx,
        });
        if consume {
            self.offer_parked();
        }
        self.next_id
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Unsubscribe(pub u64);

impl Handler<Unsubscribe> for Broker {
    type Result = ();
    fn handle(&mut self, msg: Unsubscribe, _: &mut Context<Self>) {
        self.remove(msg.0);
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Publish(pub Envelope);

impl Handler<Publish> for Broker {
    type Result = ();
    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        let env = Arc::new(msg.0);
        self.broadcast(&env, Some(&env));
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Dispatch(pub Envelope);

impl Handler<Dispatch> for Broker {
    type Result = ();
    fn handle(&mut self, msg: Dispatch, ctx: &mut Context<Self>) {
        self.dispatch(msg.0);
        self.retry_parked_later(ctx);
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Redeliver {
    pub env: Envelope,
    pub delay: Duration,
}

impl Handler<Redeliver> for Broker {
    type Result = ();
    fn handle(&mut self, msg: Redeliver, ctx: &mut Context<Self>) {
        if msg.delay.is_zero() {
            ctx.notify(Dispatch(msg.env));
        } else {
            ctx.notify_later(Dispatch(msg.env), msg.delay);
        }
    }
}
