//! The agent actor: one per agent definition; consumes `agent.<id>` tasks and hands each to its
//! session ([`crate::session`]), which runs the turn ([`crate::turn`]).
//!
//! - [`tools`]: which tools an agent is offered (the policy layers) and the session tools.

mod actor;
mod in_flight;
#[cfg(test)]
mod tests;
pub mod tools;

pub use crate::tools::run_context::{RunContext, RunSlot};
pub use crate::turn::{
    INTERRUPTED_RESULT, ModelBuildError, Resume, TurnDeps, TurnError, TurnEvents, TurnHooks,
    TurnInput, TurnJournal, TurnOutput, build_model, build_model_with, run_turn, run_turn_observed,
};
pub use actor::{AgentActor, SessionLimits};

use crate::lane::Lanes;
use crate::router::Router;
use crate::session::LiveSessions;
use crate::session::index::SessionIndex;
use crate::session::runtime::AgentRuntime;
use actix::{Actor, Addr, AsyncContext};
use bus::{Bus, Topic};
use clawbus_core::config::{AgentDef, Config};
use clawbus_core::ids::{AgentId, SessionKey};
use futures::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an agent could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The workspace folder could not be prepared.
    #[error("agent \"{agent}\": workspace {path}: {cause}")]
    Workspace {
        /// The agent.
        agent: String,
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The model client could not be built.
    #[error("agent \"{agent}\": model {model}: {cause}")]
    Model {
        /// The agent.
        agent: String,
        /// `provider/model`.
        model: String,
        /// What is wrong.
        #[source]
        cause: Box<ModelBuildError>,
    },
    /// The bus refused the subscription.
    #[error("agent \"{agent}\": {cause}")]
    Bus {
        /// The agent.
        agent: String,
        /// The bus error.
        cause: bus::BusError,
    },
}

/// What every agent of the process shares.
#[derive(Clone)]
pub struct AgentContext {
    /// The bus.
    pub bus: Arc<dyn Bus>,
    /// The session index.
    pub index: SessionIndex,
    /// Live sessions of every agent.
    pub live: LiveSessions,
    /// The routing table.
    pub router: Arc<Router>,
    /// Live-session cap and idle timeout, per agent.
    pub limits: SessionLimits,
    /// The global lanes.
    pub lanes: Lanes,
    /// The metrics registry.
    pub metrics: crate::metrics::Metrics,
    /// Approval requests (`exec` in `ask` mode); `None`: what needs asking is refused.
    pub approvals: Option<crate::approvals::Approvals>,
    /// The one clock of the process.
    pub clock: Arc<dyn bus::Clock>,
    /// Runs in flight, and whether the daemon is shutting down.
    pub drain: crate::session::drain::Drain,
    /// The arbiters session actors are spread over.
    pub shards: crate::session::SessionShards,
    /// The cron scheduler the `cron` tool manages; `None`: the tool refuses.
    pub cron: Option<Arc<crate::cron::Scheduler>>,
    /// The flow engine the `flow_run` tool starts runs on; `None`: the tool refuses.
    pub flows: Option<crate::flow::Flows>,
    /// The model providers' circuit breakers, shared by every agent of the process.
    pub breakers: Arc<crate::model::Breakers>,
    /// Where replies wait until they are delivered.
    pub outbox: crate::outbox::Outbox,
    /// The MCP servers whose tools agents may be offered.
    pub mcp: crate::mcp::McpServers,
    /// The agents' browsers (`browser` tool), stopped with the daemon.
    pub browsers: crate::tools::Browsers,
    /// On a shared bus, the session leases every run takes first (one node runs a session at a
    /// time); `None` on the embedded bus.
    pub leases: Option<crate::session::SessionLeases>,
}

/// The public handle of a running agent actor.
#[derive(Clone)]
pub struct AgentHandle {
    id: AgentId,
    addr: Addr<AgentActor>,
    workspace: PathBuf,
}

impl AgentHandle {
    /// Prepares the agent's workspace, builds its model client and starts consuming its topic.
    /// Each run takes a slot in the `main` lane of `shared.lanes` after it leaves its session
    /// lane. Must be called inside a running actix `System`.
    pub async fn start(
        def: &AgentDef,
        config: &Config,
        shared: &AgentContext,
    ) -> Result<Self, AgentError> {
        let bus = shared.bus.clone();
        let agent = def.id.to_string();
        let workspace =
            crate::workspace::prepare(&config.state_dir, &agent, def.seed_dir.as_deref()).map_err(
                |cause| AgentError::Workspace {
                    agent: agent.clone(),
                    path: config.state_dir.join("workspaces").join(&agent),
                    cause,
                },
            )?;
        let model =
            build_model_with(def, config, &shared.breakers).map_err(|cause| AgentError::Model {
                agent: agent.clone(),
                model: def.model.to_string(),
                cause: Box::new(cause),
            })?;
        // Skills: one catalog per agent, a snapshot per session refreshed when a SKILL.md changes.
        let skills = Arc::new(crate::skills::AgentSkills::new(
            crate::skills::SkillCatalog::for_agent(config, def, &workspace),
        ));
        // What MCP servers are passed (`env`) are credentials too: never shown to a model.
        let mcp_env = config.mcp.servers.values().flat_map(|s| s.secret_names());
        let secrets = crate::secrets::Secrets::from_config(config)
            .with_names(skills.required_env_names())
            .with_names(mcp_env);
        let deps = TurnDeps {
            model,
            model_name: def.model.model.clone(),
            model_label: def.model.to_string(),
            tools: tools::live_agent_tools(
                def,
                config,
                &tools::ToolServices {
                    bus: Some(bus.clone()),
                    approvals: shared.approvals.clone(),
                    cron: shared.cron.clone(),
                    flows: shared.flows.clone(),
                    sessions: Some(crate::session::view::SessionReader {
                        index: shared.index.clone(),
                        live: shared.live.clone(),
                        state_dir: config.state_dir.clone(),
                        shared: shared.leases.as_ref().map(|l| l.transcripts().clone()),
                    }),
                    mcp: Some(shared.mcp.clone()),
                    browsers: Some(shared.browsers.clone()),
                },
                Arc::new(secrets.clone()),
            ),
            limits: def.limits.clone(),
            clock: shared.clock.clone(),
        };
        let bus_err = |cause| AgentError::Bus {
            agent: agent.clone(),
            cause,
        };
        let mut streams = vec![
            bus.consume(Topic::agent(&agent))
                .await
                .map_err(bus_err)?
                .into_stream(),
        ];
        // Shared topics: competing consumers, so each task goes to one subscriber.
        for topic in &def.subscribe {
            streams.push(
                bus.consume(topic.clone())
                    .await
                    .map_err(bus_err)?
                    .into_stream(),
            );
        }
        let tasks = futures::stream::select_all(streams);
        let cancels = bus
            .subscribe(Topic::cancellations())
            .await
            .map_err(bus_err)?;
        let rt = Arc::new(AgentRuntime {
            id: def.id.clone(),
            def: def.clone(),
            deps,
            workspace: workspace.clone(),
            bus,
            state_dir: config.state_dir.clone(),
            index: shared.index.clone(),
            lanes: shared.lanes.clone(),
            metrics: shared.metrics.clone(),
            prompt: Arc::new({
                let skills = skills.clone();
                crate::prompt::PromptBuilder::for_agent(def, config, workspace.clone())
                    .with_skills(Arc::new(move |session: &str| skills.xml_for(session)))
                    .with_secrets(secrets)
            }),
            clock: shared.clock.clone(),
            drain: shared.drain.clone(),
            prices: std::iter::once(&def.model)
                .chain(&def.fallbacks)
                .filter_map(|m| {
                    let label = m.to_string();
                    config.prices.get(&label).map(|p| (label, *p))
                })
                .collect(),
            outbox: shared.outbox.clone(),
            leases: shared.leases.clone(),
        });
        let actor = AgentActor::new(
            rt,
            shared.router.clone(),
            shared.limits,
            shared.live.clone(),
            shared.shards.clone(),
        );
        let addr = AgentActor::create(move |ctx| {
            ctx.add_stream(tasks.map(actor::Task));
            ctx.add_stream(cancels.into_stream().map(actor::Cancelled));
            actor
        });
        tracing::info!(agent = %def.id, model = %def.model, workspace = %workspace.display(), shared_topics = ?def.subscribe, "Agent started.");
        Ok(Self {
            id: def.id.clone(),
            addr,
            workspace,
        })
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent's workspace folder.
    pub fn workspace(&self) -> &PathBuf {
        &self.workspace
    }

    /// Compacts session `key` of this agent between runs, opening it from disk when it is not
    /// live (see [`crate::session::Compact`]): refused while a run of it is running or queued.
    pub async fn compact(
        &self,
        key: SessionKey,
        how: crate::session::CompactHow,
    ) -> Result<crate::session::Compacted, crate::session::CompactError> {
        let agent = self.id.to_string();
        self.addr
            .send(actor::CompactSession { key, how })
            .await
            .unwrap_or(Err(crate::session::CompactError::AgentNotHere { agent }))
    }

    /// Stops the agent actor (it takes no more tasks; its sessions stop once idle).
    pub fn stop(&self) {
        self.addr.do_send(actor::StopAgent);
    }
}
