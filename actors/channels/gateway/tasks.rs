//! Task listings and trees over HTTP: `GET /v1/tasks[?state=S&agent=ID]` and
//! `GET /v1/tasks/{id}/tree`, `POST /v1/tasks/{id}/retry`. (A cancel reaches a task's descendants
//! through the task coordinator.)

use super::answer::TaskAnswer;
use super::api::{ApiState, Failure, bus_error, error, query};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bus::{TaskRecord, TaskState};
use clawbus_runtime::coordinator::tree::{descendants, parent_of};
use clawbus_runtime::ingress::IngressError;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

/// The routes of task listings and trees.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/tasks", get(list_route))
        .route("/tasks/{id}/tree", get(tree))
        .route("/tasks/{id}/retry", axum::routing::post(retry))
}

/// The query of `GET /v1/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only tasks in this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Only tasks posted to this agent.
    #[serde(default)]
    pub agent: Option<String>,
}

fn parse_state(s: &str) -> Option<TaskState> {
    serde_json::from_value(Value::String(s.to_string())).ok()
}

/// The tasks in the store (in `state`, posted to `agent`), oldest first, as `GET /v1/tasks`
/// lists them: 400 `invalid_query` an unknown state, 404 `unknown_agent`.
pub(super) async fn list_rows(
    state: &ApiState,
    wanted: Option<&str>,
    agent: Option<&str>,
) -> Result<Vec<Value>, Failure> {
    Ok(list(state, wanted, agent).await?.iter().map(row).collect())
}

/// The task records of [`list_rows`].
pub(super) async fn list(
    state: &ApiState,
    wanted: Option<&str>,
    agent: Option<&str>,
) -> Result<Vec<TaskRecord>, Failure> {
    let wanted = match wanted.map(|s| (s, parse_state(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((s, None)) => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "state {s:?}: expected queued, running, succeeded, failed, cancelled, timed_out or dead_lettered"
                ),
            ));
        }
    };
    if let Some(agent) = agent.filter(|a| state.config.agent(a).is_none()) {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("no agent \"{agent}\""),
        ));
    }
    let all = state.bus.tasks().await.map_err(Failure::bus)?;
    let topic = agent.map(bus::Topic::agent);
    Ok(all
        .into_iter()
        .filter(|r| wanted.is_none_or(|s| r.state == s))
        .filter(|r| topic.as_ref().is_none_or(|t| r.envelope.topic == *t))
        .collect())
}

async fn list_route(
    State(state): State<ApiState>,
    q: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(answer) => return answer,
    };
    match list_rows(&state, q.state.as_deref(), q.agent.as_deref()).await {
        Ok(tasks) => Json(json!({ "tasks": tasks })).into_response(),
        Err(f) => f.into_response(),
    }
}

/// A task as a listing shows it: its view plus parent, attempts and times.
pub(super) fn row(r: &TaskRecord) -> Value {
    let mut v = serde_json::to_value(TaskAnswer::of(r, false)).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("parent".into(), json!(parent_of(r)));
        obj.insert("attempts".into(), json!(r.attempts));
        obj.insert("created_ms".into(), json!(r.created_ms));
        obj.insert("updated_ms".into(), json!(r.updated_ms));
        obj.remove("duplicate");
    }
    v
}

async fn tree(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let Ok(task_id) = Uuid::parse_str(&id) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_task_id",
            format!("{id:?} is not a task id (a UUID)"),
        );
    };
    let all = match state.bus.tasks().await {
        Ok(all) => all,
        Err(e) => return bus_error(e),
    };
    let Some(root) = all.iter().find(|r| r.task_id == task_id) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_task",
            format!("no task {id}"),
        );
    };
    let mut nodes = vec![json!({ "depth": 0, "task": row(root) })];
    nodes.extend(
        descendants(&all, task_id)
            .into_iter()
            .map(|(depth, r)| json!({ "depth": depth, "task": row(r) })),
    );
    (StatusCode::OK, Json(json!({ "tree": nodes }))).into_response()
}

/// `POST /v1/tasks/{id}/retry`: a failed or dead-lettered task runs again as its next attempt,
/// under the same request id (as re-posting the same request would); any other task answers
/// 409 with its record.
async fn retry(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let Ok(task_id) = Uuid::parse_str(&id) else {
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
    if !record.state.is_retryable_end() {
        return (StatusCode::CONFLICT, Json(TaskAnswer::of(&record, false))).into_response();
    }
    match state.ingress().resubmit(&record.envelope).await {
        Ok(admission) => (
            StatusCode::ACCEPTED,
            Json(TaskAnswer::of(&admission.task, admission.duplicate)),
        )
            .into_response(),
        Err(IngressError::Bus(e)) => bus_error(e),
        Err(e) => super::admit::failure(e).into_response(),
    }
}
