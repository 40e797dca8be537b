//! `clawbus nodes [--json]`: the live nodes of the bus the gateway is on (`GET /v1/nodes`).
//!
//! Through the gateway rather than to NATS directly: the CLI already holds the gateway's URL
//! and token for every other command, needs no NATS credentials or reach, and the same command
//! works on the embedded bus (one node).

use super::Global;
use super::client::GatewayClient;
use super::out::outln;
use clap::Args;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus nodes` arguments.
#[derive(Debug, Args)]
pub struct NodesArgs {
    /// Print the gateway's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus nodes`.
pub(super) fn run(global: &Global, args: NodesArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = match client.get("/v1/nodes") {
        Ok(v) => v,
        Err(code) => return code,
    };
    if args.json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    outln!(
        "{:<20} {:<8} {:<8} {:<24} {:<28} LANES (running/cap, waiting)",
        "NODE",
        "PID",
        "NATS",
        "AGENTS",
        "GATEWAY"
    );
    for node in answer["nodes"].as_array().into_iter().flatten() {
        outln!("{}", line(node));
    }
    ExitCode::SUCCESS
}

fn line(node: &Value) -> String {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let lanes: Vec<String> = node["lanes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let waiting = l["waiting"].as_u64().unwrap_or(0);
            let queue = if waiting > 0 {
                format!(", {waiting} waiting")
            } else {
                String::new()
            };
            format!(
                "{} {}/{}{queue}",
                l["name"].as_str().unwrap_or_default(),
                l["running"],
                l["cap"]
            )
        })
        .collect();
    let link = match &node["bus"] {
        Value::Null => "-".to_string(),
        bus if bus["connected"] == true => "up".to_string(),
        _ => "down".to_string(),
    };
    format!(
        "{:<20} {:<8} {:<8} {:<24} {:<28} {}",
        node["node"].as_str().unwrap_or_default(),
        node["pid"],
        link,
        strings(&node["agents"]).join(","),
        node["gateway"].as_str().unwrap_or("-"),
        lanes.join("; ")
    )
}
