//! `GET /v1/status`: how the running daemon stands: its agents with their models and fallbacks,
//! and the circuit breaker of each model provider that has one (`clawbus status`).

use super::api::ApiState;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clawbus_runtime::model::BreakerStatus;
use serde_json::{Value, json};

/// The status route.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/status", get(status))
}

/// One breaker as JSON: `{provider, state, failures, retry_in_ms?}` (`state`: `closed`,
/// `half-open` or `open`; `retry_in_ms` while open).
pub(crate) fn breaker_json(b: &BreakerStatus) -> Value {
    let mut v = json!({
        "provider": b.provider,
        "state": b.state.to_string(),
        "failures": b.failures,
    });
    if let (Some(obj), Some(left)) = (v.as_object_mut(), b.retry_in) {
        obj.insert(
            "retry_in_ms".into(),
            json!(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
        );
    }
    v
}

async fn status(State(state): State<ApiState>) -> Response {
    let agents: Vec<Value> = state
        .config
        .agents
        .iter()
        .map(|a| {
            json!({
                "id": a.id.as_str(),
                "model": a.model.to_string(),
                "fallbacks": a.fallbacks.iter().map(ToString::to_string).collect::<Vec<_>>(),
            })
        })
        .collect();
    let breakers: Vec<Value> = state.breakers.statuses().iter().map(breaker_json).collect();
    Json(json!({ "agents": agents, "breakers": breakers })).into_response()
}
