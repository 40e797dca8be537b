//! The gateway: the HTTP channel (the API with its token auth, the admin API, the generic channel
//! inbound, WebSocket, the OpenAI endpoint, inbound webhooks) over the system that
//! [`clawbus_runtime::system`] builds. The [`Daemon`](crate::daemon::Daemon) prepares it ([`Listener`])
//! and starts it like every other channel.

mod admit;
mod answer;
pub mod api;
pub(crate) mod approvals;
pub(crate) mod channels;
pub(crate) mod control_ui;
pub(crate) mod cron;
pub mod dashboard;
pub(crate) mod deliveries;
mod events;
pub(crate) mod flows;
mod health;
pub mod logs;
pub mod mcp;
pub(crate) mod metrics;
pub(crate) mod nodes;
pub(crate) mod openai;
mod serve;
pub(crate) mod sessions;
pub(crate) mod status;
pub(crate) mod tail;
pub(crate) mod tasks;
pub mod token;
pub(crate) mod topics;
pub(crate) mod usage;
pub mod webhooks;
pub mod ws;

use crate::ChannelError;
use clawbus_core::config::Config;
use clawbus_runtime::system::Clawbus;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
    /// `port` overrides `[gateway] port` (`Some(0)` picks a free one); binding beyond loopback
    /// needs `allow_public`.
    pub async fn bind(
        config: &Config,
        port: Option<u16>,
        allow_public: bool,
    ) -> Result<Self, ChannelError> {
        let bind = config.gateway.bind;
        if !bind.is_loopback() && !allow_public {
            return Err(ChannelError::PublicBind(bind));
        }
        let token = gateway_token(config)?;
        let hooks = webhooks::Hooks::from_env(config)?;
        let addr = SocketAddr::new(bind, port.unwrap_or(config.gateway.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|cause| ChannelError::Listen { addr, cause })?;
        let addr = listener
            .local_addr()
            .map_err(|cause| ChannelError::Listen { addr, cause })?;
        Ok(Self {
            listener,
            addr,
            token,
            hooks,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bearer token the API will check.
    pub fn token(&self) -> &str {
        &self.token
    }
}

#[async_trait::async_trait(?Send)]
impl crate::Prepared for Listener {
    async fn start(
        self: Box<Self>,
        system: &Clawbus,
    ) -> Result<Box<dyn crate::Channel>, ChannelError> {
        Ok(Box::new(HttpChannel::serve(system, *self)?))
    }
}

impl HttpChannel {
    /// Serves the API over `system` on a bound listener until [`HttpChannel::stopped`]: through
    /// the system's drain the port stays open (`/healthz` answers 503, new work is refused).
    /// Does not fail today (the webhook replay guard opens its store on first use); the result
    /// stays for the channel lifecycle's sake.
    pub fn serve(system: &Clawbus, listener: Listener) -> Result<Self, ChannelError> {
        let Listener {
            listener,
            addr,
            token,
            hooks,
        } = listener;
        let replay = webhooks::ReplayGuard::new(system.kv().clone());
        let hooks = Arc::new(hooks.with_replay_guard(replay));
        let app = api::router(api::ApiState::new(api::ApiShared {
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
            flows: system.flows().clone(),
            hooks,
            ws: ws::Connections::default(),
            started_ms: system.clock().now_ms(),
            kv: system.kv().clone(),
            transcripts: system.transcripts().cloned(),
            leases: system.session_leases().cloned(),
            agents: system.agents().into(),
            deliveries: system.outbox().records().clone(),
            node: clawbus_runtime::system::nodes::NodeSource::of(
                system,
                Some(format!("http://{addr}")),
            ),
        }));
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

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bearer token the API checks.
    pub fn token(&self) -> &str {
        &self.token
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

/// The HTTP channel takes input until the end: through the drain its port stays open (`/healthz`
/// answers 503, new work is refused); it closes after.
#[async_trait::async_trait]
impl crate::Channel for HttpChannel {
    fn name(&self) -> &str {
        "http"
    }

    async fn stop(self: Box<Self>) {
        self.stopped().await;
    }
}

/// How long open HTTP requests may take to finish once the system has drained.
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// The gateway token: the value of `[gateway] token_env` when set, else the token file's
/// (created on first start).
fn gateway_token(config: &Config) -> Result<String, ChannelError> {
    match config
        .gateway
        .token_env
        .as_deref()
        .and_then(|v| std::env::var(v).ok())
    {
        Some(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => token::load_or_create(&config.state_dir).map_err(|e| ChannelError::Token {
            path: config.state_dir.clone(),
            source: e,
        }),
    }
}
