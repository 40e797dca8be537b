//! `clawbus sessions [--agent ID] [--archived] [--json]`, `clawbus sessions show <key>`,
//! `clawbus sessions delete <key>` and `clawbus sessions compact <key> [--max-lines N]`.

use super::Global;
use super::client::{GatewayClient, segment, usage};
use super::out::outln;
use crate::ids::SessionKey;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `clawbus sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Only this agent's sessions.
    #[arg(long)]
    pub agent: Option<String>,
    /// List the archived sessions (hidden otherwise).
    #[arg(long)]
    pub archived: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show one session instead of listing.
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
}

/// `clawbus sessions` subcommands.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Print a session's transcript, readable.
    Show {
        /// The session key (`agent:<id>:…`).
        key: String,
        /// Print the raw entries as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session that is not running, with its transcript: a message to its key
    /// afterwards starts a fresh session.
    Delete {
        /// The session key (`agent:<id>:…`).
        key: String,
    },
    /// Compact a session that is not running: older turns are summarised by its agent's model
    /// (the last `keep_recent_messages` stay), or with `--max-lines` only the last N messages
    /// stay. The transcript keeps every line; the next turn sees the compacted history.
    Compact {
        /// The session key (`agent:<id>:…`).
        key: String,
        /// Keep the last N messages (at least 1) instead of summarising.
        #[arg(long, value_name = "N")]
        max_lines: Option<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Lists sessions or shows one.
pub(super) fn run(global: &Global, args: SessionsArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match args.command {
        Some(SessionsCommand::Show { key, json }) => show(&client, &key, json || args.json),
        Some(SessionsCommand::Delete { key }) => delete(&client, &key),
        Some(SessionsCommand::Compact {
            key,
            max_lines,
            json,
        }) => compact(&client, &key, max_lines, json || args.json),
        None => list(&client, args.agent.as_deref(), args.archived, args.json),
    }
}

fn list(client: &GatewayClient, agent: Option<&str>, archived: bool, json: bool) -> ExitCode {
    let mut query = Vec::new();
    if let Some(a) = agent {
        query.push(format!("agent={}", segment(a)));
    }
    if archived {
        query.push("archived=true".to_string());
    }
    let path = match query.is_empty() {
        true => "/v1/sessions".to_string(),
        false => format!("/v1/sessions?{}", query.join("&")),
    };
    let answer = match client.get(&path) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        super::out::json(&answer["sessions"]);
        return ExitCode::SUCCESS;
    }
    let rows = answer["sessions"].as_array().cloned().unwrap_or_default();
    outln!(
        "{:<48} {:<36} {:<10} {:>6}  LAST ACTIVITY",
        "KEY",
        "ID",
        "STATE",
        "TURNS"
    );
    for r in rows {
        outln!(
            "{:<48} {:<36} {:<10} {:>6}  {}",
            r["key"].as_str().unwrap_or_default(),
            r["session_id"].as_str().unwrap_or_default(),
            r["state"].as_str().unwrap_or_default(),
            r["turns"].as_u64().unwrap_or_default(),
            when(r["updated_ms"].as_u64().unwrap_or_default()),
        );
    }
    ExitCode::SUCCESS
}

fn delete(client: &GatewayClient, key: &str) -> ExitCode {
    if let Err(e) = SessionKey::parse(key) {
        return usage(e);
    }
    match client.delete(&format!("/v1/sessions/{}", segment(key))) {
        Ok(_) => {
            outln!("deleted session {key}");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn compact(client: &GatewayClient, key: &str, max_lines: Option<usize>, json: bool) -> ExitCode {
    if let Err(e) = SessionKey::parse(key) {
        return usage(e);
    }
    if max_lines == Some(0) {
        return usage("--max-lines: must be at least 1");
    }
    let body = match max_lines {
        Some(n) => serde_json::json!({ "max_lines": n }),
        None => serde_json::json!({}),
    };
    let answer = match client.post(&format!("/v1/sessions/{}/compact", segment(key)), &body) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    let c = &answer["compaction"];
    let kept = c["kept"].as_u64().unwrap_or_default();
    if c["compacted"] == true {
        outln!(
            "compacted session {key}: {kept} messages kept, about {} → {} tokens",
            c["tokens_before"],
            c["tokens_after"]
        );
    } else {
        let why = c["reason"].as_str().unwrap_or("nothing older to cut");
        outln!("session {key} not compacted ({why}); {kept} messages in view");
    }
    ExitCode::SUCCESS
}

fn show(client: &GatewayClient, key: &str, json: bool) -> ExitCode {
    if let Err(e) = SessionKey::parse(key) {
        return usage(e);
    }
    let answer = match client.get(&format!("/v1/sessions/{}", segment(key))) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        super::out::json(&answer);
        return ExitCode::SUCCESS;
    }
    let s = &answer["session"];
    outln!(
        "session {key}  id {}  state {}  turns {}",
        s["session_id"].as_str().unwrap_or_default(),
        answer["state"].as_str().unwrap_or_default(),
        s["turns"]
    );
    for e in answer["entries"].as_array().cloned().unwrap_or_default() {
        outln!("{}", render_entry(&e));
    }
    ExitCode::SUCCESS
}

/// One transcript entry as a line for people.
pub(super) fn render_entry(e: &serde_json::Value) -> String {
    let at = when(e["ts"].as_u64().unwrap_or_default());
    match e["type"].as_str().unwrap_or_default() {
        "message" => {
            let m = &e["message"];
            let role = m["role"].as_str().unwrap_or("?");
            let silent = if e["silent"].as_bool().unwrap_or(false) {
                " (silent)"
            } else {
                ""
            };
            let mut line = format!(
                "[{at}] {role}{silent}: {}",
                m["content"].as_str().unwrap_or_default()
            );
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                line.push_str(&format!(
                    "\n    → {}({})",
                    call["name"].as_str().unwrap_or_default(),
                    call["arguments"].as_str().unwrap_or_default()
                ));
            }
            line
        }
        "compaction" => match e["summary"].as_str().unwrap_or_default() {
            "" => format!("[{at}] — compacted: older messages cut"),
            summary => format!("[{at}] — compacted: {summary}"),
        },
        "run_ended" => format!(
            "[{at}] — run {} {}: {}",
            e["request_id"].as_str().unwrap_or_default(),
            e["outcome"].as_str().unwrap_or_default(),
            e["reason"].as_str().unwrap_or_default()
        ),
        "model_fell_over" => format!(
            "[{at}] — model {} left for {}: {}",
            e["from"].as_str().unwrap_or_default(),
            e["to"].as_str().unwrap_or_default(),
            e["reason"].as_str().unwrap_or_default()
        ),
        "tool_call_started" => format!(
            "[{at}] — tool {} started (call {})",
            e["name"].as_str().unwrap_or_default(),
            e["call_id"].as_str().unwrap_or_default()
        ),
        "run_resumed" => {
            let interrupted: Vec<&str> = e["interrupted"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str())
                .collect();
            let calls = if interrupted.is_empty() {
                String::new()
            } else {
                format!("; interrupted calls: {}", interrupted.join(", "))
            };
            format!(
                "[{at}] — run {} resumed after a stop (attempt {}){calls}",
                e["request_id"].as_str().unwrap_or_default(),
                e["attempt"]
            )
        }
        "session" => format!("[{at}] — session started"),
        "unreadable" => format!(
            "— transcript line {} unreadable, skipped: {}",
            e["line"],
            e["error"].as_str().unwrap_or("not a transcript entry")
        ),
        other => format!("[{at}] ({other}) {e}"),
    }
}

fn when(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}
