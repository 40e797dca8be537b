//! The gateway: the HTTP channel (the API, the generic channel inbound) over the system that
//! [`crate::system`] builds.

pub mod api;
pub mod approvals;
pub mod channels;
pub mod cron;
mod events;
mod health;
pub mod metrics;
pub mod openai;
mod recovery;
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
use bus::LocalBus;
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
    server: tokio::task::JoinHandle<()>,
}

impl HttpChannel {
    /// Binds the listener and serves the API over `system` until the system shuts down.
    pub async fn start(system: &Clawbus, opts: &StartOptions) -> Result<Self, StartError> {
        let config = system.config().clone();
        let bind = config.gateway.bind;
        if !bind.is_loopback() && !opts.allow_public {
            return Err(StartError::PublicBind(bind));
        }
        let token = match config
            .gateway
            .token_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
        {
            Some(t) if !t.trim().is_empty() => t.trim().to_string(),
            _ => token::load_or_create(&config.state_dir).map_err(|e| StartError::Token {
                path: config.state_dir.clone(),
                cause: e.to_string(),
            })?,
        };
        let replay = webhooks::ReplayGuard::open(system.db()).map_err(StartError::WebhookStore)?;
        let hooks = Arc::new(webhooks::Hooks::from_env(&config)?.with_replay_guard(replay));
        let addr = SocketAddr::new(bind, opts.port.unwrap_or(config.gateway.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|cause| StartError::Listen { addr, cause })?;
        let addr = listener
            .local_addr()
            .map_err(|cause| StartError::Listen { addr, cause })?;
        let app = api::router(api::ApiState {
            bus: system.bus().clone(),
            config,
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
        let mut shutdown = system.shutdown_listener();
        let server = tokio::spawn(async move {
            // No Nagle delay: a WebSocket answer followed at once by events (or an SSE chunk)
            // must not wait for the peer's delayed ACK (≈40 ms per turn otherwise).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::warn!(error = %e, "Cannot set TCP_NODELAY on a connection.");
                }
            });
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                shutdown.recv().await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "HTTP server failed.");
            }
        });
        tracing::info!(%addr, "HTTP channel listening.");
        Ok(Self {
            addr,
            token,
            server,
        })
    }

    /// Waits up to `within` for the requests in flight to be answered, then drops the rest.
    pub async fn stopped(mut self, within: Duration) {
        if tokio::time::timeout(within, &mut self.server)
            .await
            .is_err()
        {
            tracing::warn!("HTTP requests still open after the drain; closing them.");
            self.server.abort();
        }
    }
}

/// A running gateway: the system plus its HTTP channel.
pub struct Daemon {
    system: Clawbus,
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
        let bind = config.gateway.bind;
        if !bind.is_loopback() && !opts.allow_public {
            return Err(StartError::PublicBind(bind));
        }
        let system = Clawbus::start(config, system_opts).await?;
        let http = HttpChannel::start(&system, &opts).await?;
        Ok(Self { system, http })
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

    /// The bus.
    pub fn bus(&self) -> &LocalBus {
        self.system.local_bus()
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

    /// Stops accepting, lets running turns finish for up to `grace`, stops the rest (they run
    /// again on the next start), answers what finished, flushes the stores.
    pub async fn shutdown_within(self, grace: Duration) -> DrainReport {
        let Self { system, http } = self;
        let report = system.shutdown(grace).await;
        http.stopped(Duration::from_secs(1)).await;
        tracing::info!("Gateway stopped.");
        report
    }
}
