//! The gateway: the HTTP channel (the API, the generic channel inbound) over the system that
//! [`crate::system`] builds.

mod admit;
pub mod api;
pub mod approvals;
pub mod channels;
pub mod cron;
mod events;
mod health;
pub mod metrics;
pub mod openai;
mod recovery;
mod serve;
pub mod sessions;
pub mod status;
pub mod tail;
pub mod tasks;
pub mod token;
pub mod topics;
pub mod usage;
pub mod webhooks;
pub mod ws;

use crate::agent::AgentHandle;
use crate::config::Config;
use crate::lane::Lanes;
use crate::metrics::Metrics;
use crate::system::{Clawbus, DrainReport, SystemError, SystemOptions};
use crate::{ChannelError, ChannelParts, Channels};
use bus::Bus;
use std::net::SocketAddr;
use std::sync::Arc;
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
    /// Binding beyond loopback needs `--allow-public`.
    #[error(
        "refusing to bind {0}: not a loopback address (pass --allow-public to expose the gateway)"
    )]
    PublicBind(std::net::IpAddr),
    /// The system (stores, bus, agents) could not start.
    #[error(transparent)]
    System(#[from] SystemError),
    /// The token file could not be read or written.
    #[error("state dir {}: token: {cause}", path.display())]
    Token {
        /// The state folder.
        path: std::path::PathBuf,
        /// What failed.
        cause: String,
    },
    /// A webhook's secret is not in the environment.
    #[error(transparent)]
    WebhookSecret(#[from] webhooks::MissingSecret),
    /// A channel (a delivery actor, the Telegram poller) could not start.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The store of used webhook signatures could not be opened.
    #[error("the store of used webhook signatures: {0}")]
    WebhookStore(#[source] sled::Error),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// The HTTP channel: the API and the generic channel inbound, served on one port.
pub struct HttpChannel {
    addr: SocketAddr,
    token: String,
    stop: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

/// The listening socket, bound before the system starts (a port in use fails at once), with the
/// token and the webhook secrets it will check.
pub struct Listener {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    token: String,
    hooks: webhooks::Hooks,
}

impl Listener {
    /// Reads the token and the webhook secrets and binds the port: everything that can refuse
    /// the start on the gateway's side, done before anything else starts.
    pub async fn bind(config: &Config, opts: &StartOptions) -> Result<Self, StartError> {
        let bind = config.gateway.bind;
        if !bind.is_loopback() && !opts.allow_public {
            return Err(StartError::PublicBind(bind));
        }
        let token = gateway_token(config)?;
        let hooks = webhooks::Hooks::from_env(config)?;
        let addr = SocketAddr::new(bind, opts.port.unwrap_or(config.gateway.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|cause| StartError::Listen { addr, cause })?;
        let addr = listener
            .local_addr()
            .map_err(|cause| StartError::Listen { addr, cause })?;
        Ok(Self {
            listener,
            addr,
            token,
            hooks,
        })
    }
}

impl HttpChannel {
    /// Binds the listener and serves the API over `system` until [`HttpChannel::stopped`].
    pub async fn start(system: &Clawbus, opts: &StartOptions) -> Result<Self, StartError> {
        let listener = Listener::bind(system.config(), opts).await?;
        Self::serve(system, listener)
    }

    /// Serves the API over `system` on a bound listener until [`HttpChannel::stopped`]: through
    /// the system's drain the port stays open (`/healthz` answers 503, new work is refused).
    /// Fails only when the webhook replay guard's tree cannot be opened in the system's store.
    pub fn serve(system: &Clawbus, listener: Listener) -> Result<Self, StartError> {
        let Listener {
            listener,
            addr,
            token,
            hooks,
        } = listener;
        let replay = webhooks::ReplayGuard::open(system.db()).map_err(StartError::WebhookStore)?;
        let hooks = Arc::new(hooks.with_replay_guard(replay));
        let app = api::router(api::ApiState {
            bus: system.bus().clone(),
            config: system.config().clone(),
            token: Arc::new(token.clone()),
            metrics: system.metrics().clone(),
            breakers: system.breakers().clone(),
            sessions: system.sessions().clone(),
            live: system.live().clone(),
            approvals: system.approvals().clone(),
            router: system.router().clone(),
            clock: system.clock().clone(),
            storage: system.storage(),
            shutdown: system.shutdown_listener(),
            cron: system.cron().scheduler().clone(),
            hooks,
            ws: ws::Connections::default(),
            started_ms: system.clock().now_ms(),
        });
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(serve::serve(
            listener,
            app,
            serve::max_connections(),
            stopping,
            STOP_WITHIN,
        ));
        tracing::info!(%addr, "HTTP channel listening.");
        Ok(Self {
            addr,
            token,
            stop,
            server,
        })
    }

    /// Closes the listener, waits up to one second (`STOP_WITHIN`) for the requests in flight to be
    /// answered, then drops the rest.
    pub async fn stopped(mut self) {
        self.stop.send_replace(true);
        let within = STOP_WITHIN + Duration::from_secs(1);
        if tokio::time::timeout(within, &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
        }
    }
}

/// How long open HTTP requests may take to finish once the system has drained.
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// The gateway token: the value of `[gateway] token_env` when set, else the token file's
/// (created on first start).
fn gateway_token(config: &Config) -> Result<String, StartError> {
    match config
        .gateway
        .token_env
        .as_deref()
        .and_then(|v| std::env::var(v).ok())
    {
        Some(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => token::load_or_create(&config.state_dir).map_err(|e| StartError::Token {
            path: config.state_dir.clone(),
            cause: e.to_string(),
        }),
    }
}

/// A running gateway: the system plus its channels (the HTTP one, the delivery actors and the
/// Telegram poller).
pub struct Daemon {
    system: Clawbus,
    channels: Channels,
    http: HttpChannel,
}

impl Daemon {
    /// Starts the system and the HTTP channel. Must run inside an actix `System`.
    pub async fn start(config: Config, opts: StartOptions) -> Result<Self, StartError> {
        Self::start_with(config, opts, SystemOptions::default()).await
    }

    /// Starts with explicit system options (clock, shards).
    pub async fn start_with(
        config: Config,
        opts: StartOptions,
        system_opts: SystemOptions,
    ) -> Result<Self, StartError> {
        // The port and the token first: a port in use refuses the start before any store or
        // agent starts, and the token exists before the agents start, so that their secret
        // redaction knows it on the first start too (it reads the token file).
        let listener = Listener::bind(&config, &opts).await?;
        let system = Clawbus::start(config, system_opts).await?;
        let channels = Channels::start(ChannelParts {
            config: system.config(),
            db: system.db(),
            outbox: system.outbox().clone(),
            bus: system.bus().clone(),
            clock: system.clock().clone(),
            approvals: system.approvals().clone(),
            router: system.router().clone(),
            metrics: system.metrics().clone(),
        })
        .await?;
        let http = HttpChannel::serve(&system, listener)?;
        Ok(Self {
            system,
            channels,
            http,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.http.addr
    }

    /// The gateway's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.http.addr)
    }

    /// The bearer token.
    pub fn token(&self) -> &str {
        &self.http.token
    }

    /// The system behind the gateway.
    pub fn system(&self) -> &Clawbus {
        &self.system
    }

    /// The channels' delivery actors and pollers.
    pub fn channels(&self) -> &Channels {
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
            http,
        } = self;
        channels.stop_input().await;
        // The port stays open through the drain: `/healthz` answers 503 until the end.
        let report = system.shutdown(grace).await;
        http.stopped().await;
        tracing::info!("Gateway stopped.");
        report
    }
}
