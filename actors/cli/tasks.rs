//! `clawbus tasks show <id>` and `clawbus tasks cancel <id>`.

use super::client::{GatewayClient, segment, usage};
use super::{EXIT_FAILED, Global};
use clap::Subcommand;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus tasks` subcommands.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Print a task as JSON.
    Show {
        /// The task id.
        id: String,
    },
    /// Cancel a queued or running task (a running turn is stopped; its model call is dropped).
    Cancel {
        /// The task id.
        id: String,
    },
}

/// Runs a `tasks` subcommand.
pub fn run(global: &Global, cmd: TasksCommand) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (id, answer) = match &cmd {
        TasksCommand::Show { id } => (
            id,
            client
                .get(&format!("/v1/tasks/{}", segment(id)))
                .map(|v| (200, v)),
        ),
        TasksCommand::Cancel { id } => (
            id,
            client.post_with_status(
                &format!("/v1/tasks/{}/cancel", segment(id)),
                &serde_json::json!({}),
            ),
        ),
    };
    let (status, answer) = match answer {
        Ok(v) => v,
        Err(code) => return code,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&answer).unwrap_or_default()
    );
    match (&cmd, answer["state"].as_str()) {
        (TasksCommand::Cancel { .. }, Some("cancelled")) if status != 409 => ExitCode::SUCCESS,
        (TasksCommand::Cancel { .. }, Some(state)) => {
            eprintln!("task {id} had already ended ({state}); nothing to cancel");
            ExitCode::from(EXIT_FAILED)
        }
        (TasksCommand::Show { .. }, Some(_)) => ExitCode::SUCCESS,
        _ => usage("unexpected answer from the gateway"),
    }
}
