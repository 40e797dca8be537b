//! The embedded backend: an actix broker actor in this process, tasks journaled in sled.

mod broker;

use crate::backend::{Acker, Bus, Settle, Subscription};
use crate::clock::{Clock, SystemClock};
use crate::envelope::{Envelope, Kind, RequestId};
use crate::error::BusError;
use crate::ledger::{DEFAULT_WINDOW, Ledger};
use crate::task::{Admission, Outcome, TaskRecord, TaskState};
use crate::topic::Topic;
use actix::{Actor, Addr, AsyncContext};
use async_trait::async_trait;
use broker::{Broker, Dispatch, Mode, Publish, Redeliver, Subscribe, Unsubscribe};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// How many deliveries wait in one subscriber's queue before it counts as lagging.
pub const SUBSCRIBER_BUFFER: usize = 1024;

/// Settings of the embedded bus.
#[derive(Clone)]
pub struct LocalOptions {
    /// How long a finished request id is remembered.
    pub dedup_window: Duration,
    /// Deliveries of one task before it fails for good.
    pub max_attempts: u32,
    /// The time source.
    pub clock: Arc<dyn Clock>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            dedup_window: DEFAULT_WINDOW,
            max_attempts: 5,
            clock: Arc::new(SystemClock),
        }
    }
}

/// The embedded bus. Cheap to clone; every clone talks to the same broker.
#[derive(Clone)]
pub struct LocalBus {
    broker: Addr<Broker>,
    ledger: Arc<Ledger>,
}

impl LocalBus {
    /// Opens the bus over the sled database in `dir`, re-queueing every unfinished task.
    /// Must be called inside a running actix `System`.
    pub fn open(dir: &Path, opts: LocalOptions) -> Result<Self, BusError> {
        let db =
            sled::open(dir).map_err(|e| BusError::storage(format!("open {}", dir.display()), e))?;
        Self::with_db(db, opts)
    }

    /// Opens the bus over an already open sled database.
    pub fn with_db(db: sled::Db, opts: LocalOptions) -> Result<Self, BusError> {
        let ledger = Arc::new(Ledger::with_db(db, opts.clock.clone(), opts.dedup_window)?);
        let unfinished = ledger.unfinished()?;
        let max_attempts = opts.max_attempts;
        let ledger_for_broker = ledger.clone();
        let broker = Broker::create(move |ctx| {
            let acker = Arc::new(LocalAcker {
                ledger: ledger_for_broker,
                broker: ctx.address(),
                max_attempts,
            });
            Broker::new(acker, max_attempts)
        });
        if !unfinished.is_empty() {
            tracing::info!(
                tasks = unfinished.len(),
                "Unfinished tasks re-queued from the journal."
            );
        }
        for record in unfinished {
            let mut env = record.envelope;
            env.attempt = record.attempts + 1;
            broker.do_send(Dispatch(env));
        }
        Ok(Self { broker, ledger })
    }

    /// The ledger behind this bus.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    async fn subscribe_mode(&self, pattern: Topic, tasks: bool) -> Result<Subscription, BusError> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let mode = if tasks {
            Mode::Consume
        } else {
            Mode::Broadcast
        };
        let id = self
            .broker
            .send(Subscribe { pattern, mode, tx })
            .await
            .map_err(closed)?;
        let guard = Unsubscriber {
            broker: self.broker.clone(),
            id,
        };
        Ok(Subscription::new(rx, Box::new(guard)))
    }
}

fn closed(e: actix::MailboxError) -> BusError {
    BusError::Closed(format!("broker: {e}"))
}

struct Unsubscriber {
    broker: Addr<Broker>,
    id: u64,
}

impl Drop for Unsubscriber {
    fn drop(&mut self) {
        // If this is lost the broker still prunes the closed channel on its next send.
        self.broker.do_send(Unsubscribe(self.id));
    }
}

#[async_trait]
impl Bus for LocalBus {
    async fn publish(&self, env: Envelope) -> Result<(), BusError> {
        if env.kind == Kind::Task {
            return Err(BusError::Invalid(
                "tasks go through submit, not publish".into(),
            ));
        }
        self.broker.send(Publish(env)).await.map_err(closed)
    }

    async fn submit(&self, env: Envelope) -> Result<Admission, BusError> {
        if env.kind != Kind::Task {
            return Err(BusError::Invalid(format!(
                "submit takes tasks, got {:?}",
                env.kind
            )));
        }
        if env.topic.is_pattern() {
            return Err(BusError::Invalid(format!(
                "cannot submit to pattern {}",
                env.topic
            )));
        }
        let admission = self.ledger.admit(env.clone()).await?;
        if !admission.duplicate {
            self.broker.send(Dispatch(env)).await.map_err(closed)?;
        }
        Ok(admission)
    }

    async fn subscribe(&self, pattern: Topic) -> Result<Subscription, BusError> {
        self.subscribe_mode(pattern, false).await
    }

    async fn consume(&self, pattern: Topic) -> Result<Subscription, BusError> {
        self.subscribe_mode(pattern, true).await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.ledger.lookup(request_id)
    }

    async fn task(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        self.ledger.by_task_id(task_id)
    }

    async fn wait(
        &self,
        request_id: &RequestId,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        self.ledger.wait(request_id, timeout).await
    }

    async fn cancel(&self, request_id: &RequestId, reason: &str) -> Result<TaskRecord, BusError> {
        let outcome = Outcome::Cancelled {
            reason: reason.to_string(),
        };
        let record = self.ledger.complete(request_id, outcome).await?;
        if record.state != TaskState::Cancelled {
            // The task ended first: its consumer must not be told to stop (and record a cancel).
            return Ok(record);
        }
        let mut notice = Envelope::event(
            Topic::cancellations(),
            serde_json::json!({ "task_id": record.task_id, "request_id": record.request_id, "reason": reason }),
        );
        notice.request_id = record.request_id.clone();
        self.broker.send(Publish(notice)).await.map_err(closed)?;
        Ok(record)
    }
}

/// Settles task deliveries against the ledger and asks the broker for redeliveries.
struct LocalAcker {
    ledger: Arc<Ledger>,
    broker: Addr<Broker>,
    max_attempts: u32,
}

impl LocalAcker {
    async fn finish(&self, env: &Envelope, outcome: Outcome) -> Result<(), BusError> {
        let record = self.ledger.complete(&env.request_id, outcome).await?;
        if let Some(reply_to) = &env.reply_to {
            let mut reply = Envelope::event(
                reply_to.clone(),
                serde_json::to_value(&record).unwrap_or_default(),
            );
            reply.kind = Kind::Result;
            reply.request_id = env.request_id.clone();
            self.broker.send(Publish(reply)).await.map_err(closed)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Acker for LocalAcker {
    async fn start(&self, env: &Envelope) -> Result<bool, BusError> {
        Ok(self
            .ledger
            .start_attempt(&env.request_id, env.attempt)
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
            Settle::Nack { delay } => {
                if env.attempt >= self.max_attempts {
                    let error = format!("gave up after {} attempts", env.attempt);
                    tracing::warn!(request_id = %env.request_id, attempts = env.attempt, "Task failed for good.");
                    return self.finish(env, Outcome::Failed { error }).await;
                }
                self.ledger.requeue(&env.request_id).await?;
                let mut next = env.clone();
                next.attempt += 1;
                self.broker
                    .send(Redeliver { env: next, delay })
                    .await
                    .map_err(closed)
            }
        }
    }

    fn abandon(&self, env: &Envelope) {
        tracing::warn!(request_id = %env.request_id, attempt = env.attempt, "Task dropped unsettled; redelivering.");
        let mut next = env.clone();
        next.attempt += 1;
        self.broker.do_send(Redeliver {
            env: next,
            delay: Duration::ZERO,
        });
    }
}
