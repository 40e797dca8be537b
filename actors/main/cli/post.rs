//! `clawbus post agent.<id> "text" [--wait]`: a task from a script, through the gateway; a
//! shared topic (`clawbus post team.research …`) goes to exactly one agent subscribing to it, or
//! with `--broadcast` to every one of them.

use super::client::{GatewayClient, segment, usage};
use super::out::outln;
use super::{EXIT_FAILED, EXIT_TIMEOUT, Global};
use crate::config::parse_duration;
use crate::gateway::api::{MAX_WAIT, TaskView};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `clawbus post`.
#[derive(Debug, Args)]
pub struct PostArgs {
    /// The topic: `agent.<id>`, or a shared topic agents subscribe to (`team.research`).
    pub topic: String,
    /// The message.
    pub text: String,
    /// Wait for the result and print it.
    #[arg(long)]
    pub wait: bool,
    /// How long to wait (`500ms`, `60s`, `5m`).
    #[arg(long, default_value = "60s")]
    pub timeout: String,
    /// Idempotency key: posting the same id again never runs the task twice.
    #[arg(long)]
    pub request_id: Option<String>,
    /// A named session, for a multi-turn conversation.
    #[arg(long)]
    pub session: Option<String>,
    /// Print the task as JSON.
    #[arg(long)]
    pub json: bool,
    /// Shared topics: every subscribing agent runs the task (one task each, in one group)
    /// instead of exactly one of them.
    #[arg(long)]
    pub broadcast: bool,
    /// The attempts the task may take (1-5), over the agent's `[retry] max_attempts`.
    #[arg(long)]
    pub max_attempts: Option<u32>,
}

/// Posts the task and reports the outcome with the documented exit codes.
pub(super) fn run(global: &Global, args: PostArgs) -> ExitCode {
    let path = match args.topic.strip_prefix("agent.") {
        Some(agent) if !agent.is_empty() && !agent.contains('.') && args.broadcast => {
            return usage(format!(
                "--broadcast: only for shared topics; {:?} is one agent's topic",
                args.topic
            ));
        }
        Some(agent) if !agent.is_empty() && !agent.contains('.') => {
            format!("/v1/agents/{}/tasks", segment(agent))
        }
        _ => match crate::config::subscribe::shared_topic(&args.topic) {
            Ok(topic) => format!("/v1/topics/{}/tasks", segment(topic.as_str())),
            Err(e) => {
                return usage(format!(
                    "topic {:?}: expected agent.<id> or a shared topic ({e})",
                    args.topic
                ));
            }
        },
    };
    let timeout = match parse_duration(&args.timeout) {
        Ok(t) if t.is_zero() || t > MAX_WAIT => {
            return usage(format!(
                "--timeout {:?}: out of range (expected more than 0 and at most 1h, e.g. \"60s\")",
                args.timeout
            ));
        }
        Ok(t) => t,
        Err(e) => return usage(format!("--timeout {:?}: {e}", args.timeout)),
    };
    let client = match GatewayClient::connect(global, timeout + Duration::from_secs(10)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let body = serde_json::json!({
        "text": args.text,
        "request_id": args.request_id,
        "wait": args.wait,
        "timeout_ms": timeout.as_millis() as u64,
        "session": args.session,
    });
    let mut body = body;
    if args.broadcast {
        body["broadcast"] = serde_json::Value::Bool(true);
    }
    if let Some(n) = args.max_attempts {
        body["max_attempts"] = n.into();
    }
    let answer = match client.post_with_status(&path, &body) {
        // The request id is taken by other work (another agent, text, session or lane).
        Ok((409, v)) => {
            return usage(
                v["error"]["message"]
                    .as_str()
                    .unwrap_or("the request id is taken by another task"),
            );
        }
        Ok((_, v)) => v,
        Err(code) => return code,
    };
    match serde_json::from_value::<TaskView>(answer) {
        Ok(view) => report(&view, &args),
        Err(e) => usage(format!("unexpected answer from the gateway: {e}")),
    }
}

fn report(view: &TaskView, args: &PostArgs) -> ExitCode {
    if args.json {
        super::out::json(view);
    } else if view.duplicate {
        // The request id was known: nothing ran again, and the answer says so.
        eprintln!(
            "(duplicate of task {}, answered from the store)",
            view.task_id
        );
    }
    let code = match view.state.as_str() {
        "succeeded" => ExitCode::SUCCESS,
        "queued" | "running" if args.wait => {
            eprintln!(
                "timed out after {} waiting for task {} ({})",
                args.timeout, view.task_id, view.state
            );
            return ExitCode::from(EXIT_TIMEOUT);
        }
        "queued" | "running" => ExitCode::SUCCESS,
        _ => {
            if !args.json {
                eprintln!(
                    "task {} {}: {}",
                    view.task_id,
                    view.state,
                    view.error.as_deref().unwrap_or("no error text")
                );
            }
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if !args.json {
        match (&view.result, args.wait) {
            (Some(r), _) => outln!("{}", crate::task::TaskResult::shown(r)),
            (None, false) => outln!("{}", view.task_id),
            (None, true) => {}
        }
    }
    code
}
