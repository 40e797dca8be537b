//! `clawbus tasks show <id>`, `clawbus tasks watch <id>` and `clawbus tasks cancel <id>`.

use super::client::{GatewayClient, segment, usage};
use super::out::outln;
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
    /// Print a task's events as they happen (what already happened first), one JSON object a
    /// line, until its terminal event. Exits 0 when it succeeded, 1 otherwise.
    Watch {
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
    if let TasksCommand::Watch { id } = &cmd {
        return watch(&client, id);
    }
    let (id, answer) = match &cmd {
        TasksCommand::Show { id } | TasksCommand::Watch { id } => (
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
    outln!(
        "{}",
        serde_json::to_string_pretty(&answer).unwrap_or_default()
    );
    match (&cmd, answer["state"].as_str()) {
        (TasksCommand::Cancel { .. }, Some("cancelled")) if status != 409 => ExitCode::SUCCESS,
        (TasksCommand::Cancel { .. }, Some(state)) => {
            eprintln!("task {id} had already ended ({state}); nothing to cancel");
            ExitCode::from(EXIT_FAILED)
        }
        (TasksCommand::Show { .. } | TasksCommand::Watch { .. }, Some(_)) => ExitCode::SUCCESS,
        _ => usage("unexpected answer from the gateway"),
    }
}

/// Streams the task's events to stdout; the exit code follows its terminal state.
fn watch(client: &GatewayClient, id: &str) -> ExitCode {
    let mut terminal: Option<String> = None;
    let streamed = client.stream(&format!("/v1/tasks/{}/events", segment(id)), |data| {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(data) else {
            return;
        };
        if event["event"]["type"] == "terminal" {
            terminal = event["event"]["outcome"]["state"]
                .as_str()
                .map(str::to_string);
        }
        // A closed pipe (`| head`) ends the command quietly, exit 0.
        outln!("{event}");
    });
    if let Err(code) = streamed {
        return code;
    }
    match terminal.as_deref() {
        Some("succeeded") => ExitCode::SUCCESS,
        Some(_) => ExitCode::from(EXIT_FAILED),
        None => usage(format!(
            "the event stream of task {id} ended before its outcome"
        )),
    }
}
