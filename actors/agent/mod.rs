//! The agent actor: one per agent definition; consumes `agent.<id>` tasks and runs turns.

mod actor;
mod provider;
pub mod turn;
pub mod workspace;

pub use actor::AgentActor;
pub use provider::build_model;
pub use turn::{TurnDeps, TurnError, TurnInput, TurnOutput, run_turn};

use crate::config::{AgentDef, Config};
use crate::ids::AgentId;
use crate::tools::ToolSet;
use actix::{Actor, Addr, AsyncContext};
use bus::{Bus, Topic};
use std::path::PathBuf;
use std::sync::Arc;

/// How many turns of one agent run at once until the lanes take over scheduling.
pub const DEFAULT_AGENT_CONCURRENCY: usize = 4;

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
        cause: String,
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

/// The public handle of a running agent actor.
#[derive(Clone)]
pub struct AgentHandle {
    id: AgentId,
    addr: Addr<AgentActor>,
    workspace: PathBuf,
}

impl AgentHandle {
    /// Prepares the agent's workspace, builds its model client and starts consuming its topic.
    /// Must be called inside a running actix `System`.
    pub async fn start(
        def: &AgentDef,
        config: &Config,
        bus: Arc<dyn Bus>,
    ) -> Result<Self, AgentError> {
        let agent = def.id.to_string();
        let workspace = workspace::prepare(&config.state_dir, &agent, def.seed_dir.as_deref())
            .map_err(|cause| AgentError::Workspace {
                agent: agent.clone(),
                path: config.state_dir.join("workspaces").join(&agent),
                cause,
            })?;
        let model = build_model(def, config).map_err(|cause| AgentError::Model {
            agent: agent.clone(),
            model: def.model.to_string(),
            cause,
        })?;
        let deps = TurnDeps {
            model,
            model_name: def.model.model.clone(),
            tools: ToolSet::builtin().filtered(|name| def.allows_tool(name)),
            limits: def.limits.clone(),
        };
        let tasks = bus
            .consume(Topic::agent(&agent))
            .await
            .map_err(|cause| AgentError::Bus {
                agent: agent.clone(),
                cause,
            })?;
        let actor = AgentActor::new(
            def.id.clone(),
            deps,
            workspace.clone(),
            bus,
            DEFAULT_AGENT_CONCURRENCY,
        );
        let addr = AgentActor::create(move |ctx| {
            ctx.add_stream(tasks.into_stream());
            actor
        });
        tracing::info!(agent = %def.id, model = %def.model, workspace = %workspace.display(), "Agent started.");
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

    /// Whether the actor is still alive.
    pub fn is_running(&self) -> bool {
        self.addr.connected()
    }
}
