//! Errors in OpenAI's shape, `{"error": {"message", "type", "code"}}`, so the OpenAI SDKs raise
//! the right exception with the message.

use crate::gateway::api::Failure;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bus::BusError;
use serde_json::json;

/// OpenAI's error types (`error.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrorType {
    /// The request is wrong (bad body, unknown model, bad session name).
    InvalidRequest,
    /// The task failed or the store could not be reached.
    Server,
    /// The answer took longer than the endpoint waits.
    Timeout,
}

impl ErrorType {
    /// The name on the wire.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Server => "server_error",
            Self::Timeout => "timeout",
        }
    }
}

/// An error answer in OpenAI's shape.
pub(super) fn error(
    status: StatusCode,
    kind: ErrorType,
    code: &str,
    message: impl Into<String>,
) -> Response {
    (
        status,
        Json(json!({ "error": {
            "message": message.into(),
            "type": kind.as_str(),
            "param": null,
            "code": code,
        } })),
    )
        .into_response()
}

/// [`error`] with `x-should-retry: false`, the header the Stainless-built SDKs (the official
/// OpenAI ones among them) obey: for an answer whose request must not be sent again.
pub(super) fn no_retry(
    status: StatusCode,
    kind: ErrorType,
    code: &str,
    message: impl Into<String>,
) -> Response {
    let mut response = error(status, kind, code, message);
    response.headers_mut().insert(
        "x-should-retry",
        axum::http::HeaderValue::from_static("false"),
    );
    response
}

/// A 400 `invalid_request_error`.
pub(super) fn invalid(code: &str, message: impl std::fmt::Display) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        ErrorType::InvalidRequest,
        code,
        message.to_string(),
    )
}

/// The 404 for a `model` that names no agent.
pub(super) fn unknown_model(model: &str, known: &[String]) -> Response {
    error(
        StatusCode::NOT_FOUND,
        ErrorType::InvalidRequest,
        "model_not_found",
        format!(
            "The model {model:?} does not exist (expected agent:<id> or <id> of an agent: {})",
            known.join(", ")
        ),
    )
}

/// A bus error as OpenAI's shape: [`Failure::bus`]'s status, code and message.
pub(super) fn bus(e: BusError) -> Response {
    failure(Failure::bus(e))
}

/// A gateway [`Failure`] as OpenAI's shape: a 5xx is a `server_error`, the rest
/// `invalid_request_error`.
pub(super) fn failure(f: Failure) -> Response {
    let kind = if f.status.is_server_error() {
        ErrorType::Server
    } else {
        ErrorType::InvalidRequest
    };
    error(f.status, kind, f.code, f.message)
}
