//! What the tools that post work to agents (`agent_call`, `sessions_spawn`) share: the bus and
//! the agents they may address.

use crate::ids::AgentId;
use bus::Bus;
use std::fmt;
use std::sync::Arc;

/// The bus and the known agents.
#[derive(Clone)]
pub(super) struct Peers {
    /// The bus work is posted on; `None` leaves the tool unavailable.
    pub(super) bus: Option<Arc<dyn Bus>>,
    agents: Vec<AgentId>,
}

impl fmt::Debug for Peers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peers")
            .field("bus", &self.bus.is_some())
            .field("agents", &self.agents)
            .finish()
    }
}

impl Peers {
    pub(super) fn new(bus: Option<Arc<dyn Bus>>, agents: Vec<AgentId>) -> Self {
        Self { bus, agents }
    }

    /// The agent named `name`, if it exists.
    pub(super) fn find(&self, name: &str) -> Option<&AgentId> {
        self.agents.iter().find(|a| a.as_str() == name)
    }

    /// Every agent's id, for schemas and error messages.
    pub(super) fn names(&self) -> Vec<&str> {
        self.agents.iter().map(AgentId::as_str).collect()
    }

    /// Available only with a bus.
    pub(super) fn available(&self) -> Result<(), String> {
        match self.bus {
            Some(_) => Ok(()),
            None => Err(super::OFFLINE.into()),
        }
    }
}
