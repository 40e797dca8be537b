//! The frames of OpenClaw's gateway protocol: a client sends `req`, the server answers `res` and
//! pushes `event`; every frame is one JSON text message.

use super::methods::Method;
use serde::Serialize;
use serde_json::Value;

/// The protocol version spoken (OpenClaw's `PROTOCOL_VERSION`).
pub(crate) const PROTOCOL_VERSION: u64 = 4;
/// The longest request id accepted.
const MAX_ID_LEN: usize = 256;

/// A request from the client: `{type: "req", id, method, params?}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// The client's id for it, echoed on the `res`.
    pub id: String,
    /// The method named, as the client wrote it.
    pub method: String,
    /// The parameters (`{}` when absent).
    pub params: Value,
}

impl Request {
    /// The method, when the server knows it.
    pub(crate) fn known_method(&self) -> Option<Method> {
        Method::parse(&self.method)
    }
}

/// The error codes of an error `res`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub(crate) enum ErrorCode {
    /// The frame or its params are not what the method takes.
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// The gateway token is missing or wrong.
    Unauthorized,
    /// The connection's scopes do not allow the method (`missing scope: …`).
    Forbidden,
    /// No such agent, task, session, job or approval.
    NotFound,
    /// The request conflicts with what exists (a reused idempotency key, an answered approval).
    Conflict,
    /// The gateway cannot do it now (storage, too many requests in flight).
    Unavailable,
    /// A wait ran out.
    AgentTimeout,
}

/// The `error` of a failed `res`: `{code, message, details?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ErrorShape {
    /// What kind of failure.
    pub code: ErrorCode,
    /// What was wrong, naming the field or entity.
    pub message: String,
    /// More, for programs: the HTTP API's code of the same failure, the method named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorShape {
    /// An error without details.
    pub(crate) fn new(code: ErrorCode, message: impl std::fmt::Display) -> Self {
        Self {
            code,
            message: message.to_string(),
            details: None,
        }
    }

    /// `params` did not hold what the method takes.
    pub(crate) fn invalid(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
}

impl From<crate::gateway::api::Failure> for ErrorShape {
    fn from(f: crate::gateway::api::Failure) -> Self {
        use axum::http::StatusCode;
        let code = match f.status {
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            StatusCode::CONFLICT => ErrorCode::Conflict,
            StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
            StatusCode::GATEWAY_TIMEOUT => ErrorCode::AgentTimeout,
            s if s.is_client_error() => ErrorCode::InvalidRequest,
            _ => ErrorCode::Unavailable,
        };
        Self {
            code,
            message: f.message,
            details: Some(serde_json::json!({ "code": f.code })),
        }
    }
}

/// The events the server pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub(crate) enum EventName {
    /// The first frame of a connection: `{nonce, ts}`.
    #[serde(rename = "connect.challenge")]
    ConnectChallenge,
    /// A run's stream: lifecycle, assistant deltas, tools.
    #[serde(rename = "agent")]
    Agent,
    /// A run as a chat sees it, only its answer: `final`, `error`, `aborted`.
    #[serde(rename = "chat")]
    Chat,
    /// A task was queued or ended.
    #[serde(rename = "task")]
    Task,
    /// A cron job fired, finished or skipped a fire.
    #[serde(rename = "cron")]
    Cron,
    /// An `exec` waits for a person's answer.
    #[serde(rename = "exec.approval.requested")]
    ExecApprovalRequested,
    /// An approval request was answered or expired.
    #[serde(rename = "exec.approval.resolved")]
    ExecApprovalResolved,
    /// The connection is alive: every `tickIntervalMs`.
    #[serde(rename = "tick")]
    Tick,
    /// A session's transcript committed a message (the user's, the answer, a tool's).
    #[serde(rename = "session.message")]
    SessionMessage,
}

impl EventName {
    /// Every event, as `hello-ok` advertises them.
    pub(crate) const ALL: [Self; 9] = [
        Self::ConnectChallenge,
        Self::Agent,
        Self::Chat,
        Self::Task,
        Self::Cron,
        Self::ExecApprovalRequested,
        Self::ExecApprovalResolved,
        Self::Tick,
        Self::SessionMessage,
    ];

    /// The event's name on the wire.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ConnectChallenge => "connect.challenge",
            Self::Agent => "agent",
            Self::Chat => "chat",
            Self::Task => "task",
            Self::Cron => "cron",
            Self::ExecApprovalRequested => "exec.approval.requested",
            Self::ExecApprovalResolved => "exec.approval.resolved",
            Self::Tick => "tick",
            Self::SessionMessage => "session.message",
        }
    }
}

/// A frame the server sends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Frame {
    /// The answer to a `req`.
    Res {
        /// The request's id; `null` when the frame was too broken to carry one.
        id: Option<String>,
        /// Whether it succeeded.
        ok: bool,
        /// The result, on success.
        #[serde(skip_serializing_if = "Option::is_none")]
        payload: Option<Value>,
        /// What went wrong, otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorShape>,
    },
    /// Something that happened.
    Event {
        /// Which event.
        event: EventName,
        /// Its data.
        payload: Value,
        /// The connection's event counter, from 1 (absent on the challenge).
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
    },
}

impl Frame {
    /// A successful `res`.
    pub(crate) fn ok(id: &str, payload: Value) -> Self {
        Self::Res {
            id: Some(id.to_string()),
            ok: true,
            payload: Some(payload),
            error: None,
        }
    }

    /// A failed `res`.
    pub(crate) fn err(id: Option<&str>, error: ErrorShape) -> Self {
        Self::Res {
            id: id.map(str::to_string),
            ok: false,
            payload: None,
            error: Some(error),
        }
    }

    /// The frame as the JSON text sent.
    pub(crate) fn to_text(&self) -> String {
        // Every field is a string, a bool, a JSON value or a unit enum: encoding cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                r#"{{"type":"event","event":"tick","payload":{{"encodeError":{:?}}}}}"#,
                e.to_string()
            )
        })
    }
}

/// Why a text message is not a request: the error `res` to answer it with (its `id` when one
/// could be read).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadFrame {
    /// The request's id, when the frame carried a readable one.
    pub id: Option<String>,
    /// What was wrong.
    pub error: ErrorShape,
}

impl BadFrame {
    /// The error `res` answering it.
    pub(crate) fn answer(&self) -> Frame {
        Frame::err(self.id.as_deref(), self.error.clone())
    }
}

/// Reads a client's text message as a request, naming what was wrong otherwise.
pub(crate) fn parse_request(text: &str) -> Result<Request, BadFrame> {
    let bad = |id: Option<String>, message: String| BadFrame {
        id,
        error: ErrorShape::invalid(message),
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| bad(None, format!("frame: not JSON ({e})")))?;
    let Value::Object(mut obj) = value else {
        return Err(bad(
            None,
            "frame: not a JSON object (expected {\"type\":\"req\",\"id\",\"method\",\"params\"})"
                .into(),
        ));
    };
    let id = match obj.remove("id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_ID_LEN => Some(id),
        Some(Value::String(id)) if id.is_empty() => {
            return Err(bad(
                None,
                "field \"id\": empty (expected a request id)".into(),
            ));
        }
        Some(Value::String(_)) => {
            return Err(bad(
                None,
                format!("field \"id\": longer than {MAX_ID_LEN} characters"),
            ));
        }
        Some(other) => {
            return Err(bad(None, format!("field \"id\": {other} is not a string")));
        }
        None => None,
    };
    match obj.get("type") {
        Some(Value::String(t)) if t == "req" => {}
        Some(other) => {
            return Err(bad(
                id,
                format!("field \"type\": {other} (a client sends only \"req\" frames)"),
            ));
        }
        None => return Err(bad(id, "field \"type\": missing (expected \"req\")".into())),
    }
    let Some(id) = id else {
        return Err(bad(
            None,
            "field \"id\": missing (expected a request id)".into(),
        ));
    };
    let method = match obj.remove("method") {
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(other) => {
            return Err(bad(
                Some(id),
                format!("field \"method\": {other} is not a method name"),
            ));
        }
        None => return Err(bad(Some(id), "field \"method\": missing".into())),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p,
        Some(other) => {
            return Err(bad(
                Some(id),
                format!("field \"params\": {other} is not an object"),
            ));
        }
    };
    Ok(Request { id, method, params })
}
