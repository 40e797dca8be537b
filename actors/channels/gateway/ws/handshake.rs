//! The handshake: the server's `connect.challenge`, the client's `req connect`, and `hello-ok`.
//!
//! The first frame of the client must be `req connect`; anything else is answered with an error
//! `res` and the connection is closed (1008), as OpenClaw does. A wrong or missing token closes
//! it with 1008 and the reason; a protocol range without version 4 with 1002.

use super::device::{self, DeviceParams, Signed};
use super::frames::{ErrorCode, ErrorShape, EventName, Frame, PROTOCOL_VERSION, Request};
use super::methods::Method;
use super::outbox::{CLOSE_POLICY, CLOSE_PROTOCOL};
use crate::gateway::api::ApiState;
use crate::gateway::token;
use serde::Deserialize;
use serde_json::{Value, json};

/// How often `tick` is sent.
pub const TICK_INTERVAL_MS: u64 = 30_000;

/// The `params` of `req connect` (unknown fields are ignored: clients send more).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConnectParams {
    /// The lowest protocol version the client speaks.
    pub min_protocol: u64,
    /// The highest protocol version the client speaks.
    pub max_protocol: u64,
    /// Who the client is: `{id, version, platform, mode}`.
    #[serde(default)]
    pub client: Value,
    /// `operator` or `node`.
    #[serde(default)]
    pub role: Option<String>,
    /// The scopes asked for.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `{token}`: the gateway token.
    #[serde(default)]
    pub auth: Option<Auth>,
    /// A signed device identity, verified when present (see [`super::device`]).
    #[serde(default)]
    pub device: Option<DeviceParams>,
}

/// The scopes the gateway token allows: OpenClaw's operator scopes. Others asked for are not
/// granted (the token is the only credential here; a device identity adds none).
pub(super) const OPERATOR_SCOPES: &[&str] = &[
    "operator.admin",
    "operator.read",
    "operator.write",
    "operator.approvals",
    "operator.pairing",
    "operator.talk",
    "operator.questions",
    "operator.sessions.read",
    "operator.sessions.write",
];

/// The credentials of `req connect`.
#[derive(Debug, Deserialize)]
pub(super) struct Auth {
    /// The gateway token.
    #[serde(default)]
    pub token: Option<String>,
}

/// A refused handshake: the error `res` (when the frame had an id), then a close.
#[derive(Debug)]
pub(super) struct Refusal {
    /// The error `res`, when there is a request to answer.
    pub answer: Option<Box<Frame>>,
    /// The close code.
    pub code: u16,
    /// The close reason.
    pub reason: String,
}

impl Refusal {
    fn new(id: Option<&str>, error: ErrorShape, code: u16) -> Self {
        let reason = error.message.clone();
        Self {
            answer: Some(Box::new(Frame::err(id, error))),
            code,
            reason,
        }
    }
}

/// The client once connected.
#[derive(Debug, Clone)]
pub(super) struct Client {
    /// The role it connected as.
    pub role: String,
    /// The scopes it was granted.
    pub scopes: Vec<String>,
}

/// The `connect.challenge` event: `{nonce, ts}`.
pub(super) fn challenge(nonce: &str, ts: u64) -> Frame {
    Frame::Event {
        event: EventName::ConnectChallenge,
        payload: json!({ "nonce": nonce, "ts": ts }),
        seq: None,
    }
}

/// Checks the first request: `connect`, a protocol range holding version 4, the gateway token,
/// and a device identity's signature over `nonce` (this connection's challenge) when one is sent.
pub(super) fn accept(
    state: &ApiState,
    req: Request,
    nonce: &str,
) -> Result<(Client, Frame), Refusal> {
    if req.known_method() != Some(Method::Connect) {
        return Err(Refusal::new(
            Some(&req.id),
            ErrorShape::invalid(format!(
                "handshake: the first request must be \"connect\", not {:?}",
                req.method
            )),
            CLOSE_POLICY,
        ));
    }
    let params: ConnectParams = serde_json::from_value(req.params).map_err(|e| {
        Refusal::new(
            Some(&req.id),
            ErrorShape::invalid(format!("connect params: {e}")),
            CLOSE_POLICY,
        )
    })?;
    if !(params.min_protocol..=params.max_protocol).contains(&PROTOCOL_VERSION) {
        return Err(Refusal::new(
            Some(&req.id),
            ErrorShape::invalid(format!(
                "protocol mismatch: the client speaks {}..={}, the server {PROTOCOL_VERSION}",
                params.min_protocol, params.max_protocol
            )),
            CLOSE_PROTOCOL,
        ));
    }
    let presented = params.auth.as_ref().and_then(|a| a.token.as_deref());
    match presented {
        Some(t) if token::matches(&state.token, t.trim()) => {}
        Some(_) => {
            return Err(Refusal::new(
                Some(&req.id),
                ErrorShape::new(ErrorCode::Unauthorized, "unauthorized: wrong gateway token"),
                CLOSE_POLICY,
            ));
        }
        None => {
            return Err(Refusal::new(
                Some(&req.id),
                ErrorShape::new(
                    ErrorCode::Unauthorized,
                    "unauthorized: connect needs auth.token (see <state-dir>/gateway.token)",
                ),
                CLOSE_POLICY,
            ));
        }
    }
    let role = params.role.clone().unwrap_or_else(|| "operator".into());
    if let Some(device) = &params.device {
        let text = |k: &str| {
            params
                .client
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let signed = Signed {
            client_id: text("id"),
            client_mode: text("mode"),
            role: &role,
            scopes: &params.scopes,
            token: presented.unwrap_or_default(),
            platform: text("platform"),
            device_family: text("deviceFamily"),
        };
        if let Err(bad) = device::verify(device, nonce, &signed, state.clock.now_ms()) {
            let error = ErrorShape {
                code: ErrorCode::InvalidRequest,
                message: bad.message.into(),
                details: Some(json!({ "code": bad.code, "reason": bad.reason })),
            };
            return Err(Refusal::new(Some(&req.id), error, CLOSE_POLICY));
        }
    }
    let (granted, refused): (Vec<String>, Vec<String>) = params
        .scopes
        .iter()
        .cloned()
        .partition(|s| OPERATOR_SCOPES.contains(&s.as_str()));
    if !refused.is_empty() {
        tracing::debug!(
            ?refused,
            "Scopes the gateway token does not allow; not granted."
        );
    }
    let client = Client {
        role,
        scopes: granted,
    };
    let hello = Frame::ok(&req.id, hello_ok(state, &client, &params.client));
    Ok((client, hello))
}

/// The `hello-ok` payload: protocol, server, features, snapshot, policy.
fn hello_ok(state: &ApiState, client: &Client, client_info: &Value) -> Value {
    let methods: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
    let events: Vec<&str> = EventName::ALL.iter().map(|e| e.as_str()).collect();
    let default_agent = state.config.agents.first().map(|a| a.id.to_string());
    json!({
        "type": "hello-ok",
        "protocol": PROTOCOL_VERSION,
        "server": {
            "version": env!("CARGO_PKG_VERSION"),
            "connId": uuid::Uuid::now_v7().to_string(),
        },
        "features": { "methods": methods, "events": events },
        "snapshot": {
            "presence": [],
            "health": { "ok": !state.shutdown.is_shutdown() },
            "stateVersion": { "presence": 0, "health": 0 },
            "uptimeMs": state.clock.now_ms().saturating_sub(state.started_ms),
            "sessionDefaults": { "defaultAgentId": default_agent, "mainKey": "main" },
        },
        "auth": { "role": client.role, "scopes": client.scopes, "client": client_info },
        "policy": {
            "maxPayload": state.config.gateway.max_body,
            "maxBufferedBytes": state.config.gateway.ws_max_buffered,
            "tickIntervalMs": TICK_INTERVAL_MS,
        },
    })
}
