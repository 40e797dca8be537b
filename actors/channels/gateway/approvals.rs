//! Approval requests over HTTP: `GET /v1/approvals` lists them, `POST /v1/approvals/{id}`
//! `{decision: "allow" | "deny", always?}` answers one.

use super::api::{ApiState, Failure};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawbus_runtime::approvals::{ApprovalError, ApprovalRecord, ApprovalState};
use serde::Deserialize;

/// The approval routes (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/approvals", get(list))
        .route("/approvals/{id}", post(resolve).get(show))
}

/// Query of `GET /v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only requests in this state (`pending`, `allowed`, `denied`, `expired`).
    #[serde(default)]
    pub state: Option<ApprovalState>,
}

/// Body of `POST /v1/approvals/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    /// `allow` or `deny`.
    pub decision: DecisionKind,
    /// With `allow`: add the command to the agent's allowlist for good.
    #[serde(default)]
    pub always: bool,
}

/// The answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DecisionKind {
    /// Run it.
    Allow,
    /// Do not run it.
    Deny,
}

/// An approvals error as the API reports it: 404 unknown, 409 already answered, 503 storage.
pub(super) fn failure(e: ApprovalError) -> Failure {
    match e {
        ApprovalError::NotFound(_) => {
            Failure::new(StatusCode::NOT_FOUND, "unknown_approval", e.to_string())
        }
        ApprovalError::Settled { .. } => {
            Failure::new(StatusCode::CONFLICT, "already_settled", e.to_string())
        }
        e => {
            tracing::error!(error = %e, "Approvals store error in the API.");
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, "storage", e.to_string())
        }
    }
}

fn store_error(e: ApprovalError) -> Response {
    failure(e).into_response()
}

/// The requests (in `wanted`, else all), newest first.
pub(super) async fn list_requests(
    state: &ApiState,
    wanted: Option<ApprovalState>,
) -> Result<Vec<ApprovalRecord>, Failure> {
    let all = state.approvals.list().await.map_err(failure)?;
    Ok(all
        .into_iter()
        .filter(|r| wanted.is_none_or(|s| r.state == s))
        .collect())
}

async fn list(
    State(state): State<ApiState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    super::api::listing(query, "approvals", |q: ListQuery| async move {
        list_requests(&state, q.state).await
    })
    .await
}

async fn show(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    match state.approvals.get(&id).await {
        Ok(Some(rec)) => Json(rec).into_response(),
        Ok(None) => store_error(ApprovalError::NotFound(id)),
        Err(e) => store_error(e),
    }
}

async fn resolve(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<Decision>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let allow = body.decision == DecisionKind::Allow;
    match state.approvals.resolve(&id, allow, body.always).await {
        Ok(rec) => Json(rec).into_response(),
        Err(e) => store_error(e),
    }
}
