//! The broker: routes events to subscribers and tasks to one consumer each.
//!
//! It routes on the thread that hands it a message: its routing table sits behind one lock, held
//! for the few hundred instructions a route takes, so a task goes from its submitter straight into
//! its consumer's queue. (An actor of its own made every task cross to the broker's thread and
//! back, two wake-ups of a sleeping thread a task: on the bus bench the broker's thread slept and
//! woke once every three tasks and pushed a tokio worker off its CPU as often.) What waits for time
//! (a redelivery's delay, the retry of parked tasks) and what must not run under the lock (the
//! outcome of a dead-lettered task, a redelivery of a dropped delivery) is spawned on the runtime
//! the bus was opened on.
//!
//! Nothing is called under the lock that could take it again: deliveries that cannot be handed
//! over are taken apart without their redelivery (`Delivery::into_envelope`), and the acker's
//! `abandon` spawns its redelivery.

use crate::backend::{Acker, Delivery, Settle};
use crate::envelope::Envelope;
use crate::error::BusError;
use crate::fast_map::FastMap;
use crate::local::listeners::Listeners;
use crate::store::TaskStore;
use crate::task::{Outcome, TaskRecord};
use crate::topic::Topic;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc};

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

/// The embedded bus's router. Shared by every clone of the bus, its subscriptions and its acker.
pub(super) struct Broker {
    table: Mutex<Table>,
    /// Settles the task deliveries this broker hands out.
    acker: Arc<dyn Acker>,
    /// Deliveries of one task before it fails for good.
    max_attempts: u32,
    /// The broadcast subscriptions, shared with the event log (kept in step with the table).
    listeners: Arc<Listeners>,
    /// Where timers and work that must not run under the lock are spawned.
    runtime: Handle,
    /// This broker, for what is spawned (which ends once the broker is gone).
    me: Weak<Broker>,
    /// True until the unfinished tasks of the store it was opened over are dispatched.
    recovering: AtomicBool,
    /// Wakes the submits that wait for the recovery ([`Broker::recovered`]).
    recovery_done: Notify,
}

/// What the lock guards.
struct Table {
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
}

impl Broker {
    /// A broker on the current tokio runtime (it panics outside one). With `recover` it first
    /// dispatches that store's unfinished tasks, in admission order; a submit waits for that
    /// ([`Broker::recovered`]), so no task admitted since is read as one of them or overtakes
    /// them. `acker` is made with this broker (its handle to it is weak: a broker is dropped with
    /// the last bus and subscription that hold it).
    pub(super) fn new(
        acker: impl FnOnce(Weak<Broker>) -> Arc<dyn Acker>,
        max_attempts: u32,
        recover: Option<Arc<dyn TaskStore>>,
        listeners: Arc<Listeners>,
    ) -> Arc<Self> {
        let broker = Arc::new_cyclic(|me: &Weak<Broker>| Self {
            table: Mutex::new(Table {
                subs: Vec::new(),
                exact: FastMap::default(),
                exact_of: FastMap::default(),
                next_id: 0,
                turn: 0,
                parked: VecDeque::new(),
                retry_armed: false,
                lagged: 0,
            }),
            recovering: AtomicBool::new(recover.is_some()),
            recovery_done: Notify::new(),
            acker: acker(me.clone()),
            max_attempts,
            listeners,
            runtime: Handle::current(),
            me: me.clone(),
        });
        if let Some(store) = recover {
            let me = broker.me.clone();
            broker.runtime.spawn(async move {
                // Should the read panic or the runtime drop it, the submits still go.
                let _ends = RecoveryEnds(me.clone());
                let found = store.unfinished().await;
                if let Some(broker) = me.upgrade() {
                    broker.recover(found);
                }
            });
        }
        broker
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` with the routing table locked, as routing does (for tests of what may happen
    /// under the lock).
    #[cfg(test)]
    pub(super) fn while_locked(&self, f: impl FnOnce()) {
        let _held = self.lock();
        f();
    }

    /// Returns once the store's unfinished tasks are dispatched (at once after that, or when the
    /// broker recovers nothing): a submit waits for it before admitting its task.
    pub(super) async fn recovered(&self) {
        while self.recovering.load(Ordering::Acquire) {
            let done = self.recovery_done.notified();
            if !self.recovering.load(Ordering::Acquire) {
                return;
            }
            done.await;
        }
    }

    /// Dispatches the unfinished tasks the store answered, and lets the submits go.
    fn recover(&self, found: Result<Vec<TaskRecord>, BusError>) {
        let records = match found {
            Ok(records) => records,
            Err(e) => {
                tracing::error!(error = %e, "Unfinished tasks could not be read; not re-queued.");
                Vec::new()
            }
        };
        if !records.is_empty() {
            tracing::info!(
                tasks = records.len(),
                "Unfinished tasks re-queued from the journal."
            );
        }
        let mut table = self.lock();
        for record in records {
            let mut env = Arc::unwrap_or_clone(record.envelope);
            env.attempt = record.attempts + 1;
            self.route(&mut table, env);
        }
        self.retry_parked_later(&mut table);
        drop(table);
        self.end_recovery();
    }

    /// Lets the submits that wait for the recovery go.
    fn end_recovery(&self) {
        self.recovering.store(false, Ordering::Release);
        self.recovery_done.notify_waiters();
    }

    /// Registers a subscription (a consumer is offered the parked tasks at once); answers its id.
    pub(super) fn subscribe(&self, pattern: Topic, mode: Mode, tx: mpsc::Sender<Delivery>) -> u64 {
        let mut table = self.lock();
        table.next_id += 1;
        let id = table.next_id;
        let consume = matches!(mode, Mode::Consume);
        if !consume {
            // Before `subscribe` returns: an event appended after it sees the listener.
            self.listeners.add(&pattern);
        }
        let sub = Sub {
            id,
            pattern,
            mode,
            tx,
        };
        if !consume && !sub.pattern.is_pattern() {
            table.exact_of.insert(id, sub.pattern.clone());
            table
                .exact
                .entry(sub.pattern.clone())
                .or_default()
                .push(sub);
            return id;
        }
        table.subs.push(sub);
        if consume {
            self.offer_parked(&mut table);
        }
        id
    }

    /// Ends subscription `id`.
    pub(super) fn unsubscribe(&self, id: u64) {
        let removed = self.remove(&mut self.lock(), id);
        // Its queue's sender goes after the lock is let go (see the module's doc).
        drop(removed);
    }

    /// Hands the event `env` to every subscriber whose pattern matches, all sharing one copy.
    pub(super) fn publish(&self, env: Envelope) {
        let env = Arc::new(env);
        let mut table = self.lock();
        self.broadcast(&mut table, &env, Some(&env));
    }

    /// Routes the task `env` to one consumer (parked while none can take it).
    pub(super) fn dispatch(&self, env: Envelope) {
        let mut table = self.lock();
        self.route(&mut table, env);
        self.retry_parked_later(&mut table);
    }

    /// Dispatches an explicit retry (a repost of a task that ended failed or dead-lettered): one
    /// more attempt, even past the attempts a delivery is given, since it was asked for; its own
    /// failure or loss ends it again.
    pub(super) fn dispatch_retry(&self, env: Envelope) {
        let mut table = self.lock();
        self.place(&mut table, env);
        self.retry_parked_later(&mut table);
    }

    /// Dispatches `env` again after `delay` (at once when it is zero); spawned, so a caller may
    /// hold anything (a delivery dropped anywhere asks for one).
    pub(super) fn redeliver(&self, env: Envelope, delay: Duration) {
        self.redeliver_announced(env, delay, |_| {});
    }

    /// [`Broker::redeliver`], calling `announce` with the task first, in the spawned task: what
    /// it publishes takes this broker's lock, which the caller may hold (a delivery dropped
    /// where the lock is held).
    pub(super) fn redeliver_announced(
        &self,
        env: Envelope,
        delay: Duration,
        announce: impl FnOnce(&Envelope) + Send + 'static,
    ) {
        let me = self.me.clone();
        self.runtime.spawn(async move {
            announce(&env);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Some(broker) = me.upgrade() {
                broker.dispatch(env);
            }
        });
    }

    /// Hands `env` to every subscriber (not consumer) whose pattern matches, all sharing one
    /// copy (`shared`, or one made for the first of them); one that lags misses it.
    fn broadcast(&self, table: &mut Table, env: &Envelope, shared: Option<&Arc<Envelope>>) {
        let mut copy = shared.cloned();
        let mut closed = Vec::new();
        let exact = table.exact.get(&env.topic).into_iter().flatten();
        let mut lagged = 0;
        for s in exact.chain(table.subs.iter()) {
            if !matches!(s.mode, Mode::Broadcast) || !s.pattern.matches(&env.topic) {
                continue;
            }
            let copy = copy.get_or_insert_with(|| Arc::new(env.clone())).clone();
            match s.tx.try_send(Delivery::shared(copy, None)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    lagged += 1;
                    tracing::warn!(topic = %env.topic, pattern = %s.pattern, lagged_total = table.lagged + lagged, "Subscriber lagging; event dropped for it.");
                }
                Err(TrySendError::Closed(_)) => closed.push(s.id),
            }
        }
        table.lagged += lagged;
        self.prune(table, closed);
    }

    fn route(&self, table: &mut Table, env: Envelope) {
        if env.attempt > self.max_attempts {
            // Every attempt was dropped unsettled (its consumer died) or lost in a crash.
            let error = format!("gave up after {} attempts", self.max_attempts);
            tracing::warn!(request_id = %env.request_id, attempts = self.max_attempts, "Task dead-lettered.");
            let acker = self.acker.clone();
            self.runtime.spawn(async move {
                let outcome = Settle::Complete(Outcome::DeadLettered { error });
                if let Err(e) = acker.settle(&env, outcome).await {
                    tracing::error!(request_id = %env.request_id, error = %e, "Could not record the failed task.");
                }
            });
            return;
        }
        self.place(table, env);
    }

    /// Shows `env` to the topic's subscribers and hands it to a consumer, or parks it.
    fn place(&self, table: &mut Table, env: Envelope) {
        // Subscribers to the topic (`clawbus tail 'agent.>'`) see the task go by; they cannot
        // settle it (no acker), only one consumer runs it.
        self.broadcast(table, &env, None);
        // Tasks parked for the same topic go first: a new one must not overtake them.
        if table.parked.iter().any(|p| p.topic == env.topic) {
            table.parked.push_back(env);
            self.offer_parked(table);
            return;
        }
        if let Some(env) = self.offer(table, env) {
            tracing::debug!(topic = %env.topic, parked = table.parked.len() + 1, "No consumer ready; task parked.");
            table.parked.push_back(env);
        }
    }

    /// Hands a task to one matching consumer; returns it when none could take it.
    fn offer(&self, table: &mut Table, env: Envelope) -> Option<Envelope> {
        let consumers = table
            .subs
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.mode, Mode::Consume) && s.pattern.matches(&env.topic));
        let candidates: Vec<usize> = consumers.map(|(i, _)| i).collect();
        if candidates.is_empty() {
            return Some(env);
        }
        let mut delivery = Delivery::new(env, Some(self.acker.clone()));
        let mut closed = Vec::new();
        for k in 0..candidates.len() {
            let i = candidates[(table.turn + k) % candidates.len()];
            match table.subs[i].tx.try_send(delivery) {
                Ok(()) => {
                    table.turn = table.turn.wrapping_add(k + 1);
                    self.prune(table, closed);
                    return None;
                }
                Err(TrySendError::Full(d)) => delivery = d,
                Err(TrySendError::Closed(d)) => {
                    closed.push(table.subs[i].id);
                    delivery = d;
                }
            }
        }
        self.prune(table, closed);
        // Taken back without triggering its redelivery.
        Some(delivery.into_envelope())
    }

    fn prune(&self, table: &mut Table, closed: Vec<u64>) {
        for id in closed {
            // The queue is closed: its receiver, and what was in it, are gone already.
            drop(self.remove(table, id));
        }
    }

    /// Takes subscription `id` out (a broadcast one out of the listeners too) and answers it.
    fn remove(&self, table: &mut Table, id: u64) -> Option<Sub> {
        if let Some(topic) = table.exact_of.remove(&id) {
            let mut removed = None;
            if let Some(v) = table.exact.get_mut(&topic) {
                if let Some(i) = v.iter().position(|s| s.id == id) {
                    removed = Some(v.remove(i));
                }
                if v.is_empty() {
                    table.exact.remove(&topic);
                }
            }
            self.listeners.remove(&topic);
            return removed;
        }
        let i = table.subs.iter().position(|s| s.id == id)?;
        let sub = table.subs.remove(i);
        if matches!(sub.mode, Mode::Broadcast) {
            self.listeners.remove(&sub.pattern);
        }
        Some(sub)
    }

    /// Offers the parked tasks again after [`PARKED_RETRY`], and so on while some stay parked.
    fn retry_parked_later(&self, table: &mut Table) {
        if table.parked.is_empty() || table.retry_armed {
            return;
        }
        table.retry_armed = true;
        let me = self.me.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(PARKED_RETRY).await;
            if let Some(broker) = me.upgrade() {
                let mut table = broker.lock();
                table.retry_armed = false;
                broker.offer_parked(&mut table);
                broker.retry_parked_later(&mut table);
            }
        });
    }

    fn offer_parked(&self, table: &mut Table) {
        let parked = std::mem::take(&mut table.parked);
        for env in parked {
            if let Some(env) = self.offer(table, env) {
                table.parked.push_back(env);
            }
        }
    }
}

/// Ends the recovery when dropped: after the re-queue, or in its place when the task that reads
/// the store panics or is dropped unfinished (a submit must not wait for it forever).
struct RecoveryEnds(Weak<Broker>);

impl Drop for RecoveryEnds {
    fn drop(&mut self) {
        if let Some(broker) = self.0.upgrade() {
            broker.end_recovery();
        }
    }
}
