//! Consuming tasks: a durable pull consumer per pattern, shared by every process that consumes
//! it; each delivery settles against the task store first and acks the stream message after.

use super::Nats;
use super::outbox::{Outbox, Parked, unreachable};
use crate::backend::{Acker, Delivery, Settle};
use crate::envelope::{Envelope, Kind};
use crate::error::BusError;
use crate::events::TaskEventKind;
use crate::local::log::{EventLog, Header};
use crate::store::TaskStore;
use crate::task::Outcome;
use crate::topic::Topic;
use async_nats::jetstream::consumer::FromConsumer as _;
use async_nats::jetstream::{self, AckKind, consumer::pull};
use async_trait::async_trait;
use futures::StreamExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long one pull waits for a task before it asks again.
const PULL_EXPIRES: Duration = Duration::from_secs(5);
/// The pause after a failed pull (the server unreachable, the consumer gone), before the next.
const PULL_BACKOFF: Duration = Duration::from_millis(250);

/// What the bus and its deliveries share.
pub(super) struct Shared {
    pub(super) nats: Nats,
    pub(super) store: Arc<dyn TaskStore>,
    /// `store`, as the evented store it is (the replay asks it whether the log heard every
    /// outcome).
    pub(super) evented: Arc<crate::local::evented::EventedStore>,
    pub(super) log: Arc<EventLog>,
    pub(super) max_attempts: u32,
    /// The ordered publisher of events, results and notices.
    pub(super) out: super::bus::Out,
    /// Writes waiting for the server (outcomes of tasks that ran while it was away).
    pub(super) outbox: Arc<Outbox>,
}

/// Creates (or binds to) the durable consumer of `pattern` and starts feeding `tx`, one task
/// pulled per free slot, so no task waits unmarked in this process.
pub(super) async fn start(
    shared: Arc<Shared>,
    pattern: Topic,
    tx: mpsc::Sender<Delivery>,
) -> Result<tokio::task::JoinHandle<()>, BusError> {
    let nats = &shared.nats;
    let durable = nats.subjects.durable(&pattern);
    let config = pull::Config {
        durable_name: Some(durable.clone()),
        filter_subject: nats.subjects.work(&pattern),
        ack_wait: nats.ack_wait,
        // Past this the server stops delivering and announces it; `advisory.rs` then records
        // the dead letter. Attempts are also counted here, for a task posted again (its
        // attempts go on from where they were).
        max_deliver: i64::from(shared.max_attempts.max(1)),
        ..Default::default()
    };
    let stream = nats.work_stream().await?;
    let consumer = stream
        .get_or_create_consumer(&durable, config.clone())
        .await
        .map_err(|e| BusError::transport(format!("consumer {durable}"), e))?;
    let consumer = bring_up_to_date(&stream, consumer, &config).await?;
    Ok(tokio::spawn(pull_loop(shared, consumer, tx)))
}

/// A durable consumer made earlier (by an older clawbus, or a node with another `ack_wait`)
/// keeps its `max_deliver` and `ack_wait` until it is changed: when they differ from `want`'s,
/// the consumer is updated in place (JetStream allows changing both), and the log says so.
async fn bring_up_to_date(
    stream: &jetstream::stream::Stream,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    want: &pull::Config,
) -> Result<jetstream::consumer::Consumer<pull::Config>, BusError> {
    let found = &consumer.cached_info().config;
    if found.max_deliver == want.max_deliver && found.ack_wait == want.ack_wait {
        return Ok(consumer);
    }
    let name = found.durable_name.clone().unwrap_or_default();
    let (old_max_deliver, old_ack_wait) = (found.max_deliver, found.ack_wait);
    let mut config = pull::Config::try_from_consumer_config(found.clone())
        .map_err(|e| BusError::transport(format!("consumer {name}"), e))?;
    config.max_deliver = want.max_deliver;
    config.ack_wait = want.ack_wait;
    let updated = stream
        .update_consumer(config)
        .await
        .map_err(|e| BusError::transport(format!("update consumer {name}"), e))?;
    tracing::info!(
        consumer = %name,
        old_max_deliver,
        max_deliver = want.max_deliver,
        old_ack_wait_ms = old_ack_wait.as_millis() as u64,
        ack_wait_ms = want.ack_wait.as_millis() as u64,
        "Durable consumer made with other settings updated to this node's."
    );
    Ok(updated)
}

async fn pull_loop(
    shared: Arc<Shared>,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    tx: mpsc::Sender<Delivery>,
) {
    loop {
        let Ok(permit) = tx.reserve().await else {
            return; // the subscription was dropped
        };
        let batch = consumer
            .batch()
            .max_messages(1)
            .expires(PULL_EXPIRES)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) if !shared.nats.link.is_connected() => {
                // The link logs the outage and its attempts; pull again once it is back.
                tracing::debug!(error = %e, "Pull of tasks waits for NATS.");
                shared.nats.link.connected().await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "Pull of tasks failed; trying again.");
                tokio::time::sleep(PULL_BACKOFF).await;
                continue;
            }
        };
        let msg = match batch.next().await {
            None => continue,
            Some(Ok(msg)) => msg,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "Pull ended without a task.");
                continue;
            }
        };
        if let Some(delivery) = deliver(&shared, msg).await {
            permit.send(delivery);
        }
    }
}

/// The delivery of one stream message, or `None` when it was settled here (unreadable, or past
/// its last attempt: dead-lettered).
async fn deliver(shared: &Arc<Shared>, msg: jetstream::Message) -> Option<Delivery> {
    let mut env: Envelope = match serde_json::from_slice::<Envelope>(&msg.payload) {
        Ok(env) if env.kind == Kind::Task => env,
        other => {
            let error = other.err().map(|e| e.to_string()).unwrap_or_default();
            tracing::warn!(subject = %msg.subject, error, "Unreadable task dropped from the stream.");
            ack(&msg, AckKind::Term).await;
            return None;
        }
    };
    let delivered = msg.info().map(|i| i.delivered).unwrap_or(1).max(1);
    env.attempt = env
        .attempt
        .saturating_add(u32::try_from(delivered - 1).unwrap_or(u32::MAX));
    let acker = Arc::new(NatsAcker {
        msg,
        shared: shared.clone(),
        done: AtomicBool::new(false),
    });
    // A message's first delivery always runs: past the attempts a delivery is given only when it
    // is an explicit retry (a repost of a task that ended failed or dead-lettered, published as
    // its next attempt), which gets that one more attempt.
    if env.attempt > shared.max_attempts && delivered > 1 {
        // Every attempt was dropped unsettled (its consumer died).
        let error = format!("gave up after {} attempts", shared.max_attempts);
        tracing::warn!(request_id = %env.request_id, attempts = shared.max_attempts, "Task dead-lettered.");
        let outcome = Settle::Complete(Outcome::DeadLettered { error });
        if let Err(e) = acker.settle(&env, outcome).await {
            tracing::error!(request_id = %env.request_id, error = %e, "Could not record the failed task.");
        }
        return None;
    }
    heartbeat(Arc::downgrade(&acker), shared.nats.ack_wait / 3);
    Some(Delivery::new(env, Some(acker)))
}

/// Marks the delivery in progress every `every` until it is settled or dropped.
fn heartbeat(acker: Weak<NatsAcker>, every: Duration) {
    let every = every.max(Duration::from_millis(100));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(a) = acker.upgrade() else { return };
            if a.done.load(Ordering::SeqCst) {
                return;
            }
            if let Err(e) = a.msg.ack_with(AckKind::Progress).await {
                tracing::debug!(error = %e, "Progress mark not sent.");
            }
        }
    });
}

async fn ack(msg: &jetstream::Message, kind: AckKind) {
    if let Err(e) = msg.double_ack_with(kind).await {
        tracing::warn!(subject = %msg.subject, error = %e, "Stream message not acknowledged; it comes back after the ack wait.");
    }
}

/// A task's outcome to record, its reply to publish and its message to ack, in that order.
struct Finish {
    shared: Arc<Shared>,
    msg: jetstream::Message,
    env: Envelope,
    outcome: Outcome,
}

#[async_trait]
impl Parked for Finish {
    async fn retry(&self) -> Result<(), BusError> {
        let env = &self.env;
        let record = self
            .shared
            .store
            .complete(&env.request_id, self.outcome.clone())
            .await?
            .task;
        if let Some(reply_to) = &env.reply_to {
            let mut reply = Envelope::event(
                reply_to.clone(),
                serde_json::to_value(&record).unwrap_or_default(),
            );
            reply.kind = Kind::Result;
            reply.request_id = env.request_id.clone();
            if self.shared.out.send(reply).is_err() {
                tracing::warn!(request_id = %env.request_id, "Reply not published: the bus is closing.");
            }
        }
        ack(&self.msg, AckKind::Ack).await;
        Ok(())
    }

    fn what(&self) -> String {
        format!("the outcome of task {}", self.env.request_id)
    }
}

/// Settles one delivered stream message: the store first, the stream after.
struct NatsAcker {
    msg: jetstream::Message,
    shared: Arc<Shared>,
    /// Settled (or given back): the heartbeat stops.
    done: AtomicBool,
}

impl NatsAcker {
    /// Records `outcome`, replies and acks; while the server is out of reach the three wait
    /// in the local outbox, and this returns at once.
    async fn finish(&self, env: &Envelope, outcome: Outcome) -> Result<(), BusError> {
        self.done.store(true, Ordering::SeqCst);
        let later = Finish {
            shared: self.shared.clone(),
            msg: self.msg.clone(),
            env: env.clone(),
            outcome,
        };
        if !self.shared.nats.link.is_connected() {
            // Asking now would only wait for a timeout, and might land late.
            let cause = BusError::transport(
                format!("NATS at {}", self.shared.nats.url()),
                "not connected",
            );
            return self.shared.outbox.park(Box::new(later), &cause);
        }
        match later.retry().await {
            Ok(()) => Ok(()),
            Err(e) if unreachable(&e) => self.shared.outbox.park(Box::new(later), &e),
            Err(e) => Err(e),
        }
    }

    fn retry_event(&self, next: &Envelope, delay: Duration, reason: &str) {
        if next.attempt <= self.shared.max_attempts {
            let kind = TaskEventKind::Retry {
                attempt: next.attempt,
                delay_ms: delay.as_millis() as u64,
                reason: reason.to_string(),
            };
            self.shared.log.append(&Header::of_delivery(next), kind);
        }
    }
}

#[async_trait]
impl Acker for NatsAcker {
    async fn start(&self, env: &Envelope) -> Result<bool, BusError> {
        let started = self
            .shared
            .store
            .start(&env.request_id, env.attempt)
            .await?;
        let go = started.is_some_and(|r| r.task_id == env.id);
        if !go {
            // Ended already (cancelled while queued, or an older task's message): gone.
            self.done.store(true, Ordering::SeqCst);
            ack(&self.msg, AckKind::Ack).await;
        }
        Ok(go)
    }

    async fn progress(&self, env: &Envelope, note: serde_json::Value) -> Result<bool, BusError> {
        if let Err(e) = self.msg.ack_with(AckKind::Progress).await {
            tracing::debug!(error = %e, "Progress mark not sent.");
        }
        Ok(self
            .shared
            .store
            .progress(&env.request_id, note)
            .await?
            .is_some())
    }

    async fn settle(&self, env: &Envelope, how: Settle) -> Result<(), BusError> {
        match how {
            Settle::Ack => {
                let result = serde_json::Value::Null;
                self.finish(env, Outcome::Succeeded { result }).await
            }
            Settle::Complete(outcome) => self.finish(env, outcome).await,
            Settle::Nack { delay, reason } => {
                if env.attempt >= self.shared.max_attempts {
                    let error = format!("gave up after {} attempts", env.attempt);
                    tracing::warn!(request_id = %env.request_id, attempts = env.attempt, "Task dead-lettered.");
                    return self.finish(env, Outcome::DeadLettered { error }).await;
                }
                self.done.store(true, Ordering::SeqCst);
                if self.shared.store.requeue(&env.request_id).await?.is_none() {
                    ack(&self.msg, AckKind::Ack).await;
                    return Ok(()); // it ended meanwhile (cancelled): nothing to redeliver
                }
                let mut next = env.clone();
                next.attempt += 1;
                self.retry_event(&next, delay, reason.as_deref().unwrap_or("nacked"));
                let delay = (!delay.is_zero()).then_some(delay);
                ack(&self.msg, AckKind::Nak(delay)).await;
                Ok(())
            }
        }
    }

    fn abandon(&self, env: &Envelope) {
        tracing::warn!(request_id = %env.request_id, attempt = env.attempt, "Task dropped unsettled; redelivering.");
        self.done.store(true, Ordering::SeqCst);
        let mut next = env.clone();
        next.attempt += 1;
        self.retry_event(&next, Duration::ZERO, "delivery dropped unsettled");
        let msg = self.msg.clone();
        // Should this process end first, the server redelivers after the ack wait.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(async move { ack(&msg, AckKind::Nak(None)).await })),
            Err(_) => tracing::debug!("No runtime to hand the task back; the ack wait will."),
        }
    }
}
