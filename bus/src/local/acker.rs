//! Settles the embedded backend's task deliveries against the store.

use super::broker::Broker;
use super::log::{EventLog, Header};
use crate::backend::{Acker, Settle};
use crate::envelope::{Envelope, Kind};
use crate::error::BusError;
use crate::events::TaskEventKind;
use crate::store::TaskStore;
use crate::task::Outcome;
use async_trait::async_trait;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Settles task deliveries against the (evented) store and asks the broker for redeliveries.
pub(super) struct LocalAcker {
    pub(super) store: Arc<dyn TaskStore>,
    pub(super) log: Arc<EventLog>,
    /// Weak: the broker holds this acker. A broker is gone once no bus and no subscription holds
    /// it; then nobody could receive what it would route (the store keeps the task, re-queued on
    /// the next open), so a reply or redelivery for it is dropped.
    pub(super) broker: Weak<Broker>,
    pub(super) max_attempts: u32,
}

impl LocalAcker {
    async fn finish(&self, env: &Envelope, outcome: Outcome) -> Result<(), BusError> {
        let record = self.store.complete(&env.request_id, outcome).await?.task;
        if let Some(reply_to) = &env.reply_to {
            let mut reply = Envelope::event(
                reply_to.clone(),
                serde_json::to_value(&record).unwrap_or_default(),
            );
            reply.kind = Kind::Result;
            reply.request_id = env.request_id.clone();
            if let Some(broker) = self.broker.upgrade() {
                broker.publish(reply);
            }
        }
        Ok(())
    }

    /// Announces the next attempt (see [`announce_retry`]).
    fn retry(&self, next: &Envelope, delay: Duration, reason: &str) {
        announce_retry(&self.log, self.max_attempts, next, delay, reason);
    }
}

/// Announces the next attempt on `log`, unless there is none (the task fails instead).
fn announce_retry(
    log: &EventLog,
    max_attempts: u32,
    next: &Envelope,
    delay: Duration,
    reason: &str,
) {
    if next.attempt <= max_attempts {
        let kind = TaskEventKind::Retry {
            attempt: next.attempt,
            delay_ms: delay.as_millis() as u64,
            reason: reason.to_string(),
        };
        log.append(&Header::of_delivery(next), kind);
    }
}

#[async_trait]
impl Acker for LocalAcker {
    async fn start(&self, env: &Envelope) -> Result<bool, BusError> {
        Ok(self
            .store
            .start(&env.request_id, env.attempt)
            .await?
            .is_some())
    }

    async fn progress(&self, env: &Envelope, note: serde_json::Value) -> Result<bool, BusError> {
        Ok(self.store.progress(&env.request_id, note).await?.is_some())
    }

    async fn settle(&self, env: &Envelope, how: Settle) -> Result<(), BusError> {
        match how {
            Settle::Ack => {
                let result = serde_json::Value::Null;
                self.finish(env, Outcome::Succeeded { result }).await
            }
            Settle::Complete(outcome) => self.finish(env, outcome).await,
            Settle::Nack { delay, reason } => {
                if env.attempt >= self.max_attempts {
                    let error = format!("gave up after {} attempts", env.attempt);
                    tracing::warn!(request_id = %env.request_id, attempts = env.attempt, "Task dead-lettered.");
                    return self.finish(env, Outcome::DeadLettered { error }).await;
                }
                if self.store.requeue(&env.request_id).await?.is_none() {
                    return Ok(()); // it ended meanwhile (cancelled): nothing to redeliver
                }
                let mut next = env.clone();
                next.attempt += 1;
                self.retry(&next, delay, reason.as_deref().unwrap_or("nacked"));
                if let Some(broker) = self.broker.upgrade() {
                    broker.redeliver(next, delay);
                }
                Ok(())
            }
        }
    }

    fn abandon(&self, env: &Envelope) {
        tracing::warn!(request_id = %env.request_id, attempt = env.attempt, "Task dropped unsettled; redelivering.");
        let mut next = env.clone();
        next.attempt += 1;
        // Announced and redelivered by a task the broker spawns: a delivery may be dropped
        // anywhere, even where the broker's lock is held, which the announcement takes.
        let (log, max_attempts) = (self.log.clone(), self.max_attempts);
        if let Some(broker) = self.broker.upgrade() {
            broker.redeliver_announced(next, Duration::ZERO, move |next| {
                announce_retry(
                    &log,
                    max_attempts,
                    next,
                    Duration::ZERO,
                    "delivery dropped unsettled",
                );
            });
        }
    }
}
