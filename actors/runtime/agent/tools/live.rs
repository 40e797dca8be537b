//! [`McpToolsLive`]: an agent's tool set built again, with the same policy layers, when the MCP
//! servers' tools changed (a lazy server's first use, a restart, `tools/list_changed`).

use super::{ToolServices, agent_tools};
use crate::mcp::McpServers;
use crate::tools::{LiveTools, ToolSet};
use async_trait::async_trait;
use clawbus_core::config::{AgentDef, Config};
use std::sync::{Arc, Mutex};

/// What an agent's tool set is built from, and the set built at the last generation of the
/// MCP servers' tools.
pub(crate) struct McpToolsLive {
    mcp: McpServers,
    def: AgentDef,
    config: Config,
    services: ToolServices,
    secrets: Arc<crate::secrets::Secrets>,
    built: Mutex<Option<(u64, ToolSet)>>,
}

impl McpToolsLive {
    /// The live source of `def`'s tools; `services.mcp` must be `Some`.
    pub(crate) fn new(
        mcp: McpServers,
        def: &AgentDef,
        config: &Config,
        services: ToolServices,
        secrets: Arc<crate::secrets::Secrets>,
    ) -> Self {
        Self {
            mcp,
            def: def.clone(),
            config: config.clone(),
            services,
            secrets,
            built: Mutex::new(None),
        }
    }
}

#[async_trait]
impl LiveTools for McpToolsLive {
    async fn current(&self) -> Option<ToolSet> {
        self.mcp.ensure_started().await;
        let generation = self.mcp.generation();
        let mut built = self.built.lock().ok()?;
        match built.as_ref() {
            Some((g, set)) if *g == generation => Some(set.clone()),
            _ => {
                let set = agent_tools(&self.def, &self.config, &self.services)
                    .with_secrets(self.secrets.clone());
                *built = Some((generation, set.clone()));
                Some(set)
            }
        }
    }
}
