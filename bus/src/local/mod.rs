//! The embedded backend: a broker in this process that routes on the caller's thread, tasks
//! journaled in a task store.

mod acker;
mod broker;
pub(crate) mod evented;
mod listeners;
pub(crate) mod log;
pub(crate) mod stream;

pub use log::{DEFAULT_REPLAY_BYTES, MAX_EVENTS_PER_TASK};

use crate::backend::{Acker, Bus, Subscription};
use crate::clock::{Clock, SystemClock};
use crate::envelope::{Envelope, Kind, RequestId};
use crate::error::BusError;
use crate::events::{TaskEventKind, TaskEventStream};
use crate::store::{DEFAULT_WINDOW, SledTaskStore, TaskStore};
use crate::task::{Admission, CancelNotice, Outcome, TaskRecord};
use crate::topic::Topic;
use acker::LocalAcker;
use async_trait::async_trait;
use broker::{Broker, Mode};
use evented::EventedStore;
use listeners::Listeners;
use log::{EventLog, Header};
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
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
    /// Bytes the in-memory task event logs (what replays are answered from) may hold together
    /// ([`DEFAULT_REPLAY_BYTES`] by default).
    pub replay_bytes: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            dedup_window: DEFAULT_WINDOW,
            max_attempts: 5,
            clock: Arc::new(SystemClock),
            replay_bytes: DEFAULT_REPLAY_BYTES,
        }
    }
}

/// The embedded bus. Cheap to clone; every clone talks to the same broker.
#[derive(Clone)]
pub struct LocalBus {
    broker: Arc<Broker>,
    /// `evented`, as the store it is.
    store: Arc<dyn TaskStore>,
    evented: Arc<EventedStore>,
    log: Arc<EventLog>,
}

impl LocalBus {
    /// Opens the bus in folder `dir` as the daemon keeps it in its state folder: the task records
    /// in the task journal `tasks.journal`, beside the sled database `db`; re-queues every
    /// unfinished task. Must be called inside a tokio runtime (an actix `System` has one).
    pub fn open(dir: &Path, opts: LocalOptions) -> Result<Self, BusError> {
        // Earlier versions opened the database in `dir` itself (sled's `conf` is there): it
        // stays there, and its task records move into the journal beside it.
        let db_dir = if dir.join("conf").is_file() {
            dir.to_path_buf()
        } else {
            dir.join("db")
        };
        let db = sled::open(&db_dir)
            .map_err(|e| BusError::storage(format!("open {}", db_dir.display()), e))?;
        let extras = crate::store::StoreExtras {
            journal: Some(dir.join("tasks.journal")),
            ..Default::default()
        };
        let store = SledTaskStore::with_extras(db, opts.clock.clone(), opts.dedup_window, extras)?;
        Ok(Self::with_store(Arc::new(store), opts))
    }

    /// Opens the bus over an already open sled database, the task records in trees of it.
    pub fn with_db(db: sled::Db, opts: LocalOptions) -> Result<Self, BusError> {
        let store = SledTaskStore::with_db(db, opts.clock.clone(), opts.dedup_window)?;
        Ok(Self::with_store(Arc::new(store), opts))
    }

    /// Opens the bus over `store` (its dedup window applies, not `opts.dedup_window`),
    /// re-queueing its unfinished tasks before anything else is delivered.
    /// Must be called inside a tokio runtime (an actix `System` has one): the broker's timers
    /// run on it.
    pub fn with_store(store: Arc<dyn TaskStore>, opts: LocalOptions) -> Self {
        // The log publishes through the broker, made after it: the sink finds it here.
        let route: Arc<OnceLock<Weak<Broker>>> = Arc::new(OnceLock::new());
        let to_broker = route.clone();
        let sink = Box::new(move |env| {
            if let Some(broker) = to_broker.get().and_then(Weak::upgrade) {
                broker.publish(env);
            }
        });
        let listeners = Arc::new(Listeners::default());
        let log = Arc::new(
            EventLog::with_caps(
                opts.clock.clone(),
                sink,
                MAX_EVENTS_PER_TASK,
                opts.replay_bytes,
            )
            .only_for(listeners.clone()),
        );
        let evented = Arc::new(EventedStore::new(store, log.clone()));
        let store: Arc<dyn TaskStore> = evented.clone();
        let (acker_store, acker_log) = (store.clone(), log.clone());
        let acker = move |broker| -> Arc<dyn Acker> {
            Arc::new(LocalAcker {
                store: acker_store,
                log: acker_log,
                broker,
                max_attempts: opts.max_attempts,
            })
        };
        let broker = Broker::new(acker, opts.max_attempts, Some(store.clone()), listeners);
        // Set once, here: the cell is new.
        let _ = route.set(Arc::downgrade(&broker));
        Self {
            broker,
            store,
            evented,
            log,
        }
    }

    /// The task store behind this bus. Outcomes recorded through it emit their task events.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// The task store behind this bus (the name of earlier versions; see [`LocalBus::store`]).
    pub fn ledger(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// Waits until task `task_id` (admitted under `request_id`) has ended, then answers its
    /// ended record: as the one who recorded the outcome handed it to the log (no read), or else
    /// as the store has `request_id` (had the request id been admitted again meanwhile, the later
    /// task's, as the task id of this one no longer answers).
    async fn wait_task(
        &self,
        request_id: &RequestId,
        task_id: Uuid,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        let timed_out = || BusError::TimedOut { after: timeout };
        // Told of the end before asking whether it ended: no outcome slips between.
        let mut end = self.log.on_end(task_id);
        let ended = tokio::time::timeout_at(
            deadline,
            stream::has_ended(&self.log, &self.evented, task_id),
        )
        .await
        .map_err(|_| timed_out())??;
        if !ended {
            match tokio::time::timeout_at(deadline, end.ended()).await {
                Err(_) => return Err(timed_out()),
                Ok(Err(_)) => return Err(BusError::Closed("the task event log closed".into())),
                // Handed over by the one who recorded the outcome: no read of the store.
                Ok(Ok(Some(record))) if record.request_id == *request_id => return Ok(record),
                Ok(Ok(_)) => {}
            }
        }
        self.store
            .lookup(request_id)
            .await?
            .ok_or_else(|| BusError::UnknownTask(request_id.to_string()))
    }

    async fn subscribe_mode(&self, pattern: Topic, tasks: bool) -> Result<Subscription, BusError> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let mode = if tasks {
            Mode::Consume
        } else {
            Mode::Broadcast
        };
        let id = self.broker.subscribe(pattern, mode, tx);
        let guard = Unsubscriber {
            broker: self.broker.clone(),
            id,
        };
        Ok(Subscription::new(rx, Box::new(guard)))
    }
}

/// Ends its subscription when dropped; holds the broker while the subscription lives.
struct Unsubscriber {
    broker: Arc<Broker>,
    id: u64,
}

impl Drop for Unsubscriber {
    fn drop(&mut self) {
        self.broker.unsubscribe(self.id);
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
        self.broker.publish(env);
        Ok(())
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
        // Stored and dispatched as one step that runs to its end (`run_to_end`): a caller that
        // stops waiting (a run cancelled mid-submit) must not leave a task stored but never
        // delivered, which its duplicates would then find and never deliver either.
        let (store, broker) = (self.store.clone(), self.broker.clone());
        crate::backend::run_to_end(async move {
            // The tasks a restart re-queues go first, and are only those admitted before it.
            broker.recovered().await;
            let fresh_id = env.id;
            let admission = store.admit(env.clone()).await?;
            if !admission.duplicate {
                if admission.task.task_id == fresh_id {
                    broker.dispatch(env);
                } else {
                    // An explicit retry: the stored task again, as its next attempt.
                    let mut again = Envelope::clone(&admission.task.envelope);
                    again.attempt = admission.task.attempts + 1;
                    broker.dispatch_retry(again);
                }
            }
            Ok(admission)
        })
        .await
    }

    async fn subscribe(&self, pattern: Topic) -> Result<Subscription, BusError> {
        self.subscribe_mode(pattern, false).await
    }

    async fn consume(&self, pattern: Topic) -> Result<Subscription, BusError> {
        self.subscribe_mode(pattern, true).await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.store.lookup(request_id).await
    }

    async fn task(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        self.store.by_task_id(task_id).await
    }

    async fn tasks(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.store.list().await
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "Bus::wait bounds the caller's wait by its own timeout, in real time (the task's progress is on the store, not on a clock)"
    )]
    async fn wait(
        &self,
        request_id: &RequestId,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let unknown = || BusError::UnknownTask(request_id.to_string());
        let record = self.store.lookup(request_id).await?.ok_or_else(unknown)?;
        if record.state.is_terminal() {
            return Ok(record);
        }
        self.wait_task(request_id, record.task_id, deadline, timeout)
            .await
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "as Bus::wait: the caller's timeout, in real time"
    )]
    async fn wait_admitted(
        &self,
        admitted: &TaskRecord,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        // Its task id is known: the log and the store tell whether it ended.
        let deadline = tokio::time::Instant::now() + timeout;
        self.wait_task(&admitted.request_id, admitted.task_id, deadline, timeout)
            .await
    }

    async fn emit(&self, task_id: Uuid, kind: TaskEventKind) -> Result<(), BusError> {
        if kind.is_terminal() {
            return Err(BusError::Invalid(
                "a task's terminal event comes from recording its outcome, not from emit".into(),
            ));
        }
        let header = match self.log.header(task_id) {
            Some(header) => header,
            None => {
                let record = self
                    .store
                    .by_task_id(task_id)
                    .await?
                    .ok_or_else(|| BusError::UnknownTask(task_id.to_string()))?;
                if record.state.is_terminal() {
                    if !kind.follows_outcome() {
                        return Ok(()); // late news of an ended task
                    }
                    self.log.seed(&record)
                } else {
                    Header::of(&record)
                }
            }
        };
        self.log.append(&header, kind);
        Ok(())
    }

    async fn task_events(&self, task_id: Uuid) -> Result<TaskEventStream, BusError> {
        let sub = self.subscribe(Topic::task_events(task_id)).await?;
        let replayed = stream::replay(&self.log, &self.evented, task_id).await?;
        Ok(stream::stream(replayed, sub, self.log.clone(), task_id))
    }

    async fn end(&self, request_id: &RequestId, outcome: Outcome) -> Result<TaskRecord, BusError> {
        // Ended and told to its consumer as one step (see `run_to_end`).
        let (store, broker, request_id) =
            (self.store.clone(), self.broker.clone(), request_id.clone());
        crate::backend::run_to_end(async move {
            let done = store.complete(&request_id, outcome).await?;
            let record = done.task;
            if !done.recorded {
                // The task ended first: its consumer must not be told to stop (and record a cancel).
                return Ok(record);
            }
            let notice = CancelNotice::for_ended(&record);
            broker.publish(notice);
            Ok(record)
        })
        .await
    }
}

#[cfg(test)]
mod tests;
