//! Which tools an agent is offered, outermost layer first:
//!
//! 1. **profile** — `tools.profile` (`minimal`, `coding` (default), `messaging`, `full`), plus
//!    what `tools.allow` adds (names or `group:…`); MCP tools (`mcp__<server>__<tool>`) are in
//!    `full` only, else added by `group:mcp`, `group:mcp:<server>` or their names;
//! 2. **deny** — `tools.deny` removes names or groups, whatever added them;
//! 3. **availability** — a tool whose backend is not configured ([`Tool::available`](crate::tools::Tool::available): no search
//!    provider, exec denied or with an empty allowlist) or that this binary does not implement;
//! 4. **channel** — `[channels.<name>] deny_tools` for the channel a run came from, applied per
//!    run by [`ToolSet::for_channel`].
//!
//! The model is sent only the schemas of what is left, and [`ToolSet::invoke`] refuses a call to
//! anything removed with a `policy_denied` error naming the layer. Tools are offered in
//! catalogue order ([`KNOWN_TOOLS`]).

mod live;
pub(crate) mod sessions;
#[cfg(test)]
mod tests;

use crate::approvals::Approvals;
use crate::tools::sandbox::Sandbox;
use crate::tools::sandbox::gate::{Access, WorkspaceGate};
use crate::tools::{
    EditTool, ExecTool, Layer, MessageTool, ReadTool, ToolSet, WebFetchTool, WebSearchTool,
    WriteTool,
};
use bus::Bus;
use clawbus_core::config::{AgentDef, AgentRule, Config, ExecDef, KNOWN_TOOLS, SandboxDef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What tools need from the running process.
#[derive(Clone, Default)]
pub struct ToolServices {
    /// The bus (`message`); `None` leaves `message` refusing.
    pub bus: Option<Arc<dyn Bus>>,
    /// Approval requests (`exec` in `ask` mode); `None` refuses what needs asking.
    pub approvals: Option<Approvals>,
    /// The cron scheduler (`cron`); `None` leaves `cron` unavailable. A handle rather than bus
    /// requests: the scheduler keeps every decision in its store and answers synchronously, and
    /// the bus has no request/reply for admin calls yet.
    pub cron: Option<Arc<crate::cron::Scheduler>>,
    /// The flow engine (`flow_run`); `None` leaves `flow_run` unavailable.
    pub flows: Option<crate::flow::Flows>,
    /// Read access to the sessions (`sessions_list`, `sessions_history`, `sessions_send`);
    /// `None` leaves those tools unavailable.
    pub sessions: Option<crate::session::view::SessionReader>,
    /// The MCP servers started with the daemon; their tools join the registry (see
    /// [`crate::mcp`]). `None`: no MCP tools.
    pub mcp: Option<crate::mcp::McpServers>,
    /// The agents' browsers (`browser`); `None` leaves `browser` unavailable.
    pub browsers: Option<crate::tools::Browsers>,
}

/// Every implemented tool, built for this agent (no policy applied).
pub fn registry(def: &AgentDef, config: &Config, services: &ToolServices) -> ToolSet {
    let agents: Vec<clawbus_core::ids::AgentId> =
        config.agents.iter().map(|a| a.id.clone()).collect();
    let sandbox = Sandbox::new(sandbox_def(def, config));
    let mut set = builtin_registry(def, config, services, agents, sandbox);
    for tool in services.mcp.iter().flat_map(|m| m.tools().to_vec()) {
        set.insert(Arc::new(tool));
    }
    set
}

fn builtin_registry(
    def: &AgentDef,
    config: &Config,
    services: &ToolServices,
    agents: Vec<clawbus_core::ids::AgentId>,
    sandbox: Sandbox,
) -> ToolSet {
    ToolSet::builtin()
        .with(WorkspaceGate::new(ReadTool, sandbox.clone(), Access::Read))
        .with(WorkspaceGate::new(
            WriteTool,
            sandbox.clone(),
            Access::Write,
        ))
        .with(WorkspaceGate::new(EditTool, sandbox.clone(), Access::Write))
        .with(
            ExecTool::new(
                def.id.as_str(),
                exec_def(def, config),
                services.approvals.clone(),
            )
            .with_sandbox(sandbox),
        )
        .with(MessageTool::new(services.bus.clone()))
        .with(crate::tools::agent_call::AgentCallTool::new(
            services.bus.clone(),
            def.id.clone(),
            agents.clone(),
            def.may_call.clone(),
        ))
        .with(crate::tools::spawn::SpawnTool::new(
            services.bus.clone(),
            def.id.clone(),
            agents,
            def.may_call.clone(),
        ))
        .with(sessions::SessionsListTool::new(services.sessions.clone()))
        .with(sessions::SessionsHistoryTool::new(
            services.sessions.clone(),
        ))
        .with(sessions::SessionsSendTool::new(
            services.bus.clone(),
            services.sessions.clone(),
        ))
        .with(crate::tools::cron::CronTool::new(services.cron.clone()))
        .with(crate::tools::flow_run::FlowRunTool::new(
            services.flows.clone(),
        ))
        .with(WebFetchTool::new(&config.web))
        .with(WebSearchTool::from_env(&config.web.search))
        .with(crate::tools::BrowserTool::new(
            &config.browser,
            services.browsers.clone(),
        ))
}

/// The agent's `[exec]` without the secret variables (`Secrets::names_in`) in `exec.env`:
/// a provider key or the gateway token never reaches a command, whatever the file lists.
pub fn exec_def(def: &AgentDef, config: &Config) -> ExecDef {
    let secret = crate::secrets::Secrets::names_in(config);
    let mut exec = def.exec.clone();
    exec.env.retain(|name| {
        let keep = !secret.contains(name);
        if !keep {
            tracing::warn!(agent = %def.id, variable = %name, "exec.env names a secret variable; it is not passed to commands.");
        }
        keep
    });
    exec
}

/// The agent's `[sandbox]` without the secret variables in `sandbox.env` (as [`exec_def`]).
pub fn sandbox_def(def: &AgentDef, config: &Config) -> SandboxDef {
    let secret = crate::secrets::Secrets::names_in(config);
    let mut sandbox = def.sandbox.clone();
    sandbox.env.value.retain(|name| {
        let keep = !secret.contains(name);
        if !keep {
            tracing::warn!(agent = %def.id, variable = %name, "sandbox.env names a secret variable; it is not passed to commands.");
        }
        keep
    });
    sandbox
}

/// The agent's tools: [`registry`] with the profile, deny and availability layers applied and
/// the channel layer attached (see [`ToolSet::for_channel`]).
pub fn agent_tools(def: &AgentDef, config: &Config, services: &ToolServices) -> ToolSet {
    apply(&registry(def, config, services), def, config)
}

/// [`agent_tools`] with `secrets` redacted from every output, built again before each run when
/// the MCP servers' tools changed ([`ToolSet::current`]).
pub fn live_agent_tools(
    def: &AgentDef,
    config: &Config,
    services: &ToolServices,
    secrets: Arc<crate::secrets::Secrets>,
) -> ToolSet {
    let set = agent_tools(def, config, services).with_secrets(secrets.clone());
    match &services.mcp {
        Some(mcp) if !config.mcp.servers.is_empty() => set.with_live(Arc::new(
            live::McpToolsLive::new(mcp.clone(), def, config, services.clone(), secrets),
        )),
        _ => set,
    }
}

/// Applies layers 1–3 to `registry` for `def`, and attaches `config`'s channel deny lists.
pub fn apply(registry: &ToolSet, def: &AgentDef, config: &Config) -> ToolSet {
    let mut out = ToolSet::default();
    let extra = registry
        .names()
        .into_iter()
        .filter(|n| !KNOWN_TOOLS.contains(n));
    for name in KNOWN_TOOLS.iter().copied().chain(extra) {
        match def.tools.rule(name) {
            AgentRule::NotInProfile => out.remove(
                name,
                Layer::Profile,
                format!(
                    "not in profile \"{}\" nor in tools.allow",
                    def.tools.profile
                ),
            ),
            AgentRule::Denied(entry) => {
                out.remove(name, Layer::Deny, format!("tools.deny has {entry:?}"));
            }
            AgentRule::Allowed => match registry.get(name) {
                None => out.remove(name, Layer::Availability, "not implemented in this build"),
                Some(tool) => match tool.available() {
                    Ok(()) => out.insert(tool.clone()),
                    Err(why) => out.remove(name, Layer::Availability, why),
                },
            },
        }
    }
    let channels: BTreeMap<String, Vec<String>> = config
        .channels
        .iter()
        .map(|(name, c)| (name.clone(), c.deny_tools.clone()))
        .collect();
    out.with_channel_policy(channels)
}
