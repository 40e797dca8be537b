//! `clawbus status [--json]`: the running daemon's agents and the circuit breaker of each model
//! provider (`GET /v1/status`).

use super::Global;
use super::client::GatewayClient;
use super::out::outln;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus status` arguments.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print the gateway's JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus status`.
pub(super) fn run(global: &Global, args: StatusArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = match client.get("/v1/status") {
        Ok(v) => v,
        Err(code) => return code,
    };
    if args.json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    outln!("AGENTS");
    for agent in answer["agents"].as_array().into_iter().flatten() {
        let fallbacks: Vec<&str> = agent["fallbacks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .collect();
        let then = if fallbacks.is_empty() {
            String::new()
        } else {
            format!(" → {}", fallbacks.join(" → "))
        };
        outln!(
            "  {:<16} {}{then}",
            agent["id"].as_str().unwrap_or_default(),
            agent["model"].as_str().unwrap_or_default()
        );
    }
    outln!("CIRCUIT BREAKERS");
    let breakers = answer["breakers"].as_array().cloned().unwrap_or_default();
    if breakers.is_empty() {
        outln!("  none (only providers of agents with fallbacks have one)");
    }
    for b in &breakers {
        let left = b["retry_in_ms"]
            .as_u64()
            .map(|ms| format!(", calls again in {}s", ms.div_ceil(1000)))
            .unwrap_or_default();
        outln!(
            "  {:<16} {:<9} {} consecutive failures{left}",
            b["provider"].as_str().unwrap_or_default(),
            b["state"].as_str().unwrap_or_default(),
            b["failures"]
        );
    }
    ExitCode::SUCCESS
}
