//! `clawbus mcp list [--json]`: each configured MCP server started as the daemon would start
//! it, then its state (started, or why not), protocol version, own version and tools, then
//! stopped. Works offline; exit 1 when a server did not start.

use super::Global;
use super::out::outln;
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// `clawbus mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start each `[mcp.servers.<name>]` and print its state, versions and tools.
    List(ListArgs),
}

/// Flags of `clawbus mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON: an array of `{name, error, protocol, version, tools}`.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus mcp …`.
pub(super) fn run(global: &Global, cmd: McpCommand) -> ExitCode {
    match cmd {
        McpCommand::List(args) => list(global, args),
    }
}

fn list(global: &Global, args: ListArgs) -> ExitCode {
    let config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    let status = rt.block_on(async {
        let servers = crate::mcp::McpServers::start(&config.mcp).await;
        let status = servers.status().to_vec();
        servers.stop().await;
        status
    });
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
                    "{}: started, protocol {}, server {}, {} tools: {}",
                    s.name,
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
