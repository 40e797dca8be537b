//! What the tools that post work to agents (`agent_call`, `sessions_spawn`) share: the bus, the
//! calling agent, and the agents it may reach (`may_call` in its file).

use super::{ToolError, ToolOutput};
use bus::Bus;
use clawbus_core::ids::AgentId;
use std::fmt;
use std::sync::Arc;

/// The bus, the calling agent and the agents it may reach.
#[derive(Clone)]
pub(super) struct Peers {
    /// The bus work is posted on; `None` leaves the tool unavailable.
    pub(super) bus: Option<Arc<dyn Bus>>,
    /// The agent whose tool this is.
    me: AgentId,
    /// Every agent of the config (to tell "not allowed" from "no such agent").
    agents: Vec<AgentId>,
    /// The other agents `me` may reach (`may_call`).
    may_call: Vec<AgentId>,
}

impl fmt::Debug for Peers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peers")
            .field("bus", &self.bus.is_some())
            .field("me", &self.me)
            .field("may_call", &self.may_call)
            .finish()
    }
}

impl Peers {
    /// Agent `me` reaching `may_call` (itself left out) among `agents`, on `bus`.
    pub(super) fn new(
        bus: Option<Arc<dyn Bus>>,
        me: AgentId,
        agents: Vec<AgentId>,
        may_call: Vec<AgentId>,
    ) -> Self {
        let may_call = may_call.into_iter().filter(|a| *a != me).collect();
        Self {
            bus,
            me,
            agents,
            may_call,
        }
    }

    /// The calling agent.
    pub(super) fn me(&self) -> &AgentId {
        &self.me
    }

    /// The other agents it may reach, in `may_call` order, for schemas and messages.
    pub(super) fn callees(&self) -> Vec<&str> {
        self.may_call.iter().map(AgentId::as_str).collect()
    }

    /// The agent named `name` if the caller may reach it (itself always); otherwise the error
    /// the model gets: `policy_denied` for an agent `may_call` does not list, `invalid_arguments`
    /// for a name no agent has.
    pub(super) fn reach(&self, name: &str) -> Result<&AgentId, ToolOutput> {
        if self.me.as_str() == name {
            return Ok(&self.me);
        }
        if let Some(id) = self.may_call.iter().find(|a| a.as_str() == name) {
            return Ok(id);
        }
        let allowed = match self.callees() {
            c if c.is_empty() => "none".to_string(),
            c => c.join(", "),
        };
        if self.agents.iter().any(|a| a.as_str() == name) {
            tracing::info!(agent = %self.me, callee = name, "Call refused: not in may_call.");
            return Err(ToolError::new(
                "policy_denied",
                format!(
                    "agent \"{}\" may not call agent \"{name}\": its file's may_call does not list it",
                    self.me
                ),
            )
            .suggest(format!("agents you may call: {allowed}"))
            .into());
        }
        Err(ToolOutput::error(
            "invalid_arguments",
            format!("no agent \"{name}\" (agents you may call: {allowed})"),
        ))
    }

    /// Available only with a bus.
    pub(super) fn available(&self) -> Result<(), String> {
        match self.bus {
            Some(_) => Ok(()),
            None => Err(super::OFFLINE.into()),
        }
    }
}
