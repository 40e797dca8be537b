//! `POST /v1/hooks/{name}`: inbound webhooks. The signature is the authentication (no bearer
//! token): `X-Clawbus-Timestamp: <Unix seconds>` and `X-Clawbus-Signature: sha256=<hex>`, the
//! HMAC-SHA256 of `"{timestamp}.{body}"` with the hook's secret, compared in constant time; a
//! timestamp further than the hook's tolerance from the clock is refused (see `crate::webhook::sign`).
//! The delivery id (`X-Clawbus-Delivery`) is the request id (`hook-<name>-<id>`), so a
//! redelivery runs once; a signature already used by another delivery id is a replay (see
//! `replay`). The body (JSON or text) is the task's text, for the hook's agent, in
//! `agent:<id>:webhook:<name>:<delivery id>` (or the configured session).

pub(crate) mod replay;

pub use replay::ReplayGuard;

use super::api::{ApiState, Failure, error, submit_and_answer};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use bus::RequestId;
use clawbus_core::config::{Config, WebhookDef};
use clawbus_runtime::ingress::{Request, Target};
use clawbus_runtime::origin::Origin;
use std::collections::BTreeMap;

use crate::webhook::sign as signature;
pub use crate::webhook::sign::{
    DELIVERY_HEADER, MissingSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER, secret_from_env, sign,
    signature_matches,
};

/// The channel on the origin and in session keys.
const CHANNEL: clawbus_core::ids::Channel = clawbus_core::ids::Channel::Webhook;
struct Hook {
    def: WebhookDef,
    secret: Vec<u8>,
}

/// The configured hooks with their secrets, read from the environment once, at start.
#[derive(Default)]
pub struct Hooks {
    hooks: BTreeMap<String, Hook>,
    /// The signatures already used; `None` only for a gateway with no store (then replays
    /// inside the tolerance are not caught).
    replay: Option<ReplayGuard>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets are never printed.
        f.debug_list().entries(self.hooks.keys()).finish()
    }
}

impl Hooks {
    /// Reads every `[webhooks.<name>] secret_env` from the environment.
    pub fn from_env(config: &Config) -> Result<Self, MissingSecret> {
        let mut hooks = BTreeMap::new();
        for (name, def) in &config.webhooks {
            let hook = Hook {
                def: def.clone(),
                secret: secret_from_env(name, def)?,
            };
            hooks.insert(name.clone(), hook);
        }
        Ok(Self {
            hooks,
            replay: None,
        })
    }

    /// Remembers used signatures in `guard` (what the gateway does over the system's store).
    pub(crate) fn with_replay_guard(mut self, guard: ReplayGuard) -> Self {
        self.replay = Some(guard);
        self
    }
}

/// The webhook route; mounted outside the bearer-token layer (the signature authenticates).
pub fn routes() -> Router<ApiState> {
    Router::new().route("/v1/hooks/{name}", post(deliver))
}

fn is_delivery_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The task text of a body: a JSON string's value, else the body as UTF-8 text.
fn body_text(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::String(s)) => Some(s),
        _ => Some(text.to_string()),
    }
}

async fn deliver(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let Some(hook) = state.hooks.hooks.get(&name) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_hook",
            format!("no webhook {name:?} (declare [webhooks.{name}] in clawbus.toml)"),
        );
    };
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "the request body is larger than [gateway] max_body = {} bytes",
                    state.config.gateway.max_body
                ),
            );
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_body", e.body_text()),
    };
    let verified = match signature::verify(
        &hook.secret,
        &headers,
        &body,
        state.clock.now_ms(),
        hook.def.tolerance,
    ) {
        Ok(v) => v,
        Err(refusal) => {
            tracing::warn!(hook = %name, reason = %refusal, "Webhook delivery refused.");
            return error(
                StatusCode::UNAUTHORIZED,
                refusal.code(),
                refusal.to_string(),
            );
        }
    };
    let delivery = headers.get(DELIVERY_HEADER).and_then(|v| v.to_str().ok());
    let Some(delivery) = delivery.filter(|d| is_delivery_id(d)) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_delivery",
            "header X-Clawbus-Delivery: missing or invalid (expected 1-128 characters of A-Z, a-z, 0-9, '-', '_' or '.')",
        );
    };
    let Some(text) = body_text(&body).filter(|t| !t.trim().is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "the body is empty or not UTF-8 (expected JSON or text for the agent)",
        );
    };
    if let Some(guard) = &state.hooks.replay {
        let claimed = guard.claim(
            &name,
            &verified.signature,
            delivery,
            verified.timestamp_s,
            hook.def.tolerance,
            state.clock.now_ms(),
        );
        match claimed.await {
            Ok(()) => {}
            Err(e @ replay::ClaimError::Replayed { .. }) => {
                tracing::warn!(hook = %name, delivery, error = %e, "Replayed webhook delivery refused.");
                return error(
                    StatusCode::UNAUTHORIZED,
                    "replayed_signature",
                    e.to_string(),
                );
            }
            Err(e) => {
                tracing::error!(hook = %name, error = %e, "Webhook signature store failed.");
                return error(StatusCode::SERVICE_UNAVAILABLE, "storage", e.to_string());
            }
        }
    }
    let request_id = match RequestId::parse(&format!("hook-{name}-{delivery}")) {
        Ok(id) => id,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_delivery", e),
    };
    let peer = hook
        .def
        .session
        .clone()
        .unwrap_or_else(|| delivery.to_string());
    let origin = Origin {
        channel: CHANNEL,
        chat_type: name.clone(),
        peer,
        ..Origin::api()
    };
    let req = Request::new(
        Target::Routed {
            agent: Some(hook.def.agent.clone()),
        },
        request_id,
        text,
        format!("webhook:{name}"),
        origin,
    );
    // The hook names its agent: a route that fails is an agent that does not exist.
    let refused = |f: Failure| match f.code {
        "unbound" => Failure {
            code: "unknown_agent",
            ..f
        },
        _ => f,
    };
    submit_and_answer(&state, req, false, None, refused).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_string_body_is_its_value() {
        assert_eq!(body_text(b"\"hi\"").as_deref(), Some("hi"));
        assert_eq!(body_text(b"{\"a\":1}").as_deref(), Some("{\"a\":1}"));
        assert_eq!(body_text(&[0xff]), None);
    }
}
