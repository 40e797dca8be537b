//! The delivery actor of one outbound channel.
//!
//! It subscribes to `channel.<name>.out` and sends each [`OutboundMessage`] through the
//! channel's [`Sink`], part after part (a long Telegram text is several messages). A try that
//! fails for a passing reason (a 5xx, a 429, a lost connection) is tried again after a
//! [`Backoff`] measured on the injected clock; a permanent failure, or the last allowed try
//! failing, ends the delivery. Either way the outcome is a [`DeliveryRecord`] (in sled, or the
//! cluster's store on NATS), and for a task's reply a `delivered` / `delivery_failed` event on the task's events: a reply is never
//! dropped without a trace. `NO_REPLY` and heartbeat acknowledgements are never sent.
//!
//! Messages to the same target go out in order: a later one waits while an earlier one is still
//! being tried. What reaches the actor is staged in the [`clawbus_runtime::outbox`] until its
//! outcome is recorded; on start the actor takes its channel's pending entries first, in order.
//! On a shared outbox (NATS) it claims each delivery before its first try (a later message to
//! the same target waits for that too), drops one whose claim was lost, and every few seconds
//! adopts the entries of nodes that died or whose claims lapsed.

mod actor;
pub(crate) mod backoff;
pub(crate) use clawbus_runtime::outbox::record;

#[cfg(test)]
mod tests;

pub(crate) use actor::DeliveryActor;
pub(crate) use backoff::Backoff;
pub(crate) use record::{DeliveryRecord, DeliveryState};

use super::OutboundMessage;
use actix::prelude::*;
use bus::{Bus, BusError, Clock};
use std::sync::Arc;
use std::time::Duration;

/// Why one try failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SendError {
    /// Worth another try: a 5xx, a 429, a timeout, a lost connection.
    #[error("{reason}")]
    Transient {
        /// What happened.
        reason: String,
        /// How long the server asked to wait (Telegram's `retry_after`, `Retry-After`).
        retry_after: Option<Duration>,
    },
    /// Another try would fail the same way: a 4xx, an unknown target.
    #[error("{reason}")]
    Permanent {
        /// What happened.
        reason: String,
    },
}

/// Where a channel's messages go: a chat API, a URL.
#[async_trait::async_trait]
pub(crate) trait Sink: Send + Sync + 'static {
    /// The parts a text is sent as, in order (one unless the channel limits message length).
    fn parts(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }

    /// Sends one part of `msg` to `to`.
    async fn send(&self, msg: &OutboundMessage, to: &str, part: &str) -> Result<(), SendError>;
}

/// What a delivery actor needs.
pub(crate) struct DeliveryDeps {
    /// The bus (its `channel.<name>.out` subscription, and task events).
    pub bus: Arc<dyn Bus>,
    /// The one clock: retries are due on it.
    pub clock: Arc<dyn Clock>,
    /// Where pending deliveries wait and outcomes are recorded.
    pub outbox: clawbus_runtime::outbox::Outbox,
    /// The retry schedule.
    pub backoff: Backoff,
    /// The jitter factor of each wait (0.8..=1.2; tests pass a constant).
    pub jitter: fn() -> f64,
    /// Deliveries by outcome and retries, in `/metrics`.
    pub metrics: clawbus_runtime::metrics::Metrics,
}

impl DeliveryDeps {
    /// The dependencies of a delivery actor over the running system (the configured backoff,
    /// the jitter of [`backoff::jitter`]).
    pub(crate) fn of(system: &clawbus_runtime::system::Clawbus) -> Self {
        Self {
            bus: system.bus().clone(),
            clock: system.clock().clone(),
            outbox: system.outbox().clone(),
            backoff: Backoff::from_def(&system.config().delivery),
            jitter: backoff::jitter,
            metrics: system.metrics().clone(),
        }
    }
}

/// One delivery still being tried, for status and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingView {
    /// The target.
    pub to: String,
    /// The part being sent (from 0) and how many there are.
    pub part: usize,
    /// Parts in all.
    pub parts: usize,
    /// Tries made so far, over every part.
    pub attempts: u32,
    /// When the next try is due (Unix ms on the injected clock).
    pub due_ms: u64,
    /// Whether a try is under way now.
    pub in_flight: bool,
}

/// Hands a message to the actor (what the bus subscription does for each envelope).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Enqueue(pub OutboundMessage);

/// Starts every try that is due on the clock (the actor's own timers send it too).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Tick;

/// The deliveries still being tried.
#[derive(Message)]
#[rtype(result = "Vec<PendingView>")]
pub(crate) struct Pending;

/// The handle of a channel's delivery actor.
#[derive(Clone)]
pub(crate) struct DeliveryHandle {
    channel: String,
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "the handle holds the actor's address for as long as the channel runs; tests send to it"
        )
    )]
    addr: Addr<DeliveryActor>,
}

impl DeliveryHandle {
    /// Subscribes to `channel.<channel>.out` and starts the actor. Must run inside an actix
    /// `System`.
    pub(crate) async fn start(
        channel: &str,
        sink: Arc<dyn Sink>,
        deps: DeliveryDeps,
    ) -> Result<Self, BusError> {
        let sub = deps.bus.subscribe(super::out_topic(channel)?).await?;
        let actor = DeliveryActor::new(channel.to_string(), sink, deps);
        let addr = DeliveryActor::create(move |ctx| {
            ctx.set_mailbox_capacity(1024);
            ctx.add_stream(sub.into_stream());
            actor
        });
        tracing::info!(channel, "Delivery actor started.");
        Ok(Self {
            channel: channel.to_string(),
            addr,
        })
    }

    /// The channel it delivers for.
    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    #[cfg(test)]
    /// Hands it a message directly (the bus is the usual way in).
    pub(crate) async fn enqueue(&self, msg: OutboundMessage) -> Result<(), MailboxError> {
        self.addr.send(Enqueue(msg)).await
    }

    #[cfg(test)]
    /// Starts the tries that are due now (after a test moved the clock).
    pub(crate) async fn tick(&self) -> Result<(), MailboxError> {
        self.addr.send(Tick).await
    }

    #[cfg(test)]
    /// The deliveries still being tried.
    pub(crate) async fn pending(&self) -> Result<Vec<PendingView>, MailboxError> {
        self.addr.send(Pending).await
    }
}

/// A delivery actor is a running channel: it goes on delivering through the drain, and stops
/// with the system.
impl crate::Channel for DeliveryHandle {
    fn name(&self) -> &str {
        &self.channel
    }
}
