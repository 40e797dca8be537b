//! Sessions and cancellation over HTTP: `GET /v1/sessions`, `GET /v1/sessions/{key}`,
//! `POST /v1/tasks/{id}/cancel`.

use super::api::{ApiState, TaskView, bus_error, error};
use crate::router::SessionKey;
use crate::session::view::SessionReader;
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

/// Read access to the sessions, from the API's state.
fn reader(state: &ApiState) -> SessionReader {
    SessionReader {
        index: state.sessions.clone(),
        live: state.live.clone(),
        state_dir: state.config.state_dir.clone(),
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
    let sessions = reader(&state);
    let metas = match sessions.list(q.agent.as_deref()) {
        Ok(m) => m,
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string()),
    };
    let rows: Vec<SessionRow> = metas
        .into_iter()
        .map(|m| {
            let (st, queued) = sessions.state(&m.key);
            SessionRow {
                key: m.key,
                agent: m.agent,
                session_id: m.session_id.to_string(),
                state: st.as_str().into(),
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
    let sessions = reader(&state);
    let meta = match sessions.get(key.as_str()) {
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
    let entries = match sessions.raw_entries(&meta) {
        Ok(e) => e,
        Err(e) => {
            // The path stays in the log: the client learns nothing of the host's folders.
            let path = sessions.transcript_path(&meta);
            tracing::error!(session = %key, path = %path.display(), error = %e, "Transcript unreadable.");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "transcript",
                format!("the transcript of session {key} cannot be read"),
            );
        }
    };
    let (st, queued) = sessions.state(key.as_str());
    Json(json!({ "session": meta, "state": st, "queued": queued, "entries": entries }))
        .into_response()
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
    // The work it started goes with it: the task coordinator cancels its descendants.
    (StatusCode::OK, Json(TaskView::of(&rec, false))).into_response()
}
