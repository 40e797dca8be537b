//! `clawbus usage [--agent ID] [--since 24h] [--json]`: tokens and cost per agent and model,
//! summed over the task records in the store (`GET /v1/usage`).

use super::Global;
use super::client::{GatewayClient, segment};
use super::out::outln;
use clap::Args;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus usage` arguments.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Only this agent's usage.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only tasks that ended within this long (e.g. `24h`, `30m`); default: every task in the
    /// store (the dedup window).
    #[arg(long)]
    pub since: Option<String>,
    /// Print the gateway's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus usage`.
pub(super) fn run(global: &Global, args: UsageArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut query = Vec::new();
    if let Some(a) = &args.agent {
        query.push(format!("agent={}", segment(a)));
    }
    if let Some(s) = &args.since {
        query.push(format!("since={}", segment(s)));
    }
    let path = if query.is_empty() {
        "/v1/usage".to_string()
    } else {
        format!("/v1/usage?{}", query.join("&"))
    };
    let answer = match client.get(&path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if args.json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    outln!(
        "{:<16} {:<32} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "AGENT",
        "MODEL",
        "TASKS",
        "INPUT",
        "OUTPUT",
        "CACHE_RD",
        "CACHE_WR",
        "COST_USD"
    );
    for row in answer["rows"].as_array().into_iter().flatten() {
        outln!("{}", line(row));
    }
    let mut total = answer["total"].clone();
    if let Some(obj) = total.as_object_mut() {
        obj.insert("agent".into(), Value::from("TOTAL"));
    }
    outln!("{}", line(&total));
    if answer["total"]["estimated"].as_bool() == Some(true) {
        outln!("* some servers sent no usage: those tokens are estimated (4 characters a token)");
    }
    ExitCode::SUCCESS
}

/// One table line: agent, model, tasks, tokens and cost (`-` without a price).
fn line(row: &Value) -> String {
    let n = |k: &str| row[k].as_u64().unwrap_or(0);
    let cost = row["cost_usd"]
        .as_f64()
        .map_or("-".to_string(), |c| format!("{c:.6}"));
    format!(
        "{:<16} {:<32} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}{}",
        row["agent"].as_str().unwrap_or_default(),
        row["model"].as_str().unwrap_or_default(),
        n("tasks"),
        n("prompt_tokens"),
        n("completion_tokens"),
        n("cache_read_tokens"),
        n("cache_write_tokens"),
        cost,
        if row["estimated"].as_bool() == Some(true) {
            " *"
        } else {
            ""
        }
    )
}
