//! `GET /v1/nodes`: the live nodes of the bus this gateway is on, from their heartbeats (see
//! [`clawbus_runtime::system::nodes`]): id, hosted agents, lanes, gateway URL, link to the
//! server (`clawbus nodes`). On a bus no other node shares (the embedded one) the list is this
//! node alone, read live (no heartbeat is written there).

use super::api::{ApiState, Failure};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clawbus_runtime::system::nodes::{NODES_STORE, live_nodes};
use serde_json::json;

/// The nodes route.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/nodes", get(nodes))
}

async fn nodes(State(state): State<ApiState>) -> Response {
    let unavailable = |e: &dyn std::fmt::Display| {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string()).into_response()
    };
    if !state.kv.is_shared() {
        return Json(json!({ "nodes": [state.node.info().await] })).into_response();
    }
    let kv = match state.kv.open(NODES_STORE).await {
        Ok(kv) => kv,
        Err(e) => return unavailable(&e),
    };
    match live_nodes(kv.as_ref()).await {
        Ok(nodes) => Json(json!({ "nodes": nodes })).into_response(),
        Err(e) => unavailable(&e),
    }
}
