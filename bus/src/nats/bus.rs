//! The bus on NATS: events over core NATS, tasks through the work-queue stream, records in KV.

use super::consume::{self, Shared};
use super::outbox::{OUTBOX_CAP, Outbox, Parked, unreachable};
use super::{Nats, NatsTaskStore};
use crate::backend::{Bus, Delivery, Subscription};
use crate::envelope::{Envelope, Kind, RequestId};
use crate::error::BusError;
use crate::events::{TaskEventKind, TaskEventStream};
use crate::local::evented::EventedStore;
use crate::local::log::{EventLog, Header};
use crate::local::{SUBSCRIBER_BUFFER, stream};
use crate::store::TaskStore;
use crate::task::{Admission, CancelNotice, Outcome, TaskRecord};
use crate::topic::Topic;
use async_nats::jetstream::message::PublishMessage as Publish;
use async_trait::async_trait;
use futures::StreamExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// The bus on NATS JetStream. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct NatsBus {
    shared: Arc<Shared>,
}

impl NatsBus {
    /// The bus over `nats` with the task store `store` (see [`NatsTaskStore`]), giving up on a
    /// task after `max_attempts` deliveries. Must be called inside a tokio runtime (the actix
    /// `System`): its publisher runs there.
    pub fn new(nats: Nats, store: NatsTaskStore, max_attempts: u32) -> Self {
        let (tx, rx) = mpsc::unbounded_channel::<Envelope>();
        let tx = Out::new(tx);
        tokio::spawn(publisher(nats.clone(), rx, tx.pending.clone()));
        let clock = store.clock();
        let sink_tx = tx.clone();
        let sink = Box::new(move |env: Envelope| {
            // The receiver lives as long as the runtime: a send fails only while it stops.
            if sink_tx.send(env).is_err() {
                tracing::debug!(
                    "Task event not published: the bus is closing or NATS is away too long."
                );
            }
        });
        let log = Arc::new(EventLog::new(clock, sink));
        let inner: Arc<dyn TaskStore> = Arc::new(super::guard::LinkGuarded {
            inner: Arc::new(store),
            link: nats.link.clone(),
            url: nats.url().to_string(),
        });
        let evented = Arc::new(EventedStore::new(inner, log.clone()));
        let store: Arc<dyn TaskStore> = evented.clone();
        let outbox = Outbox::start(nats.link.clone(), OUTBOX_CAP);
        let bus = Self {
            shared: Arc::new(Shared {
                nats,
                store,
                evented,
                log,
                max_attempts,
                outbox,
                out: tx,
            }),
        };
        tokio::spawn(super::advisory::listen(Arc::downgrade(&bus.shared)));
        bus
    }

    /// Connects the store and the bus over `nats`.
    pub async fn open(
        nats: Nats,
        clock: Arc<dyn crate::clock::Clock>,
        window: Duration,
        max_attempts: u32,
    ) -> Result<Self, BusError> {
        let store = NatsTaskStore::open(&nats, clock, window).await?;
        Ok(Self::new(nats, store, max_attempts))
    }

    /// The task store behind this bus. Outcomes recorded through it emit their task events.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.shared.store
    }

    /// Publishes `env` to the work stream with `Nats-Msg-Id = request_id`. When the stream
    /// answers that id as a duplicate of an older message (another task or attempt under the
    /// same request id, inside the stream's dedup window), this one goes out under an id of
    /// its own task and attempt: the task store, not the stream, judged it new.
    async fn dispatch(&self, env: Envelope) -> Result<(), BusError> {
        let nats = &self.shared.nats;
        let subject = nats.subjects.work(&env.topic);
        let bytes = bytes::Bytes::from(encode(&env)?);
        let ack = publish(nats, &subject, env.request_id.as_str(), bytes.clone()).await?;
        if !ack.duplicate || self.is_ours(ack.sequence, &env).await {
            return Ok(());
        }
        let id = format!("{}#{}#{}", env.request_id, env.id, env.attempt);
        publish(nats, &subject, &id, bytes).await.map(|_| ())
    }

    /// Ends as failed (a retryable end: posting the same request id again runs it) a task
    /// that was admitted but never reached the stream, so the refusal its caller gets is the
    /// whole story; while the server is away, once it is back.
    async fn undo_admission(&self, request_id: RequestId, cause: &BusError) {
        let undo = Undispatched {
            store: self.shared.store.clone(),
            request_id,
            error: format!("not dispatched: {cause}"),
        };
        let parked = match undo.retry().await {
            Ok(()) => return,
            Err(e) if unreachable(&e) => self.shared.outbox.park(Box::new(undo), &e),
            Err(e) => Err(e),
        };
        if let Err(e) = parked {
            tracing::error!(error = %e, "An admitted task that never reached the stream stays queued.");
        }
    }

    /// True when stream message `seq` is `env` (the same task and attempt).
    async fn is_ours(&self, seq: u64, env: &Envelope) -> bool {
        let Ok(stream) = self.shared.nats.work_stream().await else {
            return false;
        };
        match stream.get_raw_message(seq).await {
            Ok(m) => serde_json::from_slice::<Envelope>(&m.payload)
                .is_ok_and(|e| e.id == env.id && e.attempt == env.attempt),
            Err(_) => false, // acked and gone: an older message
        }
    }
}

/// The failed end of a task admitted but never dispatched.
struct Undispatched {
    store: Arc<dyn TaskStore>,
    request_id: RequestId,
    error: String,
}

#[async_trait]
impl Parked for Undispatched {
    async fn retry(&self) -> Result<(), BusError> {
        let outcome = Outcome::Failed {
            error: self.error.clone(),
        };
        self.store
            .complete(&self.request_id, outcome)
            .await
            .map(|_| ())
    }

    fn what(&self) -> String {
        format!("the refusal of task {}", self.request_id)
    }
}

async fn publish(
    nats: &Nats,
    subject: &str,
    id: &str,
    payload: bytes::Bytes,
) -> Result<async_nats::jetstream::publish::PublishAck, BusError> {
    let what = || format!("publish {subject}");
    let message = Publish::build().message_id(id).payload(payload);
    let pending = nats
        .js
        .send_publish(subject.to_string(), message)
        .await
        .map_err(|e| BusError::transport(what(), e))?;
    pending.await.map_err(|e| BusError::transport(what(), e))
}

pub(super) fn encode(env: &Envelope) -> Result<Vec<u8>, BusError> {
    serde_json::to_vec(env).map_err(|e| BusError::Invalid(format!("encode envelope: {e}")))
}

/// The most events, results and notices kept for the server while it is out of reach; past
/// it, new ones are dropped (counted in the log) rather than held without bound.
pub(super) const EVENTS_CAP: usize = 8192;

/// A message [`Out::send`] could not queue.
#[derive(Debug)]
pub(super) struct NotQueued;

/// The sending side of the ordered publisher, bounded by [`EVENTS_CAP`] messages not yet
/// handed to the client.
#[derive(Clone)]
pub(super) struct Out {
    tx: mpsc::UnboundedSender<Envelope>,
    pending: Arc<AtomicUsize>,
}

impl Out {
    fn new(tx: mpsc::UnboundedSender<Envelope>) -> Self {
        Self {
            tx,
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Queues `env` for publishing; an error when the publisher has stopped or is full (the
    /// message is dropped).
    pub(super) fn send(&self, env: Envelope) -> Result<(), NotQueued> {
        let before = self.pending.fetch_add(1, Ordering::SeqCst);
        if before >= EVENTS_CAP {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            if before == EVENTS_CAP {
                tracing::warn!(cap = EVENTS_CAP, topic = %env.topic, "NATS unreachable and the event outbox is full; new events are dropped until it drains.");
            }
            return Err(NotQueued);
        }
        self.tx.send(env).map_err(|_| {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            NotQueued
        })
    }
}

/// Publishes what the bus sends (events, results, notices), one at a time and in order. While
/// the server is out of reach the client holds what was handed to it and this waits, so the
/// queue in front ([`Out`]) is the bounded outbox of events.
async fn publisher(
    nats: Nats,
    mut rx: mpsc::UnboundedReceiver<Envelope>,
    pending: Arc<AtomicUsize>,
) {
    while let Some(env) = rx.recv().await {
        let subject = nats.subjects.msg(&env.topic);
        let published = match encode(&env) {
            Ok(bytes) => nats
                .client
                .publish(subject, bytes.into())
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        pending.fetch_sub(1, Ordering::SeqCst);
        if let Err(e) = published {
            tracing::warn!(topic = %env.topic, error = %e, "Message not published.");
        }
    }
}

/// Ends the forwarding task of a subscription with it.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

#[async_trait]
impl Bus for NatsBus {
    async fn publish(&self, env: Envelope) -> Result<(), BusError> {
        if env.kind == Kind::Task {
            return Err(BusError::Invalid(
                "tasks go through submit, not publish".into(),
            ));
        }
        self.shared.out.send(env).map_err(|_| {
            BusError::Closed(format!(
                "the NATS publisher has stopped or holds {EVENTS_CAP} messages for an unreachable server"
            ))
        })
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
        let nats = &self.shared.nats;
        if !nats.link.is_connected() {
            // Refused at once: never taken, so never lost. The caller answers 503.
            return Err(BusError::transport(
                format!("NATS at {}", nats.url()),
                "not connected (reconnecting with backoff); the task was not accepted, try again",
            ));
        }
        // Stored and dispatched as one step that runs to its end (see `run_to_end`).
        let this = self.clone();
        crate::backend::run_to_end(async move {
            let fresh_id = env.id;
            let admission = this.shared.store.admit(env.clone()).await?;
            if !admission.duplicate {
                let dispatch = if admission.task.task_id == fresh_id {
                    env
                } else {
                    let mut again = Envelope::clone(&admission.task.envelope);
                    again.attempt = admission.task.attempts + 1;
                    again
                };
                let request_id = dispatch.request_id.clone();
                if let Err(e) = this.dispatch(dispatch).await {
                    this.undo_admission(request_id, &e).await;
                    return Err(e);
                }
            }
            Ok(admission)
        })
        .await
    }

    async fn subscribe(&self, pattern: Topic) -> Result<Subscription, BusError> {
        let nats = &self.shared.nats;
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let mut tasks = Vec::new();
        for subject in [nats.subjects.msg(&pattern), nats.subjects.work(&pattern)] {
            let mut sub = nats
                .client
                .subscribe(subject.clone())
                .await
                .map_err(|e| BusError::transport(format!("subscribe {subject}"), e))?;
            let tx = tx.clone();
            let pattern = pattern.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let env: Envelope = match serde_json::from_slice(&msg.payload) {
                        Ok(env) => env,
                        Err(e) => {
                            tracing::warn!(subject = %msg.subject, error = %e, "Unreadable message skipped.");
                            continue;
                        }
                    };
                    if !pattern.matches(&env.topic) {
                        continue;
                    }
                    match tx.try_send(Delivery::new(env, None)) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(d)) => {
                            tracing::warn!(topic = %d.envelope().topic, pattern = %pattern, "Subscriber lagging; event dropped for it.");
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
            }));
        }
        // The server has the interest before this returns: nothing published after is missed.
        // While the server is away the client subscribes again once it is back, and waiting for
        // its answer would only hang the caller (a WebSocket client's handshake).
        if nats.link.is_connected() {
            nats.client
                .flush()
                .await
                .map_err(|e| BusError::transport("flush", e))?;
        }
        Ok(Subscription::new(rx, Box::new(AbortOnDrop(tasks))))
    }

    async fn consume(&self, pattern: Topic) -> Result<Subscription, BusError> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        let handle = consume::start(self.shared.clone(), pattern, tx).await?;
        Ok(Subscription::new(rx, Box::new(AbortOnDrop(vec![handle]))))
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.shared.store.lookup(request_id).await
    }

    async fn task(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        self.shared.store.by_task_id(task_id).await
    }

    async fn tasks(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.shared.store.list().await
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
        let store = &self.shared.store;
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || BusError::TimedOut { after: timeout };
        let unknown = || BusError::UnknownTask(request_id.to_string());
        let record = store.lookup(request_id).await?.ok_or_else(unknown)?;
        if record.state.is_terminal() {
            return Ok(record);
        }
        // Subscribed before the replay reads the store: an outcome recorded through another
        // connection after that read reaches this one as its terminal event.
        let mut events = tokio::time::timeout_at(deadline, self.task_events(record.task_id))
            .await
            .map_err(|_| timed_out())??;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Err(_) => return Err(timed_out()),
                Ok(None) => return Err(BusError::Closed("task events ended early".into())),
                Ok(Some(ev)) if ev.is_terminal() => break,
                Ok(Some(_)) => {}
            }
        }
        match store.by_task_id(record.task_id).await? {
            Some(done) => Ok(done),
            None => store.lookup(request_id).await?.ok_or_else(unknown),
        }
    }

    async fn emit(&self, task_id: Uuid, kind: TaskEventKind) -> Result<(), BusError> {
        if kind.is_terminal() {
            return Err(BusError::Invalid(
                "a task's terminal event comes from recording its outcome, not from emit".into(),
            ));
        }
        let log = &self.shared.log;
        let header = match log.header(task_id) {
            Some(header) => header,
            None => {
                let record = self
                    .shared
                    .store
                    .by_task_id(task_id)
                    .await?
                    .ok_or_else(|| BusError::UnknownTask(task_id.to_string()))?;
                if record.state.is_terminal() {
                    if !kind.follows_outcome() {
                        return Ok(());
                    }
                    log.seed(&record)
                } else {
                    Header::of(&record)
                }
            }
        };
        log.append(&header, kind);
        Ok(())
    }

    async fn task_events(&self, task_id: Uuid) -> Result<TaskEventStream, BusError> {
        let sub = self.subscribe(Topic::task_events(task_id)).await?;
        let log = &self.shared.log;
        let replayed = stream::replay(log, &self.shared.evented, task_id).await?;
        Ok(stream::stream(replayed, sub, log.clone(), task_id))
    }

    fn link(&self) -> Option<crate::backend::LinkStatus> {
        let mut link = self.shared.nats.link();
        link.parked = self.shared.outbox.len();
        Some(link)
    }

    async fn end(&self, request_id: &RequestId, outcome: Outcome) -> Result<TaskRecord, BusError> {
        // Ended and told to its consumer as one step (see `run_to_end`).
        let (this, request_id) = (self.clone(), request_id.clone());
        crate::backend::run_to_end(async move {
            let done = this.shared.store.complete(&request_id, outcome).await?;
            let record = done.task;
            if !done.recorded {
                return Ok(record);
            }
            let notice = CancelNotice::for_ended(&record);
            this.publish(notice).await?;
            Ok(record)
        })
        .await
    }
}
