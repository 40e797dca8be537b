//! The outbound side of the channels, and the channels that are not HTTP: every way out is an
//! actor the composition root ([`crate::system`]) starts.
//!
//! - [`delivery`]: one delivery actor per outbound channel, subscribed to `channel.<name>.out`;
//!   it sends replies and cron announcements with retries (exponential backoff with jitter on
//!   the injected clock, bounded tries), never sends `NO_REPLY` / `HEARTBEAT_OK`, and records
//!   what became of each one in sled and on its task's events.
//! - [`outbox`]: replies and announcements waiting to be delivered, in sled, so a restart
//!   delivers what a killed daemon had not.
//! - [`replies`]: which finished tasks have a reply to deliver, and where (the task's origin).
//! - [`telegram`]: the Telegram Bot API channel: a long-polling actor that turns updates into
//!   tasks, the `sendMessage` sink, message splitting, approvals answered from the chat.
//! - [`webhook`]: outbound webhooks: replies POSTed, signed, to `[webhooks.<name>] deliver_url`.

pub mod delivery;
pub mod outbox;
pub mod replies;
pub mod telegram;
pub mod webhook;

use bus::{BusError, Topic};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The Telegram channel's name.
pub const TELEGRAM_CHANNEL: &str = crate::config::TELEGRAM;
/// The channel name of outbound webhooks (as on the origin of inbound ones).
pub const WEBHOOK: &str = crate::gateway::webhooks::CHANNEL;

/// One message to send out, as published on `channel.<name>.out` (by a finished task, by a
/// cron announcement).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// Who gets it on the channel: a Telegram chat id, a webhook's name.
    #[serde(default)]
    pub to: Option<String>,
    /// The text.
    pub text: String,
    /// The task whose reply it is (its events record the delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// The cron job that announced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl OutboundMessage {
    /// The id a receiver can drop a repeat by, and the outbox's key: the task id, else
    /// `job:<job>`; `None` for a message that is neither (a chat notice).
    pub fn delivery_id(&self) -> Option<String> {
        self.task_id
            .map(|t| t.to_string())
            .or_else(|| self.job.as_ref().map(|j| format!("job:{j}")))
    }
}

/// The topic a channel's delivery actor listens on: `channel.<name>.out`.
pub fn out_topic(channel: &str) -> Result<Topic, BusError> {
    Topic::parse(&format!("channel.{channel}.out")).map_err(|e| BusError::Invalid(e.to_string()))
}

/// True for a text that is never delivered: empty, exactly `NO_REPLY`, or a heartbeat acknowledgement
/// (`HEARTBEAT_OK` with at most a few words), as the cron scheduler decides it.
pub fn is_silent(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || t == crate::cron::fire::NO_REPLY || crate::cron::heartbeat::is_ack(t)
}

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
    WebhookSecret(#[from] crate::gateway::webhooks::MissingSecret),
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
    pub outbox: outbox::Outbox,
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
