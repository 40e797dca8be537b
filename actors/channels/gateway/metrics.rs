//! `GET /metrics`: the metrics registry in the Prometheus text format 0.0.4.
//!
//! The route needs the gateway's bearer token, like everything under `/v1`. OpenClaw-style
//! gateways often leave metrics open on loopback, but here loopback is not a boundary we can
//! rely on: `--allow-public` exposes the same router, other local users and containers sharing the
//! host's network reach 127.0.0.1, and the series name agents, lanes and how busy they are.
//! Prometheus sends the token with `authorization: { credentials_file: <state-dir>/gateway.token }`
//! in its scrape config, so requiring it costs one line there.

use super::api::ApiState;
use super::token;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clawbus_runtime::metrics::PROMETHEUS_CONTENT_TYPE;

/// The `/metrics` route, merged into the gateway's router by `api::router`.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|t| token::matches(&state.token, t.trim())) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "metrics need header Authorization: Bearer <token> (see <state-dir>/gateway.token)\n",
        )
            .into_response();
    }
    (
        [(header::CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE)],
        state.metrics.render_prometheus(),
    )
        .into_response()
}
