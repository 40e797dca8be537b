//! `GET /v1/deliveries[?limit=N]`: what became of the newest deliveries (replies and
//! announcements sent out by the channels' delivery actors), oldest first: channel, target,
//! task or job, `delivered`/`failed`, tries, parts, last error. On a shared bus every node shows
//! the records of every node.

use super::api::{ApiState, Failure};
use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

/// Records listed when the query names no `limit`.
const DEFAULT_LIMIT: usize = 100;
/// The most records one listing returns.
const MAX_LIMIT: usize = 1000;

/// The deliveries route.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/deliveries", get(deliveries))
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<String>,
}

async fn deliveries(State(state): State<ApiState>, Query(q): Query<ListQuery>) -> Response {
    let limit = match q.limit.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            return Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("limit must be a whole number from 1 to {MAX_LIMIT}"),
            )
            .into_response();
        }
    };
    match state.deliveries.list(limit).await {
        Ok(records) => Json(json!({ "deliveries": records })).into_response(),
        Err(e) => {
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string()).into_response()
        }
    }
}
