//! clawbus channels: every way in and out of the runtime, and the [`Daemon`](daemon::Daemon)
//! that runs them over the system (`clawbus up`).
//!
//! Every channel has one lifecycle: [`Prepared`] before the system starts (what can refuse the
//! start without the system: a port, a token, a secret), [`Prepared::start`] over the running
//! system, then a [`Channel`] stopped in two steps around the drain ([`Channel::stop_input`],
//! [`Channel::stop`]).
//!
//! - [`daemon`]: the composition root: the runtime's [`Clawbus`](clawbus_runtime::system::Clawbus) plus
//!   every channel, prepared, started and stopped together.
//! - [`gateway`]: the HTTP channel: the API with token auth, the admin API, channel inbound, task
//!   event streams, the WebSocket protocol, the OpenAI-compatible endpoint, inbound webhooks.
//! - `delivery`: one delivery actor per outbound channel, subscribed to `channel.<name>.out`;
//!   it sends replies and cron announcements with retries (exponential backoff with jitter on
//!   the injected clock, bounded tries), never sends `NO_REPLY` / `HEARTBEAT_OK`, and records
//!   what became of each one in sled and on its task's events.
//! - The outbox (replies waiting to be delivered, and where they go) is the runtime's:
//!   [`clawbus_runtime::outbox`].
//! - `telegram`: the Telegram Bot API channel: a long-polling actor that turns updates into
//!   tasks, the `sendMessage` sink, message splitting, approvals answered from the chat.
//! - `webhook`: outbound webhooks: replies POSTed, signed, to `[webhooks.<name>] deliver_url`;
//!   `webhook::sign`: the signatures, inbound and outbound.

pub mod daemon;
pub(crate) mod delivery;
pub mod gateway;
pub(crate) mod telegram;
pub(crate) mod webhook;

use bus::BusError;

pub use clawbus_runtime::outbox::{OutboundMessage, is_silent, out_topic};

/// Why a channel could not start (before the system starts or over it).
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
    /// A webhook has no secret (to check inbound deliveries, or to sign outbound ones).
    #[error(transparent)]
    WebhookSecret(#[from] webhook::sign::MissingSecret),
    /// The delivery records or the Telegram offset could not be opened.
    #[error("channel state: {what}: {source}")]
    State {
        /// The store (`telegram offset`).
        what: &'static str,
        /// The store's error.
        source: sled::Error,
    },
    /// Binding the gateway beyond loopback needs `--allow-public`.
    #[error(
        "refusing to bind {0}: not a loopback address (pass --allow-public to expose the gateway)"
    )]
    PublicBind(std::net::IpAddr),
    /// The gateway's token file could not be read or written.
    #[error("state dir {}: token: {source}", path.display())]
    Token {
        /// The state folder.
        path: std::path::PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The store of used webhook signatures could not be opened.
    #[error("the store of used webhook signatures: {0}")]
    WebhookStore(#[source] sled::Error),
    /// The gateway's listening socket could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The bus refused a subscription.
    #[error("bus: {0}")]
    Bus(#[from] BusError),
}

/// A channel before the system starts: what can refuse the start on its side without the
/// system (a port, a token, a secret) is already done. The [`Daemon`](daemon::Daemon) prepares
/// every channel, starts the system, then starts each prepared channel over it.
#[async_trait::async_trait(?Send)]
pub trait Prepared {
    /// Starts the channel over the running system. Must run inside an actix `System`.
    async fn start(
        self: Box<Self>,
        system: &clawbus_runtime::system::Clawbus,
    ) -> Result<Box<dyn Channel>, ChannelError>;
}

/// A running channel, stopped in two steps around the system's drain: [`Channel::stop_input`]
/// before it (no new work comes in), [`Channel::stop`] after it.
#[async_trait::async_trait]
pub trait Channel: Send + Sync {
    /// The channel's name.
    fn name(&self) -> &str;

    /// Stops taking input; called before the system drains. By default nothing stops (a
    /// delivery actor goes on delivering through the drain; the HTTP port stays open and its
    /// `/healthz` answers 503).
    async fn stop_input(&self) {}

    /// Stops for good; called after the drain. By default nothing is left to stop.
    async fn stop(self: Box<Self>) {}
}
