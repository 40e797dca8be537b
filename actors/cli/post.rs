//! `clawbus post agent.<id> "text" [--wait]`: a task from a script, through the gateway.

use super::{EXIT_FAILED, EXIT_TIMEOUT, EXIT_USAGE, Global};
use crate::config::{DEFAULT_STATE_DIR, parse_duration};
use crate::gateway::api::TaskView;
use crate::gateway::token;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `clawbus post`.
#[derive(Debug, Args)]
pub struct PostArgs {
    /// The topic: `agent.<id>`.
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
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Posts the task and reports the outcome with the documented exit codes.
pub fn run(global: &Global, args: PostArgs) -> ExitCode {
    let Some(agent) = args
        .topic
        .strip_prefix("agent.")
        .filter(|a| !a.is_empty() && !a.contains('.'))
    else {
        return usage(format!("topic {:?}: expected agent.<id>", args.topic));
    };
    let timeout = match parse_duration(&args.timeout) {
        Ok(t) => t,
        Err(e) => return usage(format!("--timeout {:?}: {e}", args.timeout)),
    };
    let (url, state_dir) = match endpoint(global) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let token = match std::env::var("CLAWBUS_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        Some(t) => t.trim().to_string(),
        None => match token::read(&token::token_path(&state_dir)) {
            Ok(t) => t,
            Err(e) => {
                return usage(format!(
                    "no token: CLAWBUS_TOKEN is unset and {} cannot be read ({e}); is `clawbus up` running with this --state-dir?",
                    token::token_path(&state_dir).display()
                ));
            }
        },
    };
    let rt = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let body = serde_json::json!({
        "text": args.text,
        "request_id": args.request_id,
        "wait": args.wait,
        "timeout_ms": timeout.as_millis() as u64,
        "session": args.session,
    });
    let endpoint = format!("{}/v1/agents/{agent}/tasks", url.trim_end_matches('/'));
    let view = match rt.block_on(send(&endpoint, &token, body, timeout)) {
        Ok(v) => v,
        Err(code) => return code,
    };
    report(&view, &args)
}

/// The gateway URL and state dir: flags first, else from the config file.
fn endpoint(global: &Global) -> Result<(String, PathBuf), ExitCode> {
    if let (Some(url), Some(dir)) = (&global.url, &global.state_dir) {
        return Ok((url.clone(), dir.clone()));
    }
    if global.url.is_some() && std::env::var("CLAWBUS_TOKEN").is_ok() {
        let dir = global
            .state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        return Ok((global.url.clone().unwrap_or_default(), dir));
    }
    let cfg = global.load()?;
    let url = global.url.clone().unwrap_or_else(|| {
        format!(
            "http://{}",
            std::net::SocketAddr::new(cfg.gateway.bind, cfg.gateway.port)
        )
    });
    Ok((url, cfg.state_dir))
}

async fn send(
    endpoint: &str,
    token: &str,
    body: serde_json::Value,
    timeout: Duration,
) -> Result<TaskView, ExitCode> {
    let client = reqwest::Client::builder()
        .timeout(timeout + Duration::from_secs(10))
        .build()
        .map_err(|e| usage(format!("http client: {e}")))?;
    let resp = client
        .post(endpoint)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .map_err(|e| {
            usage(format!(
                "cannot reach the gateway at {endpoint}: {e} (is `clawbus up` running?)"
            ))
        })?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| usage(format!("reading the gateway's answer: {e}")))?;
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        return Err(usage(format!("gateway answered {status}: {message}")));
    }
    serde_json::from_str(&text)
        .map_err(|e| usage(format!("unexpected answer from the gateway: {e}: {text}")))
}

fn report(view: &TaskView, args: &PostArgs) -> ExitCode {
    if args.json {
        println!("{}", serde_json::to_string_pretty(view).unwrap_or_default());
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
            (Some(r), _) => println!(
                "{}",
                r["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| r["text"].to_string())
            ),
            (None, false) => println!("{}", view.task_id),
            (None, true) => {}
        }
    }
    code
}
