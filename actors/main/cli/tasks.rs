//! `clawbus tasks list`, `clawbus tasks show <id> [--tree]`, `clawbus tasks watch <id>` and
//! `clawbus tasks cancel <id>`.

use super::client::{GatewayClient, segment, usage};
use super::out::outln;
use super::{EXIT_FAILED, Global};
use clap::Subcommand;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus tasks` subcommands.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List the tasks in the store (inside the dedup window), oldest first.
    List {
        /// Only tasks in this state (queued, running, succeeded, failed, cancelled, timed_out).
        #[arg(long)]
        state: Option<String>,
        /// Only tasks posted to this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a task as JSON; with `--tree`, the task and the work it started, with states.
    Show {
        /// The task id.
        id: String,
        /// Print the tree of tasks it started (agent calls, subagents).
        #[arg(long)]
        tree: bool,
    },
    /// Print a task's events as they happen (what already happened first), one JSON object a
    /// line, until its terminal event. Exits 0 when it succeeded, 1 otherwise.
    Watch {
        /// The task id.
        id: String,
    },
    /// Run a failed or dead-lettered task again, as its next attempt (exit 1 if it had not
    /// failed).
    Retry {
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
pub(super) fn run(global: &Global, cmd: TasksCommand) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match &cmd {
        TasksCommand::Watch { id } => return watch(&client, id),
        TasksCommand::List { state, agent, json } => {
            return list(&client, state.as_deref(), agent.as_deref(), *json);
        }
        TasksCommand::Show { id, tree: true } => return tree(&client, id),
        _ => {}
    }
    let (id, answer) = match &cmd {
        TasksCommand::Show { id, .. } | TasksCommand::Watch { id } => (
            id,
            client
                .get(&format!("/v1/tasks/{}", segment(id)))
                .map(|v| (200, v)),
        ),
        TasksCommand::List { .. } => return usage("unreachable: tasks list"),
        TasksCommand::Cancel { id } => (
            id,
            client.post_with_status(
                &format!("/v1/tasks/{}/cancel", segment(id)),
                &serde_json::json!({}),
            ),
        ),
        TasksCommand::Retry { id } => (
            id,
            client.post_with_status(
                &format!("/v1/tasks/{}/retry", segment(id)),
                &serde_json::json!({}),
            ),
        ),
    };
    let (status, answer) = match answer {
        Ok(v) => v,
        Err(code) => return code,
    };
    super::out::json(&answer);
    match (&cmd, answer["state"].as_str()) {
        (TasksCommand::Cancel { .. }, Some("cancelled")) if status != 409 => ExitCode::SUCCESS,
        (TasksCommand::Cancel { .. }, Some(state)) => {
            eprintln!("task {id} had already ended ({state}); nothing to cancel");
            ExitCode::from(EXIT_FAILED)
        }
        (TasksCommand::Retry { .. }, Some(_)) if status != 409 => ExitCode::SUCCESS,
        (TasksCommand::Retry { .. }, Some(state)) => {
            eprintln!("task {id} is {state}; only failed or dead-lettered tasks are retried");
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

/// One line of a listing: id, state, agent, attempts, request id, parent.
fn line(task: &serde_json::Value, indent: usize) -> String {
    format!(
        "{:indent$}{}  {:<10} {:<12} attempts {}  {}{}",
        "",
        task["task_id"].as_str().unwrap_or_default(),
        task["state"].as_str().unwrap_or_default(),
        task["agent"].as_str().unwrap_or_default(),
        task["attempts"],
        task["request_id"].as_str().unwrap_or_default(),
        task["error"]
            .as_str()
            .map(|e| format!("  ({e})"))
            .unwrap_or_default(),
        indent = indent
    )
}

fn list(client: &GatewayClient, state: Option<&str>, agent: Option<&str>, json: bool) -> ExitCode {
    let mut query = Vec::new();
    if let Some(s) = state {
        query.push(format!("state={}", segment(s)));
    }
    if let Some(a) = agent {
        query.push(format!("agent={}", segment(a)));
    }
    let path = if query.is_empty() {
        "/v1/tasks".to_string()
    } else {
        format!("/v1/tasks?{}", query.join("&"))
    };
    let answer = match client.get(&path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    outln!(
        "{:<36}  {:<10} {:<12} {:<10}  REQUEST ID  (ERROR)",
        "TASK",
        "STATE",
        "AGENT",
        "ATTEMPTS"
    );
    for task in answer["tasks"].as_array().into_iter().flatten() {
        outln!("{}", line(task, 0));
    }
    ExitCode::SUCCESS
}

fn tree(client: &GatewayClient, id: &str) -> ExitCode {
    let answer = match client.get(&format!("/v1/tasks/{}/tree", segment(id))) {
        Ok(v) => v,
        Err(code) => return code,
    };
    for node in answer["tree"].as_array().into_iter().flatten() {
        let depth = node["depth"].as_u64().unwrap_or(0) as usize;
        outln!("{}", line(&node["task"], depth * 2));
    }
    ExitCode::SUCCESS
}
