//! A fake Anthropic Messages API on loopback: `POST /v1/messages` answered from a script of
//! [`AnthropicTurn`]s, streamed as the documented event sequence (`message_start`,
//! `content_block_start`, `ping`, `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`), recording every request body and its `x-api-key` / `anthropic-version`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::watch;

/// Token counts a scripted answer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnthropicUsage {
    /// `input_tokens` (the part not read from or written to the cache).
    pub input: u64,
    /// `output_tokens`.
    pub output: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write: u64,
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum AnthropicTurn {
    /// A 200 event stream: each value is one event's `data`, its `type` the `event:` name.
    Events(Vec<Value>),
    /// An HTTP error with an Anthropic error body.
    Http {
        /// Status code (429, 529, …).
        status: u16,
        /// `error.type` of the body.
        error_type: String,
        /// `retry-after` in seconds.
        retry_after: Option<u64>,
    },
    /// An answer that never ends, in one of the hostile shapes of [`Flood`](super::Flood).
    Flood(super::Flood),
    /// An HTTP error whose Anthropic error body carries this message (e.g. one that echoes the
    /// key it was sent).
    HttpMessage {
        /// Status code.
        status: u16,
        /// `error.message` of the body.
        message: String,
    },
}

impl AnthropicTurn {
    /// A text answer streamed in these pieces, ending with `end_turn`.
    pub fn text(pieces: &[&str], usage: AnthropicUsage) -> Self {
        let mut events = vec![message_start(usage)];
        events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "ping"}));
        for piece in pieces {
            events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.extend(message_end("end_turn", usage));
        Self::Events(events)
    }

    /// A short text, then a call of tool `name` (id `id`) whose input JSON streams in these
    /// fragments (split anywhere, mid-string included), ending with `tool_use`.
    pub fn tool_use(
        text: &str,
        id: &str,
        name: &str,
        fragments: &[&str],
        usage: AnthropicUsage,
    ) -> Self {
        let mut events = vec![message_start(usage)];
        events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}));
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.push(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for fragment in fragments {
            events.push(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": fragment}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 1}));
        events.extend(message_end("tool_use", usage));
        Self::Events(events)
    }

    /// Text, then an in-stream `error` event of this type (e.g. `overloaded_error`), and nothing
    /// after it.
    pub fn stream_error(text: &str, error_type: &str, message: &str) -> Self {
        Self::Events(vec![
            message_start(AnthropicUsage::default()),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "error", "error": {"type": error_type, "message": message}}),
        ])
    }

    /// An HTTP error: 429 `rate_limit_error`, 529 `overloaded_error`, anything else `api_error`.
    pub fn http(status: u16, retry_after: Option<u64>) -> Self {
        let error_type = match status {
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        Self::Http {
            status,
            error_type: error_type.to_owned(),
            retry_after,
        }
    }
}

fn message_start(usage: AnthropicUsage) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
        "model": "claude-fake", "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": usage.input, "output_tokens": 1,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
        },
    }})
}

fn message_end(stop_reason: &str, usage: AnthropicUsage) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": usage.output}}),
        json!({"type": "message_stop"}),
    ]
}

/// One request as received.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicRequest {
    /// The JSON body.
    pub body: Value,
    /// The `x-api-key` header.
    pub api_key: Option<String>,
    /// The `anthropic-version` header.
    pub version: Option<String>,
}

type Shared = Mutex<(Vec<AnthropicRequest>, VecDeque<AnthropicTurn>)>;

/// The fake server on `127.0.0.1:<random port>`; dropping it stops it.
pub struct AnthropicServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
}

impl AnthropicServer {
    /// Starts a server answering `turns` in order; past them it answers 500.
    pub async fn start(turns: Vec<AnthropicTurn>) -> std::io::Result<AnthropicServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new((Vec::new(), VecDeque::from(turns))));
        let (shutdown, mut stop) = watch::channel(false);
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async move {
                stop.wait_for(|&s| s).await.ok();
            });
            if let Err(e) = server.await {
                tracing::warn!(%addr, error = %e, "Fake Anthropic server stopped with an error.");
            }
        });
        Ok(AnthropicServer {
            addr,
            shared,
            shutdown,
        })
    }

    /// The base URL to configure: `http://127.0.0.1:PORT` (the client adds `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<AnthropicRequest> {
        lock(&self.shared).0.clone()
    }
}

impl Drop for AnthropicServer {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, (Vec<AnthropicRequest>, VecDeque<AnthropicTurn>)> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let request = AnthropicRequest {
        body: serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        api_key: header("x-api-key"),
        version: header("anthropic-version"),
    };
    let turn = {
        let mut state = lock(&shared);
        state.0.push(request);
        state.1.pop_front()
    };
    match turn {
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake anthropic: no turn left",
        )
            .into_response(),
        Some(AnthropicTurn::Http {
            status,
            error_type,
            retry_after,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body =
                json!({"type": "error", "error": {"type": error_type, "message": "scripted"}});
            let mut response = (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response();
            if let Some(secs) = retry_after.and_then(|s| s.to_string().parse().ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, secs);
            }
            response
        }
        Some(AnthropicTurn::Flood(flood)) => flood.response(()),
        Some(AnthropicTurn::HttpMessage { status, message }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = json!({"type": "error", "error": {"type": "authentication_error", "message": message}});
            (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response()
        }
        Some(AnthropicTurn::Events(events)) => {
            // One event per chunk, as a real server flushes them.
            let chunks: Vec<Result<String, Infallible>> = events
                .iter()
                .map(|e| {
                    let name = e.get("type").and_then(Value::as_str).unwrap_or("message");
                    Ok(format!("event: {name}\ndata: {e}\n\n"))
                })
                .collect();
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(futures::stream::iter(chunks)),
            )
                .into_response()
        }
    }
}
