//! The zero-latency model: `clawbus::testkit::ScriptedServer` with a responder that answers at
//! once, by the first word of the last user message (`tool`, `ask`, `delegate`, `compute`, else
//! plain text), and reports each subagent announcement it sees.

use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

/// Starts the model server; the receiver gets the instant each `[task result]` announcement
/// reached it (the end of a subagent round trip).
pub(super) async fn start() -> (ScriptedServer, Receiver<Instant>) {
    let (announced_tx, announced_rx) = channel::<Instant>();
    let announced_tx = std::sync::Mutex::new(announced_tx);
    let model = ScriptedServer::with_responder(move |req| {
        let user = last_user(req);
        let has_results = req["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if user.starts_with("[task result]") {
            let _ = announced_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(Instant::now());
            return Turn::text("noted");
        }
        match user.split_whitespace().next().unwrap_or_default() {
            "tool" if !has_results => Turn::tool_call("read", json!({ "path": "NOTES.md" })),
            "ask" if !has_results => Turn::tool_call(
                "agent_call",
                json!({ "agent": "b", "task": format!("compute {user}") }),
            ),
            "delegate" if !has_results => {
                Turn::tool_call("sessions_spawn", json!({ "task": format!("child {user}") }))
            }
            "compute" => Turn::text("42"),
            _ if has_results => Turn::text("done"),
            _ => Turn::text("ok"),
        }
    })
    .await;
    (model, announced_rx)
}

/// The last user message of a model request, as the scripted model reads it. OpenClaw's
/// requests are read as the issue's notes describe them: the trailing injected
/// `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` message is skipped, content given as parts is
/// joined, and the `[Tue 2026-12-01 01:30 UTC] ` time prefix OpenClaw adds is dropped.
pub(super) fn last_user(req: &Value) -> String {
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let user = req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text)
        .find(|t| !t.starts_with("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"))
        .unwrap_or_default();
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]]*\] ").unwrap()
    });
    STAMP.replace(&user, "").into_owned()
}
