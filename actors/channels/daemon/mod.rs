//! The composition root of a running gateway (`clawbus up`): the runtime's [`Clawbus`] plus
//! every channel, each started and stopped the same way.
//!
//! 1. Prepare every channel ([`Prepared`]): the HTTP listener binds its port and reads the
//!    token and the inbound webhook secrets, outbound webhooks read their secrets, Telegram its
//!    bot token. A port in use or a missing secret refuses the start before any store or agent
//!    starts, and the token exists before the agents' secret redaction reads it.
//! 2. Start the system, then each prepared channel over it ([`Prepared::start`]): the delivery
//!    actors, the Telegram poller, the HTTP server.
//! 3. Shutdown: every channel stops taking input ([`Channel::stop_input`]: the Telegram poller
//!    stops; the HTTP port stays open, `/healthz` answers 503), the system drains, then every
//!    channel stops ([`Channel::stop`]: the HTTP port closes).
//!
//! `recovery`: the restart after a store that refused writes.

mod recovery;

use crate::gateway::Listener;
use crate::telegram::TelegramChannel;
use crate::webhook::WebhookChannel;
use crate::{Channel, ChannelError, Prepared};
use bus::Bus;
use clawbus_core::config::Config;
use clawbus_runtime::agent::AgentHandle;
use clawbus_runtime::lane::Lanes;
use clawbus_runtime::metrics::Metrics;
use clawbus_runtime::system::nodes::Heartbeat;
use clawbus_runtime::system::{Clawbus, DrainReport, SystemError, SystemOptions};
use std::net::SocketAddr;
use std::time::Duration;

/// How this process runs (flags), as opposed to what runs (files).
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Port override (`--port`); `Some(0)` picks a free port.
    pub port: Option<u16>,
    /// Allow binding beyond loopback (`--allow-public`).
    pub allow_public: bool,
}

impl StartOptions {
    /// A free port on loopback (what tests and benches run on).
    pub fn free_port() -> Self {
        Self {
            port: Some(0),
            allow_public: false,
        }
    }
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The system (stores, bus, agents) could not start.
    #[error(transparent)]
    System(#[from] SystemError),
    /// A channel (the HTTP listener, a delivery actor, the Telegram poller) could not start.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

/// A running gateway: the system plus its channels (the delivery actors, the Telegram poller,
/// the HTTP one).
pub struct Daemon {
    system: Clawbus,
    /// This node's heartbeat (`clawbus nodes`); `None` when its store could not be written.
    heartbeat: Option<Heartbeat>,
    /// In start order; stopped in the reverse order.
    channels: Vec<Box<dyn Channel>>,
    addr: SocketAddr,
    token: String,
}

/// Every configured channel, prepared, in start order: the outbound ones first (their delivery
/// actors are subscribed before any input comes in), the HTTP one last. The HTTP listener is
/// bound first of all.
async fn prepare(
    config: &Config,
    opts: &StartOptions,
) -> Result<(Listener, Vec<Box<dyn Prepared>>), StartError> {
    let listener = Listener::bind(config, opts.port, opts.allow_public).await?;
    let mut prepared: Vec<Box<dyn Prepared>> = Vec::new();
    if let Some(webhooks) = WebhookChannel::prepare(config).map_err(ChannelError::from)? {
        prepared.push(Box::new(webhooks));
    }
    if let Some(telegram) = TelegramChannel::prepare(config)? {
        prepared.push(Box::new(telegram));
    }
    Ok((listener, prepared))
}

impl Daemon {
    /// Starts the system and every channel. Must run inside an actix `System`.
    pub async fn start(config: Config, opts: StartOptions) -> Result<Self, StartError> {
        Self::start_with(config, opts, SystemOptions::default()).await
    }

    /// Starts with explicit system options (clock, shards).
    pub async fn start_with(
        config: Config,
        opts: StartOptions,
        system_opts: SystemOptions,
    ) -> Result<Self, StartError> {
        let (listener, mut prepared) = prepare(&config, &opts).await?;
        let (addr, token) = (listener.addr(), listener.token().to_string());
        prepared.push(Box::new(listener));
        let system = Clawbus::start(config, system_opts).await?;
        let mut channels = Vec::with_capacity(prepared.len());
        for channel in prepared {
            channels.push(channel.start(&system).await?);
        }
        let heartbeat = match Heartbeat::start(&system, Some(format!("http://{addr}"))).await {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::error!(node = %system.node_id(), error = %e, "Node heartbeat not started: `clawbus nodes` will not list this node.");
                None
            }
        };
        Ok(Self {
            system,
            heartbeat,
            channels,
            addr,
            token,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The gateway's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The system behind the gateway.
    pub fn system(&self) -> &Clawbus {
        &self.system
    }

    /// The running channels, in start order.
    pub fn channels(&self) -> &[Box<dyn Channel>] {
        &self.channels
    }

    /// The bus.
    pub fn bus(&self) -> &dyn Bus {
        self.system.bus().as_ref()
    }

    /// The running agents.
    pub fn agents(&self) -> &[AgentHandle] {
        self.system.agents()
    }

    /// The global lanes every run takes a slot in.
    pub fn lanes(&self) -> &Lanes {
        self.system.lanes()
    }

    /// The metrics registry served at `GET /metrics`.
    pub fn metrics(&self) -> &Metrics {
        self.system.metrics()
    }

    /// Shuts down with the configured grace period (`[gateway] shutdown_grace`).
    pub async fn shutdown(self) -> DrainReport {
        let grace = self.system.config().gateway.shutdown_grace;
        self.shutdown_within(grace).await
    }

    /// Refuses new work, lets running turns finish for up to `grace`, stops the rest (they run
    /// again on the next start), answers what finished, flushes the stores.
    pub async fn shutdown_within(self, grace: Duration) -> DrainReport {
        let Self {
            system,
            channels,
            heartbeat,
            ..
        } = self;
        if let Some(heartbeat) = heartbeat {
            heartbeat.stop().await;
        }
        let report = stop_around(channels, system.shutdown(grace)).await;
        tracing::info!("Gateway stopped.");
        report
    }
}

/// Stops every channel's input, runs `drain`, then stops every channel, the last started first.
/// The HTTP port stays open through the drain: `/healthz` answers 503 until the end.
async fn stop_around<T>(
    channels: Vec<Box<dyn Channel>>,
    drain: impl std::future::Future<Output = T>,
) -> T {
    for channel in &channels {
        channel.stop_input().await;
    }
    let out = drain.await;
    for channel in channels.into_iter().rev() {
        channel.stop().await;
    }
    out
}

#[cfg(test)]
mod tests;
