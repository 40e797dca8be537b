//! clawbus channels: every way in and out of the runtime, and the [`Daemon`](gateway::Daemon)
//! that runs them over the system (`clawbus up`).
//!
//! - [`gateway`]: the HTTP server — the API with token auth, channel inbound, task event streams,
//!   the WebSocket protocol, the OpenAI-compatible endpoint, inbound webhooks — and the
//!   [`Daemon`](gateway::Daemon): the runtime's [`Clawbus`](crate::system::Clawbus) plus these
//!   channels, started and stopped together.
//! - [`Channels`]: the channels that are not HTTP, each an actor the daemon starts:
//! - [`delivery`]: one delivery actor per outbound channel, subscribed to `channel.<name>.out`;
//!   it sends replies and cron announcements with retries (exponential backoff with jitter on
//!   the injected clock, bounded tries), never sends `NO_REPLY` / `HEARTBEAT_OK`, and records
//!   what became of each one in sled and on its task's events.
//! - The outbox (replies waiting to be delivered, and where they go) is the runtime's:
//!   [`crate::outbox`].
//! - [`telegram`]: the Telegram Bot API channel: a long-polling actor that turns updates into
//!   tasks, the `sendMessage` sink, message splitting, approvals answered from the chat.
//! - [`webhook`]: outbound webhooks: replies POSTed, signed, to `[webhooks.<name>] deliver_url`;
//!   [`webhook::sign`]: the signatures, inbound and outbound.

// Path shims: the lower crates' modules under their own names, so `crate::config::…` and
// `crate::session::…` read as before the split.
use clawbus_core::{config, ids, task};
use clawbus_runtime::{
    agent, approvals, coordinator, cron, ingress, lane, metrics, model, origin, outbox, router,
    session, system, turn,
};

pub mod delivery;
pub mod gateway;
pub mod telegram;
pub mod webhook;

use bus::BusError;

pub use crate::outbox::{OutboundMessage, is_silent, out_topic};

/// The Telegram channel's name.
pub const TELEGRAM_CHANNEL: &str = crate::config::TELEGRAM;
/// The channel name of outbound webhooks (as on the origin of inbound ones).
pub const WEBHOOK: &str = crate::config::WEBHOOK;

/// Why the channels could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// `[channels.telegram] token_env` names a variable that is unset or empty.
    #[error(
        "channels.telegram.token_env: the environment variable {env} is unset or empty (expected the bot token)"
    )]
    MissingToken {
        /// The variable.
        env: String,
    },
    /// A webhook with a `deliver_url` has no secret to sign with.
    #[error(transparent)]
    WebhookSecret(#[from] webhook::sign::MissingSecret),
    /// The delivery records or the Telegram offset could not be opened.
    #[error("channel state: {0}")]
    State(String),
    /// The bus refused a subscription.
    #[error("bus: {0}")]
    Bus(#[from] BusError),
}

/// The running channels: the delivery actors and the Telegram poller.
#[derive(Default)]
pub struct Channels {
    deliveries: Vec<delivery::DeliveryHandle>,
    telegram: Option<telegram::TelegramHandle>,
}

/// What the channels are built from.
pub struct ChannelParts<'a> {
    /// The validated configuration.
    pub config: &'a crate::config::Config,
    /// The system's database (the Telegram offset).
    pub db: &'a sled::Db,
    /// Pending deliveries and the delivery records.
    pub outbox: crate::outbox::Outbox,
    /// The bus.
    pub bus: std::sync::Arc<dyn bus::Bus>,
    /// The one clock.
    pub clock: std::sync::Arc<dyn bus::Clock>,
    /// Approval requests (answered from Telegram).
    pub approvals: crate::approvals::Approvals,
    /// The routing table (Telegram messages are routed at ingress).
    pub router: std::sync::Arc<crate::router::Router>,
    /// The metrics registry (deliveries by outcome).
    pub metrics: crate::metrics::Metrics,
}

impl Channels {
    /// Starts a delivery actor per outbound channel (Telegram when it polls, webhooks when one
    /// has a `deliver_url`) and the Telegram poller. Must run inside an actix `System`.
    pub async fn start(parts: ChannelParts<'_>) -> Result<Self, ChannelError> {
        let config = parts.config;
        let deps = || delivery::DeliveryDeps {
            bus: parts.bus.clone(),
            clock: parts.clock.clone(),
            outbox: parts.outbox.clone(),
            backoff: delivery::Backoff::from_def(&config.delivery),
            jitter: delivery::backoff::jitter,
            metrics: parts.metrics.clone(),
        };
        let mut channels = Self::default();
        if let Some(sink) = webhook::WebhookSink::from_config(config, parts.clock.clone())? {
            let handle =
                delivery::DeliveryHandle::start(WEBHOOK, std::sync::Arc::new(sink), deps()).await?;
            channels.deliveries.push(handle);
        }
        let telegram_def = config
            .channels
            .get(TELEGRAM_CHANNEL)
            .and_then(|c| c.telegram.as_ref());
        if let Some(def) = telegram_def {
            let token = std::env::var(&def.token_env)
                .ok()
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ChannelError::MissingToken {
                    env: def.token_env.clone(),
                })?;
            let api = telegram::BotApi::new(&def.base_url, token.trim());
            let sink = telegram::TelegramSink::new(api.clone());
            let handle = delivery::DeliveryHandle::start(
                TELEGRAM_CHANNEL,
                std::sync::Arc::new(sink),
                deps(),
            )
            .await?;
            channels.deliveries.push(handle);
            let offsets = telegram::OffsetStore::open(parts.db)
                .map_err(|e| ChannelError::State(format!("telegram offset: {e}")))?;
            let poller = telegram::TelegramHandle::start(
                def,
                api,
                parts.bus.clone(),
                parts.router.clone(),
                parts.approvals.clone(),
                offsets,
            )
            .await?;
            channels.telegram = Some(poller);
        }
        Ok(channels)
    }

    /// The delivery actor of `channel`, when it has one.
    pub fn delivery(&self, channel: &str) -> Option<&delivery::DeliveryHandle> {
        self.deliveries.iter().find(|d| d.channel() == channel)
    }

    /// Stops taking input (the Telegram poller); deliveries in flight go on while the system
    /// drains.
    pub async fn stop_input(&self) {
        if let Some(t) = &self.telegram {
            t.stop().await;
        }
    }
}
