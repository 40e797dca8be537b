//! `clawbus tools --agent ID [--channel C] [--json]`: the tools an agent is offered, for each
//! removed one the policy layer that removed it, the agents it may call (`may_call`), and which
//! tools run in the OS sandbox. Works offline, from the config files and this
//! process's environment (which decides `web_search`'s availability, as the daemon's does);
//! the `[mcp.servers.<name>]` are started for the listing (as `clawbus mcp list` does) so their
//! tools are shown, then stopped.

use super::Global;
use super::out::outln;
use crate::agent::tools::{ToolServices, agent_tools};
use clap::Args;
use serde_json::json;
use std::process::ExitCode;

/// Flags of `clawbus tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The agent.
    #[arg(long)]
    pub agent: String,
    /// Apply this channel's `deny_tools` too (runs from the HTTP API come from `api`).
    #[arg(long)]
    pub channel: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints the effective tool list.
pub(super) fn run(global: &Global, args: ToolsArgs) -> ExitCode {
    let config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let def = match super::agent_def(&config, &args.agent) {
        Ok(def) => def,
        Err(code) => return code,
    };
    let mut set = match super::mcp::started(&config.mcp) {
        Ok((rt, mcp)) => {
            let services = ToolServices {
                mcp: Some(mcp.clone()),
                ..Default::default()
            };
            let set = agent_tools(def, &config, &services);
            rt.block_on(mcp.stop());
            set
        }
        Err(code) => return code,
    };
    if let Some(channel) = &args.channel {
        set = set.for_channel(channel);
    }
    let offered = set.names();
    let may_call: Vec<&str> = def.may_call.iter().map(|a| a.as_str()).collect();
    // Tools that start a process run in the sandbox in the sessions its mode names.
    let sandboxed: Vec<&str> = crate::tools::sandbox::explain::SANDBOXED_TOOLS
        .iter()
        .copied()
        .filter(|t| offered.contains(t))
        .collect();
    let sessions = match def.sandbox.mode.value {
        crate::config::SandboxMode::Off => "none",
        crate::config::SandboxMode::NonMain => "every session but the main one",
        crate::config::SandboxMode::All => "every session",
    };
    if args.json {
        let out = json!({
            "agent": def.id.as_str(),
            "profile": def.tools.profile.as_str(),
            "channel": args.channel,
            "offered": offered,
            "removed": set.removed(),
            "may_call": may_call,
            "sandboxed": { "tools": sandboxed, "mode": def.sandbox.mode.value.to_string() },
        });
        super::out::json(&out);
        return ExitCode::SUCCESS;
    }
    let channel = args.channel.as_deref().map_or(
        "none (pass --channel to apply its deny_tools)".to_string(),
        |c| c.to_string(),
    );
    outln!(
        "agent {}: profile {}, channel {channel}",
        def.id,
        def.tools.profile
    );
    outln!("offered ({}): {}", offered.len(), offered.join(", "));
    let reach = if may_call.is_empty() {
        "none".to_string()
    } else {
        may_call.join(", ")
    };
    outln!("may call (agent_call, sessions_spawn): {reach}");
    if def.sandbox.mode.value == crate::config::SandboxMode::Off || sandboxed.is_empty() {
        outln!(
            "sandboxed: none (sandbox.mode = \"{}\")",
            def.sandbox.mode.value
        );
    } else {
        outln!("sandboxed: {} (in {sessions})", sandboxed.join(", "));
    }
    if !set.removed().is_empty() {
        outln!("removed:");
        let width = set
            .removed()
            .iter()
            .map(|r| r.tool.len())
            .max()
            .unwrap_or(0);
        for r in set.removed() {
            outln!("  {:width$}  {:12}  {}", r.tool, r.layer.as_str(), r.reason);
        }
    }
    ExitCode::SUCCESS
}
