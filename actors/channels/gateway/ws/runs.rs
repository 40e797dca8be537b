//! Runs over the WebSocket: `agent`, `chat.send` and `sessions.send` submit a task (the run id is
//! the task id, the idempotency key its request id), `agent.wait` waits for its end,
//! `chat.abort` cancels, `chat.history` reads the transcript.
//!
//! Sessions: `sessionKey` is a full key (`agent:<id>:…`), `main` (the agent's main session), or
//! a name (`agent:<id>:ws:direct:<name>`, through the router); without one the run goes to the
//! agent's main session `agent:<id>:main`, as in OpenClaw.
//!
//! `agent` is answered twice on its request id, as OpenClaw does: `{runId, status: "accepted"}`
//! at once, then (see [`finish`]) the run's end in OpenClaw's shape.

use super::frames::{ErrorCode, ErrorShape};
use super::methods::Method;
use super::openclaw::{self, delivery::Resolved};
use crate::gateway::api::{self, ApiState, Failure};
use crate::gateway::sessions::{self, Cancelled};
use bus::{RequestId, TaskRecord, TaskState};
use clawbus_core::ids::{AgentId, SessionKey, SessionName};
use clawbus_runtime::ingress::{Request, Target, Waited};
use clawbus_runtime::origin::Origin;
use clawbus_runtime::router::Inbound;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// The channel on the origin and in session keys.
const CHANNEL: clawbus_core::ids::Channel = clawbus_core::ids::Channel::Ws;
/// How long `agent.wait` waits when the client names no `timeoutMs`.
const DEFAULT_WAIT_MS: u64 = 30_000;
/// How many transcript entries `chat.history` answers when the client names no `limit`.
const DEFAULT_HISTORY: usize = 200;

/// The params of `agent`, `chat.send` and `sessions.send` (the fields OpenClaw clients send
/// that have no counterpart here, such as `thinking` or `deliver`, are dropped before, see
/// [`super::openclaw::fields`]; any other is refused).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RunParams {
    /// The message for the agent.
    #[serde(alias = "text")]
    message: String,
    /// The agent; the one the session key names, else the first agent.
    #[serde(default)]
    agent_id: Option<String>,
    /// The session (see the module doc).
    #[serde(default, alias = "key")]
    session_key: Option<String>,
    /// The request id: the same key again answers the same run, nothing runs twice.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// The lane (`main` by default).
    #[serde(default)]
    lane: Option<String>,
}

/// The agent a request names: `agentId`, else the one in a full session key, else the first.
fn agent_of(
    state: &ApiState,
    agent_id: Option<&str>,
    key: Option<&str>,
) -> Result<AgentId, ErrorShape> {
    let from_key = key
        .filter(|k| k.starts_with("agent:"))
        .map(SessionKey::from_client)
        .transpose()
        .map_err(ErrorShape::invalid)?;
    let named = match (agent_id, &from_key) {
        (Some(a), Some(k)) if a != k.agent() => {
            return Err(ErrorShape::invalid(format!(
                "agentId {a:?} differs from the agent of sessionKey {k}"
            )));
        }
        (Some(a), _) => a.to_string(),
        (None, Some(k)) => k.agent().to_string(),
        (None, None) => state
            .config
            .agents
            .first()
            .map(|a| a.id.to_string())
            .ok_or_else(|| ErrorShape::new(ErrorCode::NotFound, "no agent is configured"))?,
    };
    if state.config.agent(&named).is_none() {
        return Err(ErrorShape::new(
            ErrorCode::NotFound,
            format!("no agent \"{named}\""),
        ));
    }
    AgentId::parse(&named).map_err(ErrorShape::invalid)
}

/// Where a run goes: `(key, chat type, peer)`. A session name has no key yet: the router
/// chooses it (in the ingress pipeline for a run, in [`session_of`] for a lookup).
fn place_of(
    agent: &AgentId,
    key: Option<&str>,
) -> Result<(Option<SessionKey>, String, String), ErrorShape> {
    match key {
        None | Some("main") => Ok((
            Some(SessionKey::main(agent)),
            "direct".into(),
            String::new(),
        )),
        Some(k) if k.starts_with("agent:") => Ok((
            Some(SessionKey::from_client(k).map_err(ErrorShape::invalid)?),
            "direct".into(),
            String::new(),
        )),
        Some(name) => {
            let name = SessionName::parse("sessionKey", name).map_err(|e| {
                ErrorShape::invalid(format!("{e} (or a full key agent:<id>:…, or \"main\")"))
            })?;
            Ok((None, "direct".into(), name.to_string()))
        }
    }
}

/// The session key a client names (see [`place_of`]), routed when it is a name.
fn session_of(
    state: &ApiState,
    agent: &AgentId,
    key: Option<&str>,
    request_id: &RequestId,
) -> Result<SessionKey, ErrorShape> {
    let (key, chat_type, peer) = place_of(agent, key)?;
    if let Some(key) = key {
        return Ok(key);
    }
    let inbound = Inbound {
        channel: CHANNEL.to_string(),
        chat_type,
        peer,
        agent: Some(agent.clone()),
        session_name: None,
        request_id: request_id.to_string(),
    };
    let route = state
        .router
        .route(&inbound)
        .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    Ok(route.session)
}

/// Submits the run; answers `{runId, status, acceptedAt, sessionKey, duplicate}` at once.
pub(super) async fn start(
    state: &ApiState,
    method: Method,
    p: RunParams,
    delivery: Resolved,
) -> Result<Value, ErrorShape> {
    if p.message.trim().is_empty() {
        return Err(ErrorShape::invalid(format!(
            "{} params: field \"message\": empty (expected the message for the agent)",
            method.as_str()
        )));
    }
    let agent = agent_of(state, p.agent_id.as_deref(), p.session_key.as_deref())?;
    let request_id = match p.idempotency_key.as_deref().map(RequestId::parse) {
        None => RequestId::random(),
        Some(Ok(id)) => id,
        Some(Err(e)) => return Err(ErrorShape::invalid(format!("idempotencyKey: {e}"))),
    };
    let (key, chat_type, peer) = place_of(&agent, p.session_key.as_deref())?;
    let lane = api::lane_of(&state.config, p.lane.as_deref())?;
    // A session name is routed by the pipeline; a key goes to the agent as it is.
    let target = match key {
        Some(_) => Target::Agent(agent.clone()),
        None => Target::Routed {
            agent: Some(agent.clone()),
        },
    };
    let origin = Origin {
        channel: CHANNEL,
        chat_type,
        peer,
        session_key: key,
        lane,
        deliver_to: match delivery {
            Resolved::To(to) => Some(to),
            Resolved::NotAsked | Resolved::Dropped => None,
        },
        ..Origin::api()
    };
    let req = Request::new(target, request_id, p.message, CHANNEL.as_str(), origin);
    let submitted = crate::gateway::admit::submit(state, req).await?;
    let status = if method == Method::ChatSend {
        "started"
    } else {
        "accepted"
    };
    Ok(json!({
        "runId": submitted.task.task_id,
        "status": status,
        "acceptedAt": state.clock.now_ms(),
        "sessionKey": submitted.session,
        "agentId": agent.as_str(),
        "duplicate": submitted.duplicate,
    }))
}

/// The second answer of `agent` (`accepted`: its first): the run's end in OpenClaw's shape,
/// once it ends or `timeout` passes; with `deliver`, and what became of its delivery
/// (`result.deliveryStatus`).
pub(super) async fn finish(
    state: &ApiState,
    accepted: &Value,
    timeout: Duration,
    deliver: bool,
) -> Value {
    let run_id = accepted["runId"].as_str().unwrap_or_default();
    let session = accepted["sessionKey"].as_str().unwrap_or_default();
    let agent = accepted["agentId"].as_str().unwrap_or_default();
    let rec = match api::task_by_id(state, run_id).await {
        Ok(rec) => rec,
        Err(f) => {
            return json!({ "runId": run_id, "status": "error", "summary": ErrorShape::from(f).message });
        }
    };
    let rec = if rec.state.is_terminal() {
        rec
    } else {
        match state
            .ingress()
            .wait(&rec.request_id, timeout.min(api::MAX_WAIT), &rec)
            .await
        {
            Ok(Waited::Ended(rec)) => rec,
            Ok(Waited::Pending(_)) => return openclaw::run::still_running(run_id),
            Err(e) => {
                return json!({ "runId": run_id, "status": "error", "summary": e.to_string() });
            }
        }
    };
    let mut answer = openclaw::run::final_answer(&rec, session, agent);
    if deliver {
        answer["result"]["deliveryStatus"] =
            super::run_delivery::status(state, &rec, timeout).await;
    }
    answer
}

/// The params of `agent.wait`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct WaitParams {
    run_id: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Waits for a run's end (at most `timeoutMs`, 30 s by default, 1 h at most).
pub(super) async fn wait(state: &ApiState, p: WaitParams) -> Result<Value, ErrorShape> {
    let rec = api::task_by_id(state, &p.run_id).await?;
    let timeout = Duration::from_millis(p.timeout_ms.unwrap_or(DEFAULT_WAIT_MS)).min(api::MAX_WAIT);
    let rec = if rec.state.is_terminal() {
        rec
    } else {
        match state.ingress().wait(&rec.request_id, timeout, &rec).await {
            Ok(Waited::Ended(rec)) => rec,
            // The state the run had when the wait began, as before the wait.
            Ok(Waited::Pending(_)) => {
                return Ok(
                    json!({ "runId": p.run_id, "status": "timeout", "state": rec.state.as_str() }),
                );
            }
            Err(e) => return Err(crate::gateway::admit::failure(e).into()),
        }
    };
    Ok(ended(&rec))
}

/// A finished run as `agent.wait` answers it.
fn ended(rec: &TaskRecord) -> Value {
    let (status, stop) = match rec.state {
        TaskState::Succeeded => ("ok", "stop"),
        TaskState::Cancelled => ("error", "aborted"),
        TaskState::TimedOut => ("error", "timeout"),
        _ => ("error", "error"),
    };
    let mut v = json!({
        "runId": rec.task_id,
        "status": status,
        "state": rec.state.as_str(),
        "startedAt": rec.created_ms,
        "endedAt": rec.updated_ms,
        "stopReason": stop,
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(text) = crate::gateway::openai::result_text(rec) {
            obj.insert("text".into(), json!(text));
        }
        if let Some(e) = rec.error() {
            obj.insert("error".into(), json!(e));
        }
    }
    v
}

/// The params of `chat.abort`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AbortParams {
    #[serde(default)]
    session_key: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
}

/// Cancels `runId`, else every unfinished run of the session.
pub(super) async fn abort(state: &ApiState, p: AbortParams) -> Result<Value, ErrorShape> {
    let ids: Vec<String> = match (&p.run_id, &p.session_key) {
        (Some(id), _) => vec![id.clone()],
        (None, Some(key)) => {
            let agent = agent_of(state, p.agent_id.as_deref(), Some(key))?;
            let key = session_of(state, &agent, Some(key), &RequestId::random())?;
            let all = state.bus.tasks().await.map_err(Failure::bus)?;
            all.iter()
                .filter(|r| !r.state.is_terminal())
                .filter(|r| {
                    Origin::of(&r.envelope)
                        .ok()
                        .and_then(|o| o.session_key)
                        .is_some_and(|k| k == key)
                })
                .map(|r| r.task_id.to_string())
                .collect()
        }
        (None, None) => {
            return Err(ErrorShape::invalid(
                "chat.abort params: expected \"runId\" or \"sessionKey\"",
            ));
        }
    };
    let mut aborted = Vec::new();
    for id in ids {
        if let Cancelled::Now(rec) = sessions::cancel_task(state, &id).await? {
            aborted.push(rec.task_id);
        }
    }
    Ok(json!({ "ok": true, "aborted": !aborted.is_empty(), "runIds": aborted }))
}

/// The params of `chat.history`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct HistoryParams {
    session_key: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    /// Runs (idempotency keys) whose input the client shows as sent but not yet confirmed.
    #[serde(default)]
    input_run_ids: Option<Vec<String>>,
}

/// The last `limit` messages of a session, in OpenClaw's shape; none for a session that has
/// not started yet. With `inputRunIds`, `inputReceipts` (and the older `inputConsumptions`)
/// name the transcript message that consumed each of those inputs.
pub(super) async fn history(state: &ApiState, p: HistoryParams) -> Result<Value, ErrorShape> {
    let agent = agent_of(state, p.agent_id.as_deref(), Some(&p.session_key))?;
    let key = session_of(state, &agent, Some(&p.session_key), &RequestId::random())?;
    let mut shown = match sessions::transcript(state, key.as_str()).await {
        Ok(shown) => shown,
        Err(f) if f.status == axum::http::StatusCode::NOT_FOUND => {
            return Ok(json!({ "sessionKey": key, "messages": [] }));
        }
        Err(f) => return Err(f.into()),
    };
    let limit = p.limit.unwrap_or(DEFAULT_HISTORY);
    let entries = shown["entries"].as_array().cloned().unwrap_or_default();
    let numbered = openclaw::sessions::numbered(&entries);
    let consumed: Option<Vec<(String, Value)>> = p.input_run_ids.as_ref().map(|ids| {
        ids.iter()
            .filter_map(|id| {
                numbered
                    .iter()
                    .find(|m| m.request_id.as_deref() == Some(id) && m.message["role"] == "user")
                    .map(|m| (id.clone(), m.message["id"].clone()))
            })
            .collect()
    });
    let messages: Vec<Value> = numbered.into_iter().map(|m| m.message).collect();
    // Lines of the transcript that could not be read are counted, not hidden.
    let unreadable = entries.iter().filter(|e| e["type"] == "unreadable").count();
    let skip = messages.len().saturating_sub(limit);
    let session = shown["session"].take();
    let mut out = json!({
        "sessionKey": key,
        "sessionId": session["session_id"],
        "session": session,
        "messages": messages[skip..],
        "unreadable": unreadable,
    });
    if let Some(consumed) = consumed {
        let receipts: Vec<Value> = consumed
            .iter()
            .map(|(run, by)| json!({ "runId": run, "state": "consumed", "consumedByEventId": by }))
            .collect();
        let consumptions: Vec<Value> = consumed
            .iter()
            .map(|(run, by)| json!({ "runId": run, "consumedByEventId": by }))
            .collect();
        out["inputReceipts"] = json!(receipts);
        out["inputConsumptions"] = json!(consumptions);
    }
    Ok(out)
}
