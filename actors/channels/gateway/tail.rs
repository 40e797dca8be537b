//! `GET /v1/bus/tail?pattern=…`: bus traffic matching a topic pattern as server-sent events, one
//! message per event, for debugging. The stream reads from an ordinary bus subscription (a
//! bounded queue) and ends when the client goes away, which drops the subscription.

use super::api::{ApiState, bus_error, error, query};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bus::Topic;
use futures::StreamExt;
use serde::Deserialize;
use std::convert::Infallible;
use std::time::Duration;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The tail route (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/bus/tail", get(tail))
}

/// Query of `GET /v1/bus/tail`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TailQuery {
    /// The topic pattern (`>` when absent: everything).
    pub pattern: Option<String>,
}

async fn tail(
    State(state): State<ApiState>,
    q: Result<Query<TailQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(answer) => return answer,
    };
    let raw = q.pattern.as_deref().unwrap_or(">");
    let pattern = match Topic::parse(raw) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_pattern", e.to_string()),
    };
    let subscription = match state.bus.subscribe(pattern.clone()).await {
        Ok(s) => s,
        Err(e) => return bus_error(e),
    };
    tracing::info!(pattern = %pattern, "Bus tail started.");
    let stream = subscription.into_stream().map(|delivery| {
        let event = Event::default()
            .event(delivery.envelope().topic.as_str())
            .json_data(delivery.envelope())
            .unwrap_or_else(|e| Event::default().comment(format!("unencodable message: {e}")));
        Ok::<_, Infallible>(event)
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}
