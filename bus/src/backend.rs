//! The transport-neutral bus API every backend implements, and what a consumer receives.

use crate::envelope::{Envelope, Kind, RequestId};
use crate::error::BusError;
use crate::events::{TaskEventKind, TaskEventStream};
use crate::task::{Admission, Outcome, TaskRecord};
use crate::topic::Topic;
use async_trait::async_trait;
use futures::StreamExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// A message bus: fire-and-forget events, durable deduplicated tasks, request/reply.
///
/// The same conformance suite (`bus/tests/conformance`) runs against every implementation.
#[async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Publishes an event (or a result) to every current subscriber whose pattern matches.
    /// Not journaled: a subscriber that is not there misses it.
    async fn publish(&self, env: Envelope) -> Result<(), BusError>;

    /// Submits a task: first sight of its request id journals it durably (before this returns) and
    /// delivers it to exactly one consumer; a known request id answers the existing record,
    /// `duplicate: true`, and starts nothing. A known request id with another topic or payload is
    /// [`BusError::Conflict`].
    async fn submit(&self, env: Envelope) -> Result<Admission, BusError>;

    /// Subscribes to events and results on topics matching `pattern`, and sees a copy of each
    /// task dispatched to such a topic (a copy that cannot be settled: consumers run tasks).
    async fn subscribe(&self, pattern: Topic) -> Result<Subscription, BusError>;

    /// Consumes tasks on topics matching `pattern`, competing with the other consumers of it.
    async fn consume(&self, pattern: Topic) -> Result<Subscription, BusError>;

    /// The record of a task by request id, inside the dedup window.
    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError>;

    /// The record of a task by task id.
    async fn task(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError>;

    /// Every task the store holds inside the dedup window, in admission order.
    async fn tasks(&self) -> Result<Vec<TaskRecord>, BusError>;

    /// Emits an event of a running task (model calls, deltas, tool calls, progress) on
    /// [`Topic::task_events`] and [`Topic::events_for`] its work topic; the bus assigns `seq` and
    /// `ts_ms`. The terminal event is refused ([`BusError::Invalid`]): it comes from the outcome.
    /// Events of a task that already ended are dropped, but for the delivery events of its reply
    /// ([`TaskEventKind::follows_outcome`]), which are appended after its terminal event.
    async fn emit(&self, task_id: Uuid, kind: TaskEventKind) -> Result<(), BusError>;

    /// The task's events: every one already emitted (replayed), then live ones, without gap or
    /// duplicate; the stream ends after the terminal event.
    async fn task_events(&self, task_id: Uuid) -> Result<TaskEventStream, BusError>;

    /// Waits until the task is terminal (its terminal event), or `timeout` passes
    /// ([`BusError::TimedOut`]).
    async fn wait(&self, request_id: &RequestId, timeout: Duration)
    -> Result<TaskRecord, BusError>;

    /// [`Bus::wait`] for the task its admission answered (`admitted`, from [`Bus::submit`]): a
    /// bus that can wait by task id skips reading the record first. The answer is what
    /// [`Bus::wait`] for its request id gives.
    async fn wait_admitted(
        &self,
        admitted: &TaskRecord,
        timeout: Duration,
    ) -> Result<TaskRecord, BusError> {
        self.wait(&admitted.request_id, timeout).await
    }

    /// Ends a task from outside its consumer (a cancel, a deadline that passed): records
    /// `outcome` unless the task already ended (the first outcome wins), then announces it on
    /// [`Topic::cancellations`] so a consumer running it stops.
    async fn end(&self, request_id: &RequestId, outcome: Outcome) -> Result<TaskRecord, BusError>;

    /// Cancels a task: [`Bus::end`] with a `cancelled` outcome.
    async fn cancel(&self, request_id: &RequestId, reason: &str) -> Result<TaskRecord, BusError> {
        let outcome = Outcome::Cancelled {
            reason: reason.to_string(),
        };
        self.end(request_id, outcome).await
    }

    /// Request/reply: submits the task and waits for its terminal record.
    /// Returns the record and whether the request id was a duplicate.
    async fn request(
        &self,
        env: Envelope,
        timeout: Duration,
    ) -> Result<(TaskRecord, bool), BusError> {
        let admission = self.submit(env).await?;
        if admission.task.state.is_terminal() {
            return Ok((admission.task, admission.duplicate));
        }
        let record = self.wait_admitted(&admission.task, timeout).await?;
        Ok((record, admission.duplicate))
    }

    /// How the link to a network backend's server stands; `None` for an embedded bus, which
    /// has no link to lose.
    fn link(&self) -> Option<LinkStatus> {
        None
    }
}

/// How a network backend's link to its server stands (`/healthz`, `clawbus nodes`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkStatus {
    /// The server's URL.
    pub server: String,
    /// Connected now: while not, new tasks are refused and outcomes wait in the outbox.
    pub connected: bool,
    /// How many times the connection was lost since the start.
    pub disconnects: u64,
    /// The reconnection attempt under way (0 while connected).
    pub reconnect_attempt: u64,
    /// The last error the connection reported.
    pub last_error: Option<String>,
    /// Writes (task outcomes) made while the server was away, waiting in the bounded local
    /// outbox for it.
    pub parked: usize,
}

/// How a consumer settles a delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Done with it (events; a task should use `Complete`).
    Ack,
    /// Could not handle it now: deliver it again after `delay`, as a new attempt.
    Nack {
        /// How long to wait before redelivery.
        delay: Duration,
        /// Why the attempt failed, for the `retry` event; `None` says only that it was nacked.
        reason: Option<String>,
    },
    /// The task reached its terminal outcome.
    Complete(Outcome),
}

/// The backend side of a delivery: records progress and settles it.
#[async_trait]
pub trait Acker: Send + Sync {
    /// Marks the attempt as running. `false` means the task is already terminal: skip it.
    async fn start(&self, env: &Envelope) -> Result<bool, BusError>;
    /// Records a progress mark on the running attempt; `false` when the task is not running.
    async fn progress(&self, env: &Envelope, note: serde_json::Value) -> Result<bool, BusError> {
        let _ = (env, note);
        Ok(true)
    }
    /// Settles the delivery.
    async fn settle(&self, env: &Envelope, how: Settle) -> Result<(), BusError>;
    /// Called when a task delivery is dropped unsettled (its consumer died): redeliver it.
    fn abandon(&self, env: &Envelope);
}

/// One message handed to a subscriber or consumer.
///
/// Cheap to clone: clones share one settlement, so a run can hold one clone to start and complete
/// the task while its owner holds another to cancel it. The first settlement wins; a task delivery
/// whose every clone is dropped unsettled is handed back for redelivery.
#[derive(Clone)]
pub struct Delivery {
    inner: Arc<DeliveryInner>,
}

struct DeliveryInner {
    /// Shared by the deliveries of one broadcast: each subscriber's copy is this pointer.
    envelope: Arc<Envelope>,
    acker: Option<Arc<dyn Acker>>,
    settled: AtomicBool,
}

impl Delivery {
    /// A delivery settled through `acker` (tasks), or needing no settlement (`None`, events).
    pub fn new(envelope: Envelope, acker: Option<Arc<dyn Acker>>) -> Self {
        Self::shared(Arc::new(envelope), acker)
    }

    /// A delivery of an envelope that other deliveries (the other subscribers of a broadcast)
    /// hold too.
    pub(crate) fn shared(envelope: Arc<Envelope>, acker: Option<Arc<dyn Acker>>) -> Self {
        Self {
            inner: Arc::new(DeliveryInner {
                envelope,
                acker,
                settled: AtomicBool::new(false),
            }),
        }
    }

    /// The message.
    pub fn envelope(&self) -> &Envelope {
        &self.inner.envelope
    }

    /// True once settled (or skipped because the task had already ended).
    pub fn is_settled(&self) -> bool {
        self.inner.settled.load(Ordering::SeqCst)
    }

    /// Marks a task attempt as running; `false` means it already ended and must be skipped.
    pub async fn start(&self) -> Result<bool, BusError> {
        match &self.inner.acker {
            Some(a) => {
                let go = a.start(&self.inner.envelope).await?;
                if !go {
                    self.inner.settled.store(true, Ordering::SeqCst);
                }
                Ok(go)
            }
            None => Ok(true),
        }
    }

    /// Marks the running attempt as alive, with a progress `note` (recorded on the task and
    /// emitted as a `progress` event). `false` when the task is no longer running.
    pub async fn progress(&self, note: serde_json::Value) -> Result<bool, BusError> {
        match &self.inner.acker {
            Some(a) => a.progress(&self.inner.envelope, note).await,
            None => Ok(false),
        }
    }

    /// Lets the delivery go without settling it and without a redelivery in this process: the
    /// store keeps the task as it stands (queued or running), so it runs again on the next
    /// start. For a graceful shutdown that stops runs it did not let finish.
    pub fn release(&self) {
        self.inner.settled.store(true, Ordering::SeqCst);
    }

    /// Takes the envelope back, unsettled and without redelivery (the broker could not hand it over).
    pub(crate) fn into_envelope(self) -> Envelope {
        self.inner.settled.store(true, Ordering::SeqCst);
        Envelope::clone(&self.inner.envelope)
    }

    /// Acknowledges an event.
    pub async fn ack(&self) -> Result<(), BusError> {
        self.settle(Settle::Ack).await
    }

    /// Asks for redelivery after `delay` (a new attempt of the same request id).
    pub async fn nack(&self, delay: Duration) -> Result<(), BusError> {
        self.settle(Settle::Nack {
            delay,
            reason: None,
        })
        .await
    }

    /// Like [`Delivery::nack`], saying why the attempt failed: the `retry` event carries
    /// `reason` instead of `nacked`.
    pub async fn nack_because(&self, delay: Duration, reason: &str) -> Result<(), BusError> {
        self.settle(Settle::Nack {
            delay,
            reason: Some(reason.to_string()),
        })
        .await
    }

    /// Records the task's terminal outcome, answered to every caller of its request id.
    /// Only the first settlement of a delivery counts; later ones are no-ops. A settlement that
    /// failed does not count.
    pub async fn complete(&self, outcome: Outcome) -> Result<(), BusError> {
        self.settle(Settle::Complete(outcome)).await
    }

    async fn settle(&self, how: Settle) -> Result<(), BusError> {
        if self.inner.settled.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let settled = match &self.inner.acker {
            Some(a) => a.settle(&self.inner.envelope, how).await,
            None => Ok(()),
        };
        if settled.is_err() {
            // Not recorded: the delivery can be settled again, and is redelivered if dropped.
            self.inner.settled.store(false, Ordering::SeqCst);
        }
        settled
    }
}

impl Drop for DeliveryInner {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::SeqCst) && self.envelope.kind == Kind::Task {
            if let Some(a) = &self.acker {
                a.abandon(&self.envelope);
            }
        }
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("envelope", &self.inner.envelope)
            .field("settled", &self.is_settled())
            .finish()
    }
}

/// A stream of deliveries; dropping it ends the subscription.
pub struct Subscription {
    rx: mpsc::Receiver<Delivery>,
    _guard: Box<dyn Send + Sync>,
}

impl Subscription {
    /// Wraps a receiver; `guard` is dropped with the subscription (it unsubscribes).
    pub fn new(rx: mpsc::Receiver<Delivery>, guard: Box<dyn Send + Sync>) -> Self {
        Self { rx, _guard: guard }
    }

    /// The next delivery; `None` when the bus has closed.
    pub async fn next(&mut self) -> Option<Delivery> {
        self.rx.recv().await
    }

    /// Turns the subscription into a `Stream` (for `ctx.add_stream`).
    pub fn into_stream(self) -> futures::stream::BoxStream<'static, Delivery> {
        let Subscription { rx, _guard } = self;
        futures::stream::unfold((rx, _guard), |(mut rx, g)| async move {
            rx.recv().await.map(|d| (d, (rx, g)))
        })
        .boxed()
    }
}

/// Runs `work` to its end and waits for it: dropping the returned future stops the waiting, not
/// the work (see [`crate::to_end::ToEnd`]). A submit is two steps (store, then dispatch); run
/// this way, a caller that gives up between them (a run cancelled mid-submit) cannot leave a task
/// stored but never delivered, which every later duplicate would find and take as delivered.
pub(crate) async fn run_to_end<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, BusError>> + Send + 'static,
) -> Result<T, BusError> {
    crate::to_end::ToEnd::new(work).await
}
