//! Sessions and cancellation over HTTP: `GET /v1/sessions`, `GET /v1/sessions/{key}`,
//! `POST /v1/tasks/{id}/cancel`.

use super::api::{ApiState, TaskView, bus_error, error};
use crate::router::SessionKey;
use crate::session::transcript::Transcript;
use crate::session::{LiveInfo, SessionState};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The session routes (mounted under `/v1`, behind the token).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/sessions", get(list))
        .route("/sessions/{key}", get(show))
        .route("/tasks/{id}/cancel", post(cancel))
}

/// One session in a listing.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionRow {
    /// The session key.
    pub key: String,
    /// The agent.
    pub agent: String,
    /// The transcript id.
    pub session_id: String,
    /// `idle`, `processing`, or `stopped` (not live; on disk).
    pub state: String,
    /// Runs waiting in the session lane.
    pub queued: usize,
    /// Runs finished.
    pub turns: u64,
    /// Unix ms of the last run.
    pub updated_ms: u64,
    /// Prompt tokens reported so far.
    pub tokens_in: u64,
    /// Completion tokens reported so far.
    pub tokens_out: u64,
}

/// Query of `GET /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this agent's sessions.
    pub agent: Option<String>,
}

fn state_of(live: Option<LiveInfo>) -> (String, usize) {
    match live {
        Some(LiveInfo {
            state: SessionState::Processing,
            queued,
        }) => ("processing".into(), queued),
        Some(LiveInfo { queued, .. }) => ("idle".into(), queued),
        None => ("stopped".into(), 0),
    }
}

async fn list(
    State(state): State<ApiState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match super::api::query(query) {
        Ok(q) => q,
        Err(answer) => return answer,
    };
    if let Some(agent) = q
        .agent
        .as_deref()
        .filter(|a| state.config.agent(a).is_none())
    {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("no agent \"{agent}\""),
        );
    }
    let metas = match state.sessions.list(q.agent.as_deref()) {
        Ok(m) => m,
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string()),
    };
    let rows: Vec<SessionRow> = metas
        .into_iter()
        .map(|m| {
            let (st, queued) = state_of(state.live.get(&m.key).map(|l| *l));
            SessionRow {
                key: m.key,
                agent: m.agent,
                session_id: m.session_id.to_string(),
                state: st,
                queued,
                turns: m.turns,
                updated_ms: m.updated_ms,
                tokens_in: m.tokens_in,
                tokens_out: m.tokens_out,
            }
        })
        .collect();
    Json(json!({ "sessions": rows })).into_response()
}

async fn show(State(state): State<ApiState>, Path(key): Path<String>) -> Response {
    let key = match SessionKey::parse(&key) {
        Ok(k) => k,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_session_key", e),
    };
    let meta = match state.sessions.get(key.as_str()) {
        Ok(Some(m)) => m,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_session",
                format!("no session {key}"),
            );
        }
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string()),
    };
    let path = Transcript::path_for(&state.config.state_dir, &meta.agent, &meta.session_id);
    let entries = match read_entries(&path) {
        Ok(e) => e,
        Err(e) => {
            // The path stays in the log: the client learns nothing of the host's folders.
            tracing::error!(session = %key, path = %path.display(), error = %e, "Transcript unreadable.");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "transcript",
                format!("the transcript of session {key} cannot be read"),
            );
        }
    };
    let (st, queued) = state_of(state.live.get(key.as_str()).map(|l| *l));
    Json(json!({ "session": meta, "state": st, "queued": queued, "entries": entries }))
        .into_response()
}

/// Reads a transcript without repairing it (the session actor owns repairs): unreadable lines
/// are reported in place as `{"type":"unreadable"}`.
fn read_entries(path: &std::path::Path) -> std::io::Result<Vec<serde_json::Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|_| json!({ "type": "unreadable", "text": l }))
        })
        .collect())
}

async fn cancel(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let Ok(task_id) = uuid::Uuid::parse_str(&id) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_task_id",
            format!("{id:?} is not a task id (a UUID)"),
        );
    };
    let record = match state.bus.task(task_id).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_task",
                format!("no task {id}"),
            );
        }
        Err(e) => return bus_error(e),
    };
    if record.state.is_terminal() {
        return (StatusCode::CONFLICT, Json(TaskView::of(&record, false))).into_response();
    }
    let rec = match state
        .bus
        .cancel(&record.request_id, "cancelled by request")
        .await
    {
        Ok(rec) => rec,
        Err(e) => return bus_error(e),
    };
    // The work it started goes with it.
    match super::tasks::cancel_descendants(state.bus.as_ref(), task_id).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::info!(task_id = %task_id, descendants = n, "Descendants cancelled with their parent.")
        }
        Err(e) => {
            tracing::error!(task_id = %task_id, error = %e, "Could not cancel every descendant.")
        }
    }
    (StatusCode::OK, Json(TaskView::of(&rec, false))).into_response()
}
