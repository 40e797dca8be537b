//! `clawbus approvals [--all] [--json]` lists approval requests; `clawbus approvals allow <id>
//! [--always]` and `clawbus approvals deny <id>` answer one. Through the running gateway.

use super::client::{GatewayClient, segment, usage};
use super::out::outln;
use super::{EXIT_FAILED, Global};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `clawbus approvals`.
#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Answer a request instead of listing them.
    #[command(subcommand)]
    pub action: Option<ApprovalAction>,
    /// List answered and expired requests too, not only pending ones.
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Answers to a request.
#[derive(Debug, Subcommand)]
pub enum ApprovalAction {
    /// Let the command run.
    Allow {
        /// The request id.
        id: String,
        /// Also add the command to the agent's allowlist for good.
        #[arg(long)]
        always: bool,
    },
    /// Refuse the command.
    Deny {
        /// The request id.
        id: String,
    },
}

/// Lists or answers; exit 1 when the request was already answered or expired.
pub(super) fn run(global: &Global, args: ApprovalsArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (id, body) = match &args.action {
        None => return list(&client, &args),
        Some(ApprovalAction::Allow { id, always }) => {
            (id, json!({ "decision": "allow", "always": always }))
        }
        Some(ApprovalAction::Deny { id }) => (id, json!({ "decision": "deny" })),
    };
    let answer = match client.post(&format!("/v1/approvals/{}", segment(id)), &body) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if let Some(message) = answer["error"]["message"].as_str() {
        eprintln!("error: {message}");
        return ExitCode::from(EXIT_FAILED);
    }
    if args.json {
        super::out::json(&answer);
    } else {
        let always = if answer["always"] == json!(true) {
            " (added to the allowlist)"
        } else {
            ""
        };
        outln!(
            "{} {}: {}{always}",
            answer["state"].as_str().unwrap_or("?"),
            id,
            answer["command"].as_str().unwrap_or_default()
        );
    }
    ExitCode::SUCCESS
}

fn list(client: &GatewayClient, args: &ApprovalsArgs) -> ExitCode {
    let path = if args.all {
        "/v1/approvals"
    } else {
        "/v1/approvals?state=pending"
    };
    let answer = match client.get(path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let Some(rows) = answer["approvals"].as_array() else {
        return usage("unexpected answer from the gateway: no \"approvals\" list");
    };
    if args.json {
        super::out::json(rows);
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        outln!(
            "no {}approval requests",
            if args.all { "" } else { "pending " }
        );
        return ExitCode::SUCCESS;
    }
    let text = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
    outln!("{:<36}  {:<8}  {:<16}  COMMAND", "ID", "STATE", "AGENT");
    for r in rows {
        outln!(
            "{:<36}  {:<8}  {:<16}  {}",
            text(r, "id"),
            text(r, "state"),
            text(r, "agent"),
            text(r, "command")
        );
    }
    ExitCode::SUCCESS
}
