//! The OpenAI-compatible channel: `POST /v1/chat/completions` (stream and not) and
//! `GET /v1/models`, so the OpenAI SDKs and tools built on them talk to clawbus agents.
//!
//! `model` names the agent (`agent:<id>` or `<id>`). The conversation is a session on the
//! `openai` channel, named by the `X-Clawbus-Session` header or the `user` field
//! (`agent:<id>:openai:direct:<name>`): clawbus keeps its history server-side, so only the last
//! user message of `messages` becomes the task's text. Without a name every request is a
//! conversation of its own (`agent:<id>:openai:task:<request id>`).

mod error;
mod request;
mod stream;

use super::api::ApiState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bus::{RequestId, TaskRecord};
use clawbus_core::ids::SessionName;
use clawbus_runtime::ingress::{IngressError, Request, Target, Waited};
use clawbus_runtime::origin::Origin;
use error::ErrorType;
pub(crate) use request::ChatRequest;
use serde_json::json;
use std::time::Duration;

/// The channel on the origin and in session keys.
const CHANNEL: clawbus_core::ids::Channel = clawbus_core::ids::Channel::OpenAi;
/// The header naming the conversation's session (the `user` field otherwise).
pub(crate) const SESSION_HEADER: &str = "x-clawbus-session";
/// How long a non-streamed completion waits for the agent's answer.
pub(crate) const COMPLETION_WAIT: Duration = Duration::from_secs(600);

/// The routes of the OpenAI-compatible endpoint (under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/chat/completions", post(chat_completions))
        .route("/models", get(list_models))
        .route("/models/{model}", get(get_model))
}

/// Unix seconds now, as OpenAI's `created`.
fn created(state: &ApiState) -> u64 {
    state.clock.now_ms() / 1000
}

fn model_object(id: &str, created: u64) -> serde_json::Value {
    json!({ "id": format!("agent:{id}"), "object": "model", "created": created, "owned_by": "clawbus" })
}

async fn list_models(State(state): State<ApiState>) -> Response {
    let now = created(&state);
    let data: Vec<_> = state
        .config
        .agents
        .iter()
        .map(|a| model_object(a.id.as_str(), now))
        .collect();
    Json(json!({ "object": "list", "data": data })).into_response()
}

async fn get_model(State(state): State<ApiState>, Path(model): Path<String>) -> Response {
    match agent_of(&state, &model) {
        Ok(id) => Json(model_object(&id, created(&state))).into_response(),
        Err(answer) => answer,
    }
}

/// The agent a `model` names, or the 404 `model_not_found` answer.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
fn agent_of(state: &ApiState, model: &str) -> Result<String, Response> {
    let id = model.strip_prefix("agent:").unwrap_or(model);
    if state.config.agent(id).is_some() {
        return Ok(id.to_string());
    }
    let known: Vec<String> = state
        .config
        .agents
        .iter()
        .map(|a| format!("agent:{}", a.id))
        .collect();
    Err(error::unknown_model(model, &known))
}

/// The request id: the `Idempotency-Key` header, or a fresh one.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
fn request_id(headers: &HeaderMap) -> Result<RequestId, Response> {
    match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => Ok(RequestId::random()),
        Some(Ok(key)) => RequestId::parse(key).map_err(|e| error::invalid("invalid_request_id", e)),
        Some(Err(_)) => Err(error::invalid(
            "invalid_request_id",
            "Idempotency-Key: not visible ASCII",
        )),
    }
}

/// The session name: the `X-Clawbus-Session` header, else the `user` field, else none.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
fn session_name(headers: &HeaderMap, user: Option<&str>) -> Result<Option<String>, Response> {
    let (source, name) = match headers.get(SESSION_HEADER).map(|v| v.to_str()) {
        Some(Ok(h)) => ("X-Clawbus-Session", h),
        Some(Err(_)) => {
            return Err(error::invalid(
                "invalid_session",
                "X-Clawbus-Session: not visible ASCII",
            ));
        }
        None => match user {
            Some(u) => ("user", u),
            None => return Ok(None),
        },
    };
    match SessionName::parse(source, name) {
        Ok(name) => Ok(Some(name.to_string())),
        Err(e) => Err(error::invalid("invalid_session", e.to_string())),
    }
}

async fn chat_completions(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Json<ChatRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorType::InvalidRequest,
                "payload_too_large",
                format!(
                    "the request body is larger than [gateway] max_body = {} bytes",
                    state.config.gateway.max_body
                ),
            );
        }
        Err(e) => return error::invalid("invalid_body", e.body_text()),
    };
    let agent = match agent_of(&state, &body.model) {
        Ok(a) => a,
        Err(answer) => return answer,
    };
    let Some(text) = body.last_user_text().filter(|t| !t.trim().is_empty()) else {
        return error::invalid(
            "invalid_messages",
            "messages: no user message with text (expected the last user message to be the task)",
        );
    };
    let session = match session_name(&headers, body.user.as_deref()) {
        Ok(s) => s,
        Err(answer) => return answer,
    };
    let request_id = match request_id(&headers) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let (chat_type, peer) = match session {
        Some(name) => ("direct", name),
        None => ("task", request_id.to_string()),
    };
    let agent_id = match clawbus_core::ids::AgentId::parse(&agent) {
        Ok(id) => id,
        Err(e) => return error::invalid("model_not_found", e),
    };
    let origin = Origin {
        channel: CHANNEL,
        chat_type: chat_type.into(),
        peer,
        ..Origin::api()
    };
    let req = Request::new(
        Target::Routed {
            agent: Some(agent_id),
        },
        request_id.clone(),
        text,
        CHANNEL.as_str(),
        origin,
    );
    let admission = match state.ingress().submit(req).await {
        Ok(a) => a,
        Err(IngressError::UnknownAgent(_)) => return error::unknown_model(&body.model, &[]),
        Err(e @ IngressError::Unbound(_)) => return error::invalid("unbound", e.to_string()),
        Err(e) => return error::failure(super::admit::failure(e)),
    };
    let model = format!("agent:{agent}");
    let created = created(&state);
    if body.stream.unwrap_or(false) {
        return stream::respond(&state, &admission.task, model, created).await;
    }
    let waited = state
        .ingress()
        .wait(&request_id, COMPLETION_WAIT, &admission.task)
        .await;
    let rec = match waited {
        Ok(Waited::Ended(rec)) => rec,
        Ok(Waited::Pending(_)) => {
            // Sent again, the request would start the turn a second time.
            return error::no_retry(
                StatusCode::GATEWAY_TIMEOUT,
                ErrorType::Timeout,
                "timeout",
                format!(
                    "no answer within {}s; the task {} goes on (GET /v1/tasks/{})",
                    COMPLETION_WAIT.as_secs(),
                    admission.task.task_id,
                    admission.task.task_id
                ),
            );
        }
        Err(e) => return error::failure(super::admit::failure(e)),
    };
    completion(&rec, &model, created)
}

/// The text of a successful task's result.
pub(super) fn result_text(rec: &TaskRecord) -> Option<String> {
    rec.result().map(clawbus_core::task::TaskResult::shown)
}

/// The id of the completion: the task's.
pub(super) fn completion_id(rec: &TaskRecord) -> String {
    format!("chatcmpl-{}", rec.task_id.simple())
}

/// OpenAI's `finish_reason` of a task's result: `"length"` when the output-token limit cut the
/// answer off (`truncated`), else `"stop"`.
pub(crate) fn finish_reason(result: &serde_json::Value) -> &'static str {
    if clawbus_core::task::TaskResult::is_truncated(result) {
        "length"
    } else {
        "stop"
    }
}

/// The `chat.completion` object of a finished task, or the error it ended with.
fn completion(rec: &TaskRecord, model: &str, created: u64) -> Response {
    let (Some(content), Some(result)) = (result_text(rec), rec.result()) else {
        return task_error(rec);
    };
    Json(json!({
        "id": completion_id(rec),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": content },
            "finish_reason": finish_reason(result),
            "logprobs": null,
        }],
    }))
    .into_response()
}

/// The answer of a task that ended without a result: 422 with `x-should-retry: false`. The
/// request was taken and its turn ran (tools and all); the SDKs retry a 5xx (the official Python
/// one twice by default, each a new task running the turn again) but not a 422, and the Stainless
/// SDKs obey `x-should-retry` whatever the status.
fn task_error(rec: &TaskRecord) -> Response {
    error::no_retry(
        StatusCode::UNPROCESSABLE_ENTITY,
        ErrorType::Server,
        &format!("task_{}", rec.state.as_str()),
        format!(
            "task {} {}: {}",
            rec.task_id,
            rec.state.as_str(),
            rec.error().unwrap_or("no result")
        ),
    )
}
