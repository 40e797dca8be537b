//! `POST /v1/channels/{name}/messages`: the generic inbound of a named channel. The router is
//! consulted here, at ingress: the message goes to the agent and session its bindings choose.

use super::api::{ApiState, Failure, error, lane, request_id, submit_and_answer};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use clawbus_core::ids::{ChannelName, ChatType, Peer};
use clawbus_runtime::ingress::{Request, Target};
use clawbus_runtime::origin::Origin;
use serde::Deserialize;

/// The routes of channel inbound.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/channels/{name}/messages", post(post_message))
}

/// The body of `POST /v1/channels/{name}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelMessage {
    /// Who sent it on the channel.
    pub peer: String,
    /// `direct` (default), `group`, …
    #[serde(default)]
    pub chat_type: Option<String>,
    /// The message.
    pub text: String,
    /// Idempotency key (a chat app's message id); the `Idempotency-Key` header otherwise.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Wait for the answer before responding.
    #[serde(default)]
    pub wait: bool,
    /// How long to wait, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The lane the run takes a slot in (`main` when absent).
    #[serde(default)]
    pub lane: Option<String>,
}

async fn post_message(
    State(state): State<ApiState>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Result<Json<ChannelMessage>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    // "api" is the channel of scripts' tasks: no inbound may speak for it.
    let channel = match ChannelName::parse("channel", &channel) {
        Ok(c) if c.as_str() != "api" => c.to_string(),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_channel",
                format!(
                    "channel {}: expected {} (\"api\" is reserved for scripts)",
                    clawbus_core::ids::shown(&channel),
                    ChannelName::EXPECTED
                ),
            );
        }
    };
    let peer = match Peer::parse("peer", &body.peer) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_body", e.to_string()),
    };
    let chat_type = body.chat_type.as_deref().unwrap_or("direct");
    let chat_type = match ChatType::parse("chat_type", chat_type) {
        Ok(c) => c,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!("{e}, a word such as direct or group"),
            );
        }
    };
    if body.text.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "text: empty (expected the message)",
        );
    }
    let request_id = match request_id(body.request_id.as_deref(), &headers) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let lane = match lane(&state.config, body.lane.as_deref()) {
        Ok(l) => l,
        Err(answer) => return answer,
    };
    let origin = Origin {
        channel: channel.as_str().into(),
        chat_type: chat_type.to_string(),
        peer: peer.to_string(),
        lane,
        ..Origin::api()
    };
    let req = Request::new(
        Target::Routed { agent: None },
        request_id,
        body.text,
        format!("channel:{channel}"),
        origin,
    );
    let hint = |f: Failure| match f.code {
        "unbound" => Failure {
            message: format!(
                "{}; add a [[bindings]] entry to an agent, or [channels.{channel}] agent = \"<id>\" in clawbus.toml",
                f.message
            ),
            ..f
        },
        _ => f,
    };
    submit_and_answer(&state, req, body.wait, body.timeout_ms, hint).await
}
