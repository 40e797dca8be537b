//! `clawbus mcp list [--json]`: each configured MCP server started as the daemon would start
//! it, then its state (started and over which transport, or why not), protocol version, own
//! version and tools, then stopped. Works offline; exit 1 when a server did not start.
//! `clawbus mcp serve`: see `mcp_serve.rs`.

use super::Global;
use super::out::outln;
use crate::mcp::McpServers;
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// `clawbus mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start each `[mcp.servers.<name>]` and print its state, versions and tools.
    List(ListArgs),
    /// An MCP server on stdin/stdout exposing each `[mcp.serve] agents` agent of the running
    /// gateway as a tool `ask_<agent>`, plus `list_agents`, `task_status` and `task_result`.
    Serve,
}

/// Flags of `clawbus mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON: an array of `{name, error, transport, protocol, version, tools}`.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus mcp …`.
pub(super) fn run(global: &Global, cmd: McpCommand) -> ExitCode {
    match cmd {
        McpCommand::List(args) => list(global, args),
        McpCommand::Serve => super::mcp_serve::run(global),
    }
}

/// The servers of `def` started (as the daemon starts them, lazy ones too) on a runtime of this
/// process, which must stay alive while they are used; `Err` when no runtime can be built.
pub(super) fn started(
    def: &crate::config::McpDef,
) -> Result<(tokio::runtime::Runtime, McpServers), ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::from(super::EXIT_USAGE)
        })?;
    let servers = rt.block_on(async {
        let servers = McpServers::start(def).await;
        servers.ensure_started().await;
        servers
    });
    Ok((rt, servers))
}

fn list(global: &Global, args: ListArgs) -> ExitCode {
    let config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (rt, servers) = match started(&config.mcp) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let status = rt.block_on(servers.status());
    rt.block_on(servers.stop());
    let failed = status.iter().any(|s| s.error.is_some());
    if args.json {
        super::out::json(&status);
    } else if status.is_empty() {
        outln!("no MCP servers ([mcp.servers.<name>] in clawbus.toml)");
    } else {
        for s in &status {
            match &s.error {
                Some(e) => outln!("{}: failed: {e}", s.name),
                None => outln!(
                    "{}: started over {}, protocol {}, server {}, {} tools: {}",
                    s.name,
                    s.transport.as_deref().unwrap_or("?"),
                    s.protocol.as_deref().unwrap_or("?"),
                    s.version.as_deref().unwrap_or("(unnamed)"),
                    s.tools.len(),
                    s.tools.join(", ")
                ),
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
