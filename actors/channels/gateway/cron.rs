//! Cron jobs over HTTP, under `/v1/cron`: list and add; show, change (`PATCH`, the fields given
//! only) and remove one; enable, disable, run now; its run history.

use super::api::{ApiState, Failure};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawbus_runtime::cron::{CronError, FlatSpec, JobId, JobSpec, StoreError};
use serde_json::json;

/// The cron routes (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/cron", get(list).post(add))
        .route("/cron/{id}", get(show).patch(change).delete(remove))
        .route("/cron/{id}/enable", post(enable))
        .route("/cron/{id}/disable", post(disable))
        .route("/cron/{id}/run", post(run))
        .route("/cron/{id}/runs", get(runs))
}

/// The answer to a failed cron operation: 400 a refused spec (nothing stored), 404 an unknown
/// job, 409 an id taken or a job already running, 503 the store.
pub(super) fn failure(e: CronError) -> Failure {
    match e {
        CronError::Spec(e) => Failure::new(StatusCode::BAD_REQUEST, "invalid_job", e.to_string()),
        CronError::Store(e @ StoreError::UnknownJob(_)) => {
            Failure::new(StatusCode::NOT_FOUND, "unknown_job", e.to_string())
        }
        e @ (CronError::TooFrequent { .. } | CronError::TooManyJobs { .. }) => {
            Failure::new(StatusCode::BAD_REQUEST, "invalid_job", e.to_string())
        }
        CronError::Store(e @ StoreError::Exists(_)) => {
            Failure::new(StatusCode::CONFLICT, "job_exists", e.to_string())
        }
        e @ CronError::Running(_) => {
            Failure::new(StatusCode::CONFLICT, "job_running", e.to_string())
        }
        e @ CronError::Fire { .. } => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "fire_failed",
            e.to_string(),
        ),
        e => {
            tracing::error!(error = %e, "Cron store error in the API.");
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, "storage", e.to_string())
        }
    }
}

fn cron_error(e: CronError) -> Response {
    failure(e).into_response()
}

/// A path id as a job id (a malformed one names no job: 404).
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
fn job_id(id: &str) -> Result<JobId, Response> {
    parse_job_id(id).map_err(IntoResponse::into_response)
}

/// A job id given by a caller (a malformed one names no job: 404 `unknown_job`).
pub(super) fn parse_job_id(id: &str) -> Result<JobId, Failure> {
    JobId::parse(id).map_err(|_| {
        Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_job",
            format!("unknown cron job {id:?}"),
        )
    })
}

async fn list(State(state): State<ApiState>) -> Response {
    match state.cron.list().await {
        Ok(jobs) => Json(json!({ "jobs": jobs })).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn add(
    State(state): State<ApiState>,
    body: Result<Json<JobSpec>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let spec = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    match state.cron.add(&spec).await {
        Ok(job) => (StatusCode::CREATED, Json(job)).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn show(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match state.cron.list().await {
        Ok(jobs) => match jobs.into_iter().find(|v| v.job.id == id) {
            Some(view) => Json(view).into_response(),
            None => cron_error(StoreError::UnknownJob(id).into()),
        },
        Err(e) => cron_error(e),
    }
}

/// Changes the fields of job `id` that `flat` gives, as `PATCH /v1/cron/{id}` does.
pub(super) async fn change_job(
    state: &ApiState,
    id: &JobId,
    mut flat: FlatSpec,
) -> Result<clawbus_runtime::cron::Job, Failure> {
    flat.id = None;
    let base = match state.cron.store().job(id).await {
        Ok(Some(job)) => JobSpec::of_job(&job),
        Ok(None) => return Err(failure(StoreError::UnknownJob(id.clone()).into())),
        Err(e) => return Err(failure(e.into())),
    };
    let agent = base.agent.clone();
    let spec = flat
        .into_spec(&agent, Some(base))
        .map_err(|message| Failure::new(StatusCode::BAD_REQUEST, "invalid_job", message))?;
    state.cron.update(id, &spec).await.map_err(failure)
}

async fn change(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<FlatSpec>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let flat = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    match change_job(&state, &id, flat).await {
        Ok(job) => Json(job).into_response(),
        Err(f) => f.into_response(),
    }
}

async fn remove(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match state.cron.remove(&id).await {
        Ok(()) => Json(json!({ "removed": id })).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn set_enabled(state: ApiState, id: String, enabled: bool) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match state.cron.set_enabled(&id, enabled).await {
        Ok(job) => Json(job).into_response(),
        Err(e) => cron_error(e),
    }
}

async fn enable(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    set_enabled(state, id, true).await
}

async fn disable(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    set_enabled(state, id, false).await
}

/// Fires job `id` now, out of schedule, as `POST /v1/cron/{id}/run` does.
pub(super) async fn run_job(state: &ApiState, id: &JobId) -> Result<serde_json::Value, Failure> {
    let fired = state.cron.run_now(id).await.map_err(failure)?;
    Ok(json!({
        "job_id": fired.job_id,
        "scheduled_ms": fired.scheduled_ms,
        "request_id": fired.request_id.as_str(),
        "task_id": fired.task_id,
        "duplicate": fired.duplicate,
    }))
}

async fn run(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match run_job(&state, &id).await {
        Ok(fired) => (StatusCode::ACCEPTED, Json(fired)).into_response(),
        Err(f) => f.into_response(),
    }
}

async fn runs(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let id = match job_id(&id) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    match state.cron.runs(&id).await {
        Ok(runs) => Json(json!({ "runs": runs })).into_response(),
        Err(e) => cron_error(e),
    }
}
