//! The gateway: the composition root. Opens the state, the bus and the agents, serves the HTTP API.

pub mod api;
pub mod approvals;
pub mod metrics;
pub mod sessions;
pub mod token;

use crate::agent::{AgentContext, AgentError, AgentHandle, SessionLimits};
use crate::config::Config;
use crate::lane::Lanes;
use crate::metrics::Metrics;
use crate::router::Router;
use crate::session::LiveSessions;
use crate::session::index::SessionIndex;
use bus::{Bus, LocalBus, LocalOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::oneshot;

/// How this process runs (flags), as opposed to what runs (files).
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Port override (`--port`); `Some(0)` picks a free port.
    pub port: Option<u16>,
    /// Allow binding beyond loopback (`--allow-public`).
    pub allow_public: bool,
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
    /// The state directory could not be used.
    #[error("state dir {path}: {cause}")]
    State {
        /// The folder.
        path: std::path::PathBuf,
        /// What failed.
        cause: String,
    },
    /// The bus could not open.
    #[error("bus: {0}")]
    Bus(#[from] bus::BusError),
    /// An agent could not start.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// A running gateway with its bus and agents.
pub struct Daemon {
    addr: SocketAddr,
    token: String,
    bus: LocalBus,
    agents: Vec<AgentHandle>,
    lanes: Lanes,
    metrics: Metrics,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
}

impl Daemon {
    /// Starts everything. Must run inside an actix `System`; the HTTP server runs on tokio.
    pub async fn start(config: Config, opts: StartOptions) -> Result<Self, StartError> {
        let bind = config.gateway.bind;
        if !bind.is_loopback() && !opts.allow_public {
            return Err(StartError::PublicBind(bind));
        }
        let state_err = |cause: String| StartError::State {
            path: config.state_dir.clone(),
            cause,
        };
        std::fs::create_dir_all(&config.state_dir).map_err(|e| state_err(e.to_string()))?;
        let token = match config
            .gateway
            .token_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
        {
            Some(t) if !t.trim().is_empty() => t.trim().to_string(),
            _ => token::load_or_create(&config.state_dir)
                .map_err(|e| state_err(format!("token: {e}")))?,
        };
        let db = sled::open(config.state_dir.join("db")).map_err(|e| {
            // sled reports the file lock of another process as an I/O error with this text.
            let locked = e.to_string().contains("could not acquire lock");
            if locked {
                state_err("in use by another clawbus process (its database is locked); stop it or pass another --state-dir".into())
            } else {
                state_err(format!("db: {e}"))
            }
        })?;
        let bus = LocalBus::with_db(
            db.clone(),
            LocalOptions {
                dedup_window: config.bus.dedup_window,
                ..LocalOptions::default()
            },
        )?;
        let shared: Arc<dyn Bus> = Arc::new(bus.clone());
        let metrics = Metrics::new();
        let lanes = Lanes::start(&config.lanes, metrics.clone());
        let index = SessionIndex::open(&db).map_err(|e| state_err(e.to_string()))?;
        let live: LiveSessions = Default::default();
        let approvals =
            crate::approvals::Approvals::open(&db, shared.clone(), Arc::new(bus::SystemClock))
                .map_err(|e| state_err(format!("approvals: {e}")))?;
        let agent_ctx = AgentContext {
            bus: shared.clone(),
            index: index.clone(),
            live: live.clone(),
            router: Arc::new(Router::new(&config)),
            limits: SessionLimits {
                max_live: config.sessions.max_live,
                idle_timeout: config.sessions.idle_timeout,
            },
            lanes: lanes.clone(),
            metrics: metrics.clone(),
            approvals: Some(approvals.clone()),
        };
        let mut agents = Vec::new();
        for def in &config.agents {
            agents.push(AgentHandle::start(def, &config, &agent_ctx).await?);
        }
        let addr = SocketAddr::new(bind, opts.port.unwrap_or(config.gateway.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|cause| StartError::Listen { addr, cause })?;
        let addr = listener
            .local_addr()
            .map_err(|cause| StartError::Listen { addr, cause })?;
        let app = api::router(api::ApiState {
            bus: shared,
            config: Arc::new(config),
            token: Arc::new(token.clone()),
            metrics: metrics.clone(),
            sessions: index,
            live,
            approvals,
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "HTTP server failed.");
            }
        });
        tracing::info!(%addr, agents = agents.len(), "Gateway listening.");
        Ok(Self {
            addr,
            token,
            bus,
            agents,
            lanes,
            metrics,
            stop: Some(stop),
            server,
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

    /// The bus.
    pub fn bus(&self) -> &LocalBus {
        &self.bus
    }

    /// The running agents.
    pub fn agents(&self) -> &[AgentHandle] {
        &self.agents
    }

    /// The global lanes every run takes a slot in.
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// The metrics registry served at `GET /metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Stops accepting requests and waits for the HTTP server to finish the ones in flight.
    /// Unfinished tasks stay in the journal and run on the next start.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.server).await {
            tracing::error!(error = %e, "HTTP server task ended abnormally.");
        }
        tracing::info!("Gateway stopped.");
    }
}
