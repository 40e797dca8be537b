//! The session tools: `sessions_list`, `sessions_history {session, limit?}` and
//! `sessions_send {session, text}` — an agent sees and talks to its sessions.
//!
//! Policy: an agent reaches only its own sessions, those whose key starts with `agent:<self>:`
//! (its conversations, its task sessions, the subagents it ran on itself). Another agent's
//! sessions are refused as `policy_denied`; other agents are reached with `agent_call`.

use crate::ingress::{Duplicates, Ingress, IngressError, Request, Target};
use crate::origin::Origin;
use crate::session::index::SessionMeta;
use crate::session::transcript::EntryBody;
use crate::session::view::SessionReader;
use crate::tools::{Tool, ToolContext, ToolOutput, parse_args};
use async_trait::async_trait;
use bus::{Bus, BusError, RequestId};
use clawbus_core::ids::SessionKey;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Sessions `sessions_list` shows at most, most recently active first.
const MAX_LISTED: usize = 100;
/// Messages `sessions_history` shows when the model names no `limit`.
const DEFAULT_HISTORY: usize = 20;
/// The most messages `sessions_history` shows.
const MAX_HISTORY: usize = 200;

/// The session named by the model, if the calling agent may reach it: its index entry.
async fn reachable(
    reader: &SessionReader,
    ctx: &ToolContext,
    session: &str,
) -> Result<SessionMeta, ToolOutput> {
    let key = SessionKey::parse(session)
        .map_err(|e| ToolOutput::error("invalid_arguments", format!("\"session\": {e}")))?;
    if key.agent() != ctx.agent {
        return Err(ToolOutput::error(
            "policy_denied",
            format!(
                "session {key} belongs to agent \"{}\": an agent may see and talk to only its own sessions (agent:{}:…); use agent_call to ask another agent",
                key.agent(),
                ctx.agent
            ),
        ));
    }
    match reader.get(key.as_str()).await {
        Ok(Some(meta)) => Ok(meta),
        Ok(None) => Err(ToolOutput::error(
            "not_found",
            format!("no session {key}; sessions_list shows yours"),
        )),
        Err(e) => Err(ToolOutput::error("unavailable", e.to_string())),
    }
}

/// The reader, or the `unavailable` error of a tool built without one.
fn reader<'a>(
    reader: &'a Option<SessionReader>,
    tool: &str,
) -> Result<&'a SessionReader, ToolOutput> {
    reader.as_ref().ok_or_else(|| {
        ToolOutput::error(
            "unavailable",
            format!("{tool} needs the session index of a running daemon"),
        )
    })
}

fn needs_reader(reader: &Option<SessionReader>) -> Result<(), String> {
    match reader {
        Some(_) => Ok(()),
        None => Err("no session index in this process".into()),
    }
}

/// `sessions_list`: the calling agent's sessions with their state, turns and last activity.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionsListTool {
    reader: Option<SessionReader>,
}

impl SessionsListTool {
    /// A tool listing from `reader`; `None` leaves it unavailable.
    pub(crate) fn new(reader: Option<SessionReader>) -> Self {
        Self { reader }
    }
}

#[async_trait]
impl Tool for SessionsListTool {
    fn name(&self) -> &'static str {
        "sessions_list"
    }

    fn description(&self) -> &'static str {
        "List your sessions (conversations, tasks, subagents), most recently active first: \
         key, state (idle, processing, stopped), turns and last activity (unix ms)."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    }

    fn available(&self) -> Result<(), String> {
        needs_reader(&self.reader)
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, _args: serde_json::Value) -> ToolOutput {
        let reader = match reader(&self.reader, self.name()) {
            Ok(r) => r,
            Err(out) => return out,
        };
        let metas = match reader.list(Some(ctx.agent.as_str())).await {
            Ok(m) => m,
            Err(e) => return ToolOutput::error("unavailable", e.to_string()),
        };
        let total = metas.len();
        let rows: Vec<serde_json::Value> = metas
            .into_iter()
            .take(MAX_LISTED)
            .map(|m| {
                let (state, queued) = reader.state(&m.key);
                json!({
                    "key": m.key,
                    "state": state,
                    "queued": queued,
                    "turns": m.turns,
                    "last_activity_ms": m.updated_ms,
                })
            })
            .collect();
        ToolOutput::ok(json!({ "sessions": rows, "total": total }).to_string())
    }
}

/// `sessions_history {session, limit?}`: the last messages of one of the agent's sessions.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionsHistoryTool {
    reader: Option<SessionReader>,
}

impl SessionsHistoryTool {
    /// A tool reading transcripts through `reader`; `None` leaves it unavailable.
    pub(crate) fn new(reader: Option<SessionReader>) -> Self {
        Self { reader }
    }
}

#[derive(Deserialize)]
struct HistoryArgs {
    session: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// One message as a `role: text` line; tool calls are named.
fn line(message: &crate::model::ChatMessage) -> String {
    let role = serde_json::to_value(message.role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut text = message.content.clone().unwrap_or_default();
    for call in &message.tool_calls {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("[calls {} {}]", call.name, call.arguments));
    }
    format!("{role}: {}", text.replace('\n', "\n  "))
}

#[async_trait]
impl Tool for SessionsHistoryTool {
    fn name(&self) -> &'static str {
        "sessions_history"
    }

    fn description(&self) -> &'static str {
        "Read the last messages of one of your sessions (see sessions_list), oldest first, one \
         `role: text` line each."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "session": { "type": "string", "description": "The session key, from sessions_list." },
                "limit": { "type": "integer", "minimum": 1, "description": "How many of the last messages (default 20, at most 200)." }
            },
            "required": ["session"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        needs_reader(&self.reader)
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: HistoryArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        let reader = match reader(&self.reader, self.name()) {
            Ok(r) => r.clone(),
            Err(out) => return out,
        };
        let meta = match reachable(&reader, ctx, &args.session).await {
            Ok(m) => m,
            Err(out) => return out,
        };
        let limit = args.limit.unwrap_or(DEFAULT_HISTORY).clamp(1, MAX_HISTORY);
        let entries = match reader.entries(&meta).await {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(session = %meta.key, error = %e, "Transcript unreadable.");
                return ToolOutput::error(
                    "io",
                    format!("the transcript of session {} cannot be read", meta.key),
                );
            }
        };
        let lines: Vec<String> = entries
            .iter()
            .filter_map(|e| match &e.body {
                EntryBody::Message {
                    message,
                    silent: false,
                    ..
                } => Some(line(message)),
                _ => None,
            })
            .collect();
        let skip = lines.len().saturating_sub(limit);
        if lines.is_empty() {
            return ToolOutput::ok(format!("(session {} has no messages yet)", meta.key));
        }
        ToolOutput::ok(lines[skip..].join("\n"))
    }
}

/// `sessions_send {session, text}`: posts the text as a task into one of the agent's sessions
/// and returns its task id without waiting; when that turn ends, its outcome is announced in
/// the sender's session (as a subagent's is), exactly once.
///
/// The task runs on the `main` lane with the calling run as its parent (cancelling the caller
/// cancels it) and a deadline no later than the caller's. Its request id is
/// `send-<calling task>-<n>` for the n-th send of the run, so a turn resumed after a stop does
/// not send twice. Sending into the calling session itself is refused (it would only queue
/// behind this run).
#[derive(Clone, Default)]
pub(crate) struct SessionsSendTool {
    bus: Option<Arc<dyn Bus>>,
    reader: Option<SessionReader>,
}

impl std::fmt::Debug for SessionsSendTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionsSendTool")
            .field("bus", &self.bus.is_some())
            .field("reader", &self.reader)
            .finish()
    }
}

impl SessionsSendTool {
    /// A tool posting on `bus` into sessions known to `reader`; without either it is unavailable.
    pub(crate) fn new(bus: Option<Arc<dyn Bus>>, reader: Option<SessionReader>) -> Self {
        Self { bus, reader }
    }
}

#[derive(Deserialize)]
struct SendArgs {
    session: String,
    text: String,
}

#[async_trait]
impl Tool for SessionsSendTool {
    fn name(&self) -> &'static str {
        "sessions_send"
    }

    fn description(&self) -> &'static str {
        "Send a message into one of your other sessions (see sessions_list): it runs there as a \
         new turn. Returns the task id at once, without waiting for that turn; its outcome \
         arrives later in this conversation as a message."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "session": { "type": "string", "description": "The session key, from sessions_list." },
                "text": { "type": "string", "description": "The message." }
            },
            "required": ["session", "text"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        match self.bus {
            Some(_) => needs_reader(&self.reader),
            None => Err(crate::tools::OFFLINE.into()),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: SendArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        let (Some(bus), Some(run)) = (&self.bus, &ctx.run) else {
            return ToolOutput::error(
                "unavailable",
                "sessions_send works only inside an agent's run on the bus",
            );
        };
        let reader = match reader(&self.reader, self.name()) {
            Ok(r) => r,
            Err(out) => return out,
        };
        if args.text.trim().is_empty() {
            return ToolOutput::error("invalid_arguments", "\"text\" is empty");
        }
        let meta = match reachable(reader, ctx, &args.session).await {
            Ok(m) => m,
            Err(out) => return out,
        };
        if meta.key == run.session.as_str() {
            return ToolOutput::error(
                "invalid_arguments",
                format!("{} is this conversation: answer here instead", meta.key),
            );
        }
        let session = match SessionKey::parse(&meta.key) {
            Ok(k) => k,
            Err(e) => return ToolOutput::error("internal", e),
        };
        // The n-th send of this task is the same request when a stopped turn is resumed.
        let n = run.sent.fetch_add(1, Ordering::SeqCst);
        let request_id = match RequestId::parse(&format!("send-{}-{n}", run.task_id)) {
            Ok(id) => id,
            Err(e) => return ToolOutput::error("internal", e),
        };
        let origin = Origin {
            channel: clawbus_core::ids::Channel::Agent,
            chat_type: "session".into(),
            peer: ctx.agent.to_string(),
            session_key: Some(session.clone()),
            parent_task: Some(run.task_id),
            // The sender hears how the turn it started ended, as a message in its session.
            notify_session: Some(run.session.clone()),
            ..Origin::api()
        };
        let req = Request {
            // A child's deadline is never later than its parent's.
            deadline_ms: run.deadline_ms,
            duplicates: Duplicates::SameWork,
            ..Request::new(
                Target::Agent(ctx.agent.clone()),
                request_id.clone(),
                args.text,
                format!("agent:{}", ctx.agent),
                origin,
            )
        };
        match Ingress::new(bus.clone()).submit(req).await {
            Ok(admission) => {
                tracing::info!(agent = %ctx.agent, session = %session, task_id = %admission.task.task_id, duplicate = admission.duplicate, "Message sent into a session.");
                ToolOutput::ok(
                    json!({
                        "task_id": admission.task.task_id,
                        "request_id": request_id,
                        "session": session,
                        "status": "accepted",
                    })
                    .to_string(),
                )
            }
            Err(IngressError::Bus(e @ BusError::Conflict { .. })) => {
                ToolOutput::error("request_id_conflict", e)
            }
            Err(e) => ToolOutput::error("unavailable", format!("the bus refused the message: {e}")),
        }
    }
}
