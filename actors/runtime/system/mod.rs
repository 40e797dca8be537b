//! The composition root: builds the state folder, the stores, the bus, the lanes and the agents
//! from the configuration, and hands back one [`Clawbus`] that channels attach to.
//!
//! A channel (HTTP today) only turns its input into envelopes and delivers what comes back; it
//! does not build or own any of the parts here. `clawbus up` is this system plus its channels.

mod limits;
pub mod nodes;
mod shutdown;
mod storage;

pub use crate::session::drain::{Drain, DrainReport};
pub use limits::raise_nofile;
pub use shutdown::{Shutdown, ShutdownSignal};
pub use storage::{StorageProbe, folder_takes_writes};

use crate::agent::{AgentContext, AgentError, AgentHandle, SessionLimits};
use crate::approvals::Approvals;
use crate::coordinator::{CoordinatorError, CoordinatorHandle, CoordinatorOptions};
use crate::cron::{Declared, Scheduler, SchedulerHandle, Settings};
use crate::lane::Lanes;
use crate::metrics::Metrics;
use crate::router::Router;
use crate::session::index::SessionIndex;
use crate::session::{LiveSessions, SessionShards};
use bus::{Bus, BusOptions, Clock, SystemClock, TaskStore};
use clawbus_core::config::Config;
use std::path::PathBuf;
use std::sync::Arc;

/// How the system is built, beyond the configuration.
#[derive(Clone)]
pub struct SystemOptions {
    /// The one clock of the process.
    pub clock: Arc<dyn Clock>,
    /// Arbiters session actors are spread over; `None`: one per core.
    pub shards: Option<usize>,
}

impl Default for SystemOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            shards: None,
        }
    }
}

/// Why the system could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SystemError {
    /// The state directory or a store in it could not be used.
    #[error("state dir {}: {source}", path.display())]
    State {
        /// The folder.
        path: PathBuf,
        /// What failed.
        source: StateError,
    },
    /// The bus could not open.
    #[error("bus: {0}")]
    Bus(#[from] bus::BusError),
    /// An agent could not start.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The task coordinator could not start.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
}

/// What failed in the state folder (the store named, its own error as the source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The folder could not be created.
    #[error("{0}")]
    CreateDir(#[source] std::io::Error),
    /// Another process holds the database's lock.
    #[error(
        "in use by another clawbus process (its database is locked); stop it or pass another --state-dir"
    )]
    Locked,
    /// The database could not open.
    #[error("db: {0}")]
    Db(#[source] sled::Error),
    /// The session index could not open.
    #[error("{0}")]
    Sessions(#[source] crate::session::index::IndexError),
    /// The approvals store could not open.
    #[error("approvals: {0}")]
    Approvals(#[source] crate::approvals::ApprovalError),
    /// The outbox could not open.
    #[error("{0}")]
    Outbox(#[source] crate::outbox::OutboxError),
    /// The cron store could not open.
    #[error("cron: {0}")]
    Cron(#[source] crate::cron::StoreError),
    /// The flow store could not open, or a flow run left running could not be resumed.
    #[error("flows: {0}")]
    Flows(#[source] crate::flow::FlowError),
}

/// The refusal journal in the state folder (see [`bus::store::RefusalJournal`]).
pub(crate) const REFUSALS_FILE: &str = "refused-admissions";
/// The task journal in the state folder: the embedded bus's task records.
pub(crate) const TASKS_JOURNAL_FILE: &str = "tasks.journal";

/// How long a start waits for the database lock that a process (or a system in this process)
/// which just stopped still holds while its last handles close.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens the sled database; the lock of a stopping holder is waited for briefly, a held one is
/// reported as another clawbus using the state folder.
#[allow(
    clippy::disallowed_methods,
    reason = "sled's file lock is held by another process in real time: its wait is real time"
)]
async fn open_db(path: &std::path::Path, cache: usize) -> Result<sled::Db, StateError> {
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        // sled's default cache is 1 GiB: the store's pages would stay in memory as it grows.
        let opened = sled::Config::new()
            .path(path)
            .cache_capacity(u64::try_from(cache).unwrap_or(u64::MAX))
            .open();
        match opened {
            Ok(db) => return Ok(db),
            // sled reports the file lock of another holder as an I/O error with this text.
            Err(e) if e.to_string().contains("could not acquire lock") => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(StateError::Locked);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => return Err(StateError::Db(e)),
        }
    }
}

/// The session leases of a shared bus (NATS), and the shared transcripts they guard (the log
/// store `tx`): the store `session_leases` every node shares, held
/// as `<node>/<life>` (a restarted node never takes its previous life's leases for its own), each
/// living `ttl` (`[bus] session_lease_ttl`, by default the bus's `ack_wait`: a node that dies
/// loses its tasks and its sessions after about the same time). `None` on the embedded bus,
/// whose sessions need none.
async fn session_leases(
    kv: &bus::KvOpener,
    clock: &Arc<dyn Clock>,
    node_id: &str,
    ttl: std::time::Duration,
) -> Result<Option<crate::session::SessionLeases>, SystemError> {
    if !kv.is_shared() {
        return Ok(None);
    }
    let store = kv.open(crate::session::lease::LEASE_STORE).await?;
    let Some(transcripts) = kv
        .shared_log(crate::session::lease::TRANSCRIPT_LOGS)
        .await?
    else {
        return Ok(None);
    };
    let life = uuid::Uuid::new_v4().simple().to_string();
    let holder = format!("{node_id}/{}", &life[..12]);
    let leases = bus::kv::Leases::new(store, clock.clone(), holder, ttl);
    Ok(Some(crate::session::SessionLeases::new(
        leases,
        crate::session::lease::DEFAULT_LEASE_WAIT,
        transcripts,
    )))
}

/// The running system: stores, bus, lanes, agents.
pub struct Clawbus {
    config: Arc<Config>,
    /// This node's id among the nodes of a shared bus.
    node_id: String,
    db: sled::Db,
    bus: Arc<dyn Bus>,
    ledger: Arc<dyn TaskStore>,
    /// Opens key-value stores on the bus's backend.
    kv: bus::KvOpener,
    lanes: Lanes,
    metrics: Metrics,
    /// The model providers' circuit breakers, on the process's clock.
    breakers: Arc<crate::model::Breakers>,
    index: SessionIndex,
    live: LiveSessions,
    approvals: Approvals,
    router: Arc<Router>,
    agents: Vec<AgentHandle>,
    drain: Drain,
    shards: SessionShards,
    clock: Arc<dyn Clock>,
    shutdown: ShutdownSignal,
    cron: SchedulerHandle,
    outbox: crate::outbox::Outbox,
    coordinator: CoordinatorHandle,
    flows: crate::flow::Flows,
    /// The MCP servers, stopped after the agents.
    mcp: crate::mcp::McpServers,
    /// The agents' browsers, stopped after the agents.
    browsers: crate::tools::Browsers,
    /// On a shared bus: the session leases and the cluster's session transcripts they guard
    /// (`None` on the embedded bus).
    leases: Option<crate::session::SessionLeases>,
}

impl Clawbus {
    /// Builds and starts everything the configuration describes. Must run inside an actix
    /// `System`.
    pub async fn start(config: Config, opts: SystemOptions) -> Result<Self, SystemError> {
        let state_err = |source: StateError| SystemError::State {
            path: config.state_dir.clone(),
            source,
        };
        std::fs::create_dir_all(&config.state_dir)
            .map_err(|e| state_err(StateError::CreateDir(e)))?;
        let db = open_db(&config.state_dir.join("db"), config.store.cache)
            .await
            .map_err(state_err)?;
        let clock = opts.clock.clone();
        let mut backend = config.bus.backend.to_bus();
        if let bus::Backend::Nats(nats) = &mut backend {
            nats.ack_wait = config.bus.ack_wait;
        }
        let bus::OpenBus { bus, ledger, kv } = bus::connect(
            BusOptions {
                backend,
                dedup_window: config.bus.dedup_window,
                clock: clock.clone(),
                // Admissions answered 503 whose record reached the disk are removed first.
                store: bus::StoreExtras {
                    refusals: Some(config.state_dir.join(REFUSALS_FILE)),
                    fault: None,
                    journal: Some(config.state_dir.join(TASKS_JOURNAL_FILE)),
                },
                replay_bytes: config.store.replay_log,
                ..BusOptions::default()
            },
            db.clone(),
        )
        .await?;
        let metrics = Metrics::new();
        // Model circuit breakers are shared by every agent of the process; /metrics shows them.
        let breakers = Arc::new(crate::model::Breakers::new(
            crate::model::BreakerPolicy::default(),
            clock.clone(),
        ));
        breakers.attach_metrics(&metrics);
        let lanes = Lanes::start(&config.lanes, metrics.clone(), clock.clone());
        // Before the agents: it follows every task from the first one, and picks up the
        // unfinished ones a previous run left.
        let coordinator =
            CoordinatorHandle::start(bus.clone(), clock.clone(), CoordinatorOptions::default())
                .await?;
        let mut index = SessionIndex::open(&db).map_err(|e| state_err(StateError::Sessions(e)))?;
        // On a shared bus every node lists and counts in the cluster's rows.
        if kv.is_shared() {
            index = index.with_shared(kv.open(crate::session::index::SHARED_STORE).await?);
        }
        let live: LiveSessions = Default::default();
        // On a shared bus a request asked on any node is listed and answered on every node.
        let approvals = if kv.is_shared() {
            let store = kv.open(crate::approvals::SHARED_STORE).await?;
            Approvals::open_shared(&db, store, bus.clone(), clock.clone()).await
        } else {
            Approvals::open(&db, bus.clone(), clock.clone())
        }
        .map_err(|e| state_err(StateError::Approvals(e)))?;
        let router = Arc::new(Router::new(&config));
        let drain = Drain::default();
        let shards = match opts.shards {
            Some(n) => SessionShards::start(n),
            None => SessionShards::per_core(),
        };
        let node_id = match &config.bus.node_id {
            Some(id) => id.clone(),
            None => nodes::local_node_id(&db).map_err(|e| state_err(StateError::Db(e)))?,
        };
        let mut outbox =
            crate::outbox::Outbox::open(&db, clawbus_core::config::ReplyRoutes::new(&config))
                .map_err(|e| state_err(StateError::Outbox(e)))?;
        if kv.is_shared() {
            // The cluster's entries, claims and records: a reply staged here is sent by this
            // node, or adopted by another if this one dies first.
            let life = uuid::Uuid::new_v4().simple().to_string();
            let shared = crate::outbox::SharedOutbox::new(
                kv.open(crate::outbox::shared::OUTBOX_STORE).await?,
                kv.open(nodes::NODES_STORE).await?,
                nodes::heartbeat_key,
                clock.clone(),
                node_id.clone(),
                format!("{node_id}/{}", &life[..12]),
                crate::outbox::shared::CLAIM_TTL,
            );
            let records = kv.open(crate::outbox::record::RECORDS_STORE).await?;
            outbox = outbox.with_shared(shared, records);
        }
        let scheduler = Arc::new(
            start_scheduler(&config, &db, &kv, &bus, &clock, &outbox)
                .await
                .map_err(state_err)?,
        );
        let flows = start_flows(&config, &db, &bus, &clock).map_err(state_err)?;
        // Before the agents: their registries take the tools the servers list.
        let mcp = crate::mcp::McpServers::start_with(&config.mcp, clock.clone()).await;
        let browsers = crate::tools::Browsers::new(config.browser.clone(), &config.state_dir);
        if !config.browser.test_allow_origins.is_empty() {
            tracing::warn!(origins = ?config.browser.test_allow_origins, "[browser] test_allow_origins is set: the browser may reach these loopback or private origins. It is meant for tests only.");
        }
        let leases = session_leases(&kv, &clock, &node_id, config.bus.session_lease_ttl).await?;
        let agent_ctx = AgentContext {
            bus: bus.clone(),
            index: index.clone(),
            live: live.clone(),
            router: router.clone(),
            limits: SessionLimits {
                max_live: config.sessions.max_live,
                idle_timeout: config.sessions.idle_timeout,
                history_cache: config.sessions.history_cache,
            },
            lanes: lanes.clone(),
            metrics: metrics.clone(),
            approvals: Some(approvals.clone()),
            clock: clock.clone(),
            drain: drain.clone(),
            shards: shards.clone(),
            cron: Some(scheduler.clone()),
            flows: Some(flows.clone()),
            breakers: breakers.clone(),
            outbox: outbox.clone(),
            mcp: mcp.clone(),
            browsers: browsers.clone(),
            leases: leases.clone(),
        };
        let mut agents = Vec::new();
        // `--agents-here`: the others are consumed on the nodes that host them.
        let here = |id: &clawbus_core::ids::AgentId| {
            config
                .bus
                .agents_here
                .as_ref()
                .is_none_or(|h| h.contains(id))
        };
        for def in config.agents.iter().filter(|d| here(&d.id)) {
            agents.push(AgentHandle::start(def, &config, &agent_ctx).await?);
        }
        let cron = SchedulerHandle::spawn(scheduler);
        // After the agents: a resumed run's tasks need their consumers.
        let resumed = flows
            .resume()
            .map_err(|e| state_err(StateError::Flows(e)))?;
        if resumed > 0 {
            tracing::info!(resumed, "Flow runs left running were resumed.");
        }
        flows.serve_starts().await.map_err(|e| {
            state_err(StateError::Flows(crate::flow::FlowError::Store(
                crate::flow::FlowStoreError::Storage(e.to_string()),
            )))
        })?;
        let hosted: Vec<&str> = agents.iter().map(|a| a.id().as_str()).collect();
        tracing::info!(node = %node_id, agents = ?hosted, backend = ?config.bus.backend, "System started.");
        Ok(Self {
            config: Arc::new(config),
            node_id,
            db,
            bus,
            ledger,
            kv,
            lanes,
            metrics,
            breakers,
            index,
            live,
            approvals,
            router,
            agents,
            drain,
            shards,
            clock,
            shutdown: ShutdownSignal::new(),
            cron,
            outbox,
            coordinator,
            flows,
            mcp,
            browsers,
            leases,
        })
    }

    /// This node's id: `--node-id`, else one made once and kept in the state folder.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The flow engine (`flows.d/`, runs, cancels).
    pub fn flows(&self) -> &crate::flow::Flows {
        &self.flows
    }

    /// Replies and announcements waiting to be delivered, and their delivery records.
    pub fn outbox(&self) -> &crate::outbox::Outbox {
        &self.outbox
    }

    /// The cron scheduler (jobs, heartbeats).
    pub fn cron(&self) -> &SchedulerHandle {
        &self.cron
    }

    /// The task coordinator.
    pub fn coordinator(&self) -> &CoordinatorHandle {
        &self.coordinator
    }

    /// The sled database every store of the system lives in (channels keep small state of their
    /// own in it).
    pub fn db(&self) -> &sled::Db {
        &self.db
    }

    /// A probe of the database's writes (see [`StorageProbe`]).
    pub fn storage(&self) -> StorageProbe {
        StorageProbe::new(&self.db)
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The bus every part talks over.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// Opens key-value stores on the bus's backend: shared by every node on NATS.
    pub fn kv(&self) -> &bus::KvOpener {
        &self.kv
    }

    /// The bus's task store (for tests and tools). Outcomes recorded through it emit task events.
    pub fn ledger(&self) -> &Arc<dyn TaskStore> {
        &self.ledger
    }

    /// The global lanes.
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The agents' browsers (see [`crate::tools::browser`]).
    pub fn browsers(&self) -> &crate::tools::Browsers {
        &self.browsers
    }

    /// The MCP servers started with the system (see [`crate::mcp`]).
    pub fn mcp(&self) -> &crate::mcp::McpServers {
        &self.mcp
    }

    /// The model providers' circuit breakers.
    pub fn breakers(&self) -> &Arc<crate::model::Breakers> {
        &self.breakers
    }

    /// The session index.
    pub fn sessions(&self) -> &SessionIndex {
        &self.index
    }

    /// On a shared bus (NATS): the cluster's session transcripts, which hold every node's
    /// lines; `None` on the embedded bus, whose transcripts are this node's files.
    pub fn transcripts(&self) -> Option<&Arc<dyn bus::log::LogStore>> {
        self.leases.as_ref().map(|l| l.transcripts())
    }

    /// On a shared bus (NATS): the session leases this node takes (a run holds its session's
    /// while it runs); `None` on the embedded bus.
    pub fn session_leases(&self) -> Option<&crate::session::SessionLeases> {
        self.leases.as_ref()
    }

    /// Live sessions and their state.
    pub fn live(&self) -> &LiveSessions {
        &self.live
    }

    /// Approval requests.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The routing table channels consult at ingress.
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// The running agents.
    pub fn agents(&self) -> &[AgentHandle] {
        &self.agents
    }

    /// The one clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Runs in flight.
    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// A listener channels use to learn that the system is shutting down.
    pub fn shutdown_listener(&self) -> Shutdown {
        self.shutdown.listener()
    }

    /// Stops the system: channels are told to stop accepting (the HTTP ones by the shutdown
    /// listener; the others are stopped by their owner first), running turns get `grace` to
    /// finish, the rest are stopped and left in the store for the next start, and the stores
    /// are flushed.
    pub async fn shutdown(self, grace: std::time::Duration) -> DrainReport {
        self.shutdown.fire();
        // No new fires while the runs drain; runs in flight keep their leases, which lapse.
        self.cron.stop().await;
        // Flow runs stop where they stand; the next start resumes them from the store.
        self.flows.stop();
        let report = self.drain.drain(grace).await;
        tracing::info!(
            finished = report.finished,
            stopped = report.stopped,
            "Runs drained; stopped ones run again on the next start."
        );
        // The agents take no more tasks; the session actors (and the stores they hold) go with
        // their threads.
        for agent in &self.agents {
            agent.stop();
        }
        self.coordinator.stop();
        self.browsers.stop_all().await;
        self.shards.stop().await;
        self.mcp.stop().await;
        if let Err(e) = self.db.flush_async().await {
            tracing::error!(error = %e, "Final flush of the store failed.");
        }
        report
    }
}

/// Builds the flow engine over the system's store (the runs a previous start left are resumed
/// once the agents run).
fn start_flows(
    config: &Config,
    db: &sled::Db,
    bus: &Arc<dyn Bus>,
    clock: &Arc<dyn Clock>,
) -> Result<crate::flow::Flows, StateError> {
    let store = crate::flow::SledFlows::open(db)
        .map_err(|e| StateError::Flows(crate::flow::FlowError::Store(e)))?;
    let flows = crate::flow::Flows::new(
        bus.clone(),
        clock.clone(),
        Arc::new(store),
        config.flows.clone(),
    );
    Ok(flows)
}

/// Builds the cron scheduler over the system's store, with the gateway's timezone, and syncs
/// the jobs and heartbeats the agent files declare (its loop is started after the agents).
async fn start_scheduler(
    config: &Config,
    db: &sled::Db,
    kv: &bus::KvOpener,
    bus: &Arc<dyn Bus>,
    clock: &Arc<dyn Clock>,
    outbox: &crate::outbox::Outbox,
) -> Result<Scheduler, StateError> {
    let node = crate::cron::store::node_id(db).map_err(StateError::Cron)?;
    // The embedded bus keeps the jobs in this node's sled trees; a shared bus keeps them in its
    // key-value store, where every node's scheduler sees the same jobs and leases.
    let store = if kv.is_shared() {
        let kv = kv
            .open("cron")
            .await
            .map_err(|e| StateError::Cron(crate::cron::StoreError::Storage(e.to_string())))?;
        crate::cron::CronStore::on_kv(kv)
    } else {
        crate::cron::CronStore::open(db).map_err(StateError::Cron)?
    };
    let settings = Settings::new(
        config.gateway.timezone,
        config.agents.iter().map(|a| a.id.to_string()),
    )
    .with_workspaces(config.state_dir.join("workspaces"))
    .with_outbox(outbox.clone())
    .with_node(node)
    .with_tool_limits(config.cron.min_interval, config.cron.max_agent_jobs);
    let owner = format!(
        "clawbus-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    );
    let scheduler = Scheduler::with_store(store, bus.clone(), clock.clone(), owner, settings);
    let declared = Declared {
        jobs: config.agents.iter().flat_map(|a| a.cron.clone()).collect(),
        heartbeats: config.agents.iter().map(|a| a.heartbeat.clone()).collect(),
    };
    let report = scheduler.sync_declared(&declared).await;
    for e in &report.errors {
        tracing::warn!(error = %e, "A declared cron job was not synced.");
    }
    tracing::info!(
        added = report.added.len(),
        updated = report.updated.len(),
        disabled = report.disabled.len(),
        timezone = %config.gateway.timezone,
        "Cron scheduler started; declared jobs synced."
    );
    Ok(scheduler)
}
