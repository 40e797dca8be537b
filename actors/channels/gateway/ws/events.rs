//! Bus events to protocol events, for one connection.
//!
//! The connection subscribes (before `hello-ok`) to the task events of every agent
//! (`events.agent.>`), the cron events (`events.cron.>`) and the approval events
//! (`approvals.>`), and turns them into `agent`, `chat`, `task`, `cron` and `exec.approval.*`
//! events. A run's `agent` events carry `{runId, sessionKey, agentId, stream, data, seq, ts}`:
//! `lifecycle` (`start`, `model`, `retry`, `end`, `error`), `assistant` (`{text, delta}`: the text
//! so far and what was added; `{text: "", delta: "", reset: true, reason}` when the text so far
//! is withdrawn) and `tool` (`start`, `end`).
//!
//! A run in a session also sends `session.message` events (see [`super::session_events`]): its
//! user message once the model is first called, its other messages before its `chat` `final`.
//!
//! `chat` events show only the answer: no `delta` is sent for text the model streams (it may
//! turn out not to be the answer: a step that ends in tool calls, a call tried again), and the
//! answer comes whole with `final`.

use super::frames::EventName;
use super::outbox::{Closed, Outbox};
use super::session_events::{self, RunSession};
use crate::gateway::api::ApiState;
use bus::events::{TaskEvent, TaskEventKind};
use bus::{BusError, Outcome, Subscription, Topic};
use clawbus_core::task::TaskResult;
use clawbus_runtime::origin::Origin;
use serde_json::{Value, json};
use std::collections::HashMap;
use uuid::Uuid;

/// Runs remembered at once per connection (their session key and text so far); past it the
/// oldest half is forgotten (a forgotten run's next event looks its session up again).
const MAX_RUNS: usize = 4096;

/// The subscriptions of one connection.
pub(super) struct Feed {
    tasks: Subscription,
    cron: Subscription,
    approvals: Subscription,
    runs: HashMap<Uuid, Run>,
    /// Runs seen so far: the order in which they are forgotten.
    seen: u64,
}

/// What the forwarder keeps of a run.
struct Run {
    session_key: Option<String>,
    agent: String,
    /// The assistant text so far (`agent` assistant events carry it whole).
    text: String,
    /// When it was first seen, among this connection's runs.
    order: u64,
    /// The last transcript position sent as `session.message` for this run.
    sent: u64,
}

fn pattern(s: &str) -> Result<Topic, BusError> {
    Topic::parse(s).map_err(|e| BusError::Invalid(e.to_string()))
}

impl Feed {
    /// Subscribes; events published from now on reach the connection.
    pub(super) async fn subscribe(state: &ApiState) -> Result<Self, BusError> {
        Ok(Self {
            tasks: state.bus.subscribe(pattern("events.agent.>")?).await?,
            cron: state.bus.subscribe(pattern("events.cron.>")?).await?,
            approvals: state.bus.subscribe(pattern("approvals.>")?).await?,
            runs: HashMap::new(),
            seen: 0,
        })
    }

    /// Forwards until the bus closes or the connection does.
    pub(super) async fn run(mut self, state: ApiState, out: Outbox) {
        loop {
            let sent = tokio::select! {
                d = self.tasks.next() => match d {
                    Some(d) => match TaskEvent::from_envelope(d.envelope()) {
                        Ok(e) => self.task_event(&state, &out, e).await,
                        Err(e) => {
                            tracing::warn!(error = %e, "Unreadable task event; not forwarded.");
                            Ok(())
                        }
                    },
                    None => return,
                },
                d = self.cron.next() => match d {
                    Some(d) => out.event(EventName::Cron, d.envelope().payload.clone()),
                    None => return,
                },
                d = self.approvals.next() => match d {
                    Some(d) => approval(&out, &d.envelope().payload),
                    None => return,
                },
                () = out.closed() => return,
            };
            if sent.is_err() {
                return;
            }
        }
    }

    /// The run an event belongs to, looked up (its session) on first sight.
    async fn run_of(&mut self, state: &ApiState, e: &TaskEvent) -> &mut Run {
        if !self.runs.contains_key(&e.task_id) && self.runs.len() >= MAX_RUNS {
            let mut orders: Vec<u64> = self.runs.values().map(|r| r.order).collect();
            orders.sort_unstable();
            let cut = orders[orders.len() / 2];
            self.runs.retain(|_, r| r.order > cut);
        }
        let session_key = match self.runs.get(&e.task_id) {
            Some(_) => None,
            None => match state.bus.task(e.task_id).await {
                Ok(Some(rec)) => Origin::of(&rec.envelope)
                    .ok()
                    .and_then(|o| o.session_key)
                    .map(|k| k.to_string()),
                _ => None,
            },
        };
        self.seen += 1;
        let order = self.seen;
        self.runs.entry(e.task_id).or_insert_with(|| Run {
            session_key,
            agent: e
                .topic
                .as_str()
                .strip_prefix("agent.")
                .unwrap_or_default()
                .to_string(),
            text: String::new(),
            order,
            sent: 0,
        })
    }

    async fn task_event(
        &mut self,
        state: &ApiState,
        out: &Outbox,
        e: TaskEvent,
    ) -> Result<(), Closed> {
        let run = self.run_of(state, &e).await;
        let key = run.session_key.clone();
        let agent_id = run.agent.clone();
        let agent = |stream: &str, data: Value| {
            json!({
                "runId": e.task_id, "sessionKey": key, "agentId": agent_id,
                "stream": stream, "data": data, "seq": e.seq, "ts": e.ts_ms,
            })
        };
        let task = |state: &str| {
            json!({
                "taskId": e.task_id, "runId": e.task_id, "requestId": e.request_id,
                "agentId": agent_id, "sessionKey": key, "state": state, "ts": e.ts_ms,
            })
        };
        match &e.event {
            TaskEventKind::Queued => out.event(EventName::Task, task("queued")),
            TaskEventKind::Started { attempt } => out.event(
                EventName::Agent,
                agent("lifecycle", json!({ "phase": "start", "attempt": attempt, "startedAt": e.ts_ms })),
            ),
            TaskEventKind::ModelCall { iteration } => {
                out.event(
                    EventName::Agent,
                    agent("lifecycle", json!({ "phase": "model", "iteration": iteration })),
                )?;
                match (&key, *iteration) {
                    (Some(k), 1) => {
                        let at = RunSession { key: k, agent: &agent_id, active: true };
                        session_events::publish(state, out, &e, &at, &mut run.sent).await
                    }
                    _ => Ok(()),
                }
            }
            TaskEventKind::Retry { attempt, delay_ms, reason } => out.event(
                EventName::Agent,
                agent("lifecycle", json!({ "phase": "retry", "attempt": attempt, "delayMs": delay_ms, "reason": reason })),
            ),
            TaskEventKind::Delta { text } => {
                run.text.push_str(text);
                let a = agent("assistant", json!({ "text": run.text, "delta": text }));
                out.event(EventName::Agent, a)
            }
            TaskEventKind::Reset { reason } => {
                run.text.clear();
                let a = agent(
                    "assistant",
                    json!({ "text": "", "delta": "", "reset": true, "reason": reason }),
                );
                out.event(EventName::Agent, a)
            }
            TaskEventKind::ToolStart { call_id, name, .. } => out.event(
                EventName::Agent,
                agent("tool", json!({ "phase": "start", "name": name, "toolCallId": call_id })),
            ),
            TaskEventKind::ToolEnd { call_id, name, ok } => out.event(
                EventName::Agent,
                agent("tool", json!({ "phase": "end", "name": name, "toolCallId": call_id, "isError": !ok })),
            ),
            TaskEventKind::Progress { .. } => Ok(()),
            TaskEventKind::Terminal { outcome } => {
                let ended = outcome.state().as_str();
                let (lifecycle, final_chat) = match outcome {
                    Outcome::Succeeded { result } => {
                        let text = TaskResult::shown(result);
                        let stop = crate::gateway::openai::finish_reason(result);
                        (
                            json!({ "phase": "end", "endedAt": e.ts_ms, "state": ended }),
                            chat(&e, &key, "final", json!({ "message": message(&text, e.ts_ms), "stopReason": stop })),
                        )
                    }
                    Outcome::Cancelled { reason } => (
                        json!({ "phase": "end", "endedAt": e.ts_ms, "state": ended, "aborted": true }),
                        chat(&e, &key, "aborted", json!({ "stopReason": "aborted", "errorMessage": reason })),
                    ),
                    Outcome::Failed { error }
                    | Outcome::TimedOut { error }
                    | Outcome::DeadLettered { error } => (
                        json!({ "phase": "error", "endedAt": e.ts_ms, "state": ended, "error": error }),
                        chat(&e, &key, "error", json!({ "errorMessage": error })),
                    ),
                    other => (
                        json!({ "phase": "error", "endedAt": e.ts_ms, "state": ended }),
                        chat(&e, &key, "error", json!({ "errorMessage": format!("{other:?}") })),
                    ),
                };
                out.event(EventName::Agent, agent("lifecycle", lifecycle))?;
                if let Some(k) = &key {
                    let at = RunSession { key: k, agent: &agent_id, active: false };
                    session_events::publish(state, out, &e, &at, &mut run.sent).await?;
                }
                out.event(EventName::Chat, final_chat)?;
                out.event(EventName::Task, task(ended))?;
                self.runs.remove(&e.task_id);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// A `chat` event payload: `{runId, sessionKey, seq, state, …more}`.
fn chat(e: &TaskEvent, key: &Option<String>, state: &str, more: Value) -> Value {
    let mut v = json!({ "runId": e.task_id, "sessionKey": key, "seq": e.seq, "state": state });
    if let (Some(obj), Value::Object(more)) = (v.as_object_mut(), more) {
        obj.extend(more);
    }
    v
}

/// An assistant message as chat events carry it.
fn message(text: &str, ts_ms: u64) -> Value {
    json!({ "role": "assistant", "content": [{ "type": "text", "text": text }], "timestamp": ts_ms })
}

/// `{event, approval}` from the approvals store as `exec.approval.requested` or `.resolved`.
fn approval(out: &Outbox, payload: &Value) -> Result<(), Closed> {
    let a = &payload["approval"];
    let request = json!({
        "command": a["command"], "agentId": a["agent"], "sessionKey": a["session"],
    });
    match payload["event"].as_str() {
        Some("requested") => out.event(
            EventName::ExecApprovalRequested,
            json!({
                "id": a["id"], "request": request,
                "createdAtMs": a["created_ms"], "expiresAtMs": a["expires_ms"],
            }),
        ),
        Some(decision) => out.event(
            EventName::ExecApprovalResolved,
            json!({ "id": a["id"], "decision": decision, "request": request, "ts": a["resolved_ms"] }),
        ),
        None => Ok(()),
    }
}
