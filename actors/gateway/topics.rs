//! Tasks for shared topics: `POST /v1/topics/{topic}/tasks` posts to a topic agents subscribe to
//! (`subscribe = ["team.research"]`); exactly one subscriber runs each task.

use super::api::{ApiState, TaskRequest, body, error, lane, request_id, submit_and_answer};
use crate::origin::Origin;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use bus::Envelope;
use serde_json::json;

/// The topic routes (mounted under `/v1`, behind the token).
pub fn routes() -> Router<ApiState> {
    Router::new().route("/topics/{topic}/tasks", post(post_topic_task))
}

async fn post_topic_task(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    raw: Result<Json<TaskRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let req = match body(&state, raw) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let topic = match crate::config::subscribe::shared_topic(&topic) {
        Ok(t) => t,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_topic",
                format!("{e}; post to one agent with POST /v1/agents/{{id}}/tasks"),
            );
        }
    };
    if req.text.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "text: empty (expected the message for the agent)",
        );
    }
    if req.session.is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "session: not taken by a shared topic (each task runs in a session of its own on the agent that takes it)",
        );
    }
    if !state
        .config
        .agents
        .iter()
        .any(|a| a.subscribe.contains(&topic))
    {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_topic",
            format!(
                "no agent subscribes to topic \"{topic}\" (see subscribe in agents.d/<id>.toml)"
            ),
        );
    }
    let request_id = match request_id(req.request_id.as_deref(), &headers) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let mut origin = Origin::api();
    origin.lane = match lane(&state.config, req.lane.as_deref()) {
        Ok(l) => l,
        Err(answer) => return answer,
    };
    let mut env =
        origin.apply(Envelope::task(topic, request_id, json!({ "text": req.text })).from("http"));
    if let Some(ms) = req.deadline_ms {
        env.deadline = Some(state.clock.now_ms().saturating_add(ms));
    }
    submit_and_answer(&state, env, req.wait, req.timeout_ms).await
}
