//! A scripted OpenAI-compatible server on loopback, for tests and benchmarks; a fake
//! Anthropic Messages API ([`AnthropicServer`]); a fake Telegram Bot API ([`FakeBotApi`]).
//!
//! [`ScriptedServer::start`] serves a list of [`Turn`]s in order, one per
//! `POST /v1/chat/completions`, as real SSE (or plain JSON when the request has no
//! `stream: true`), and records every request body so tests assert on what was sent.
//! An exhausted script answers HTTP 500 naming the request number. Dropping the server stops it.
//! [`NatsServer`]: a real `nats-server` with JetStream on a free loopback port.
//! [`Browser`]: a real headless Chromium driven by `chromedriver` over W3C WebDriver.
//! [`chromium_or_skip`], [`FixtureSite`], [`Tripwire`]: for the `browser` tool's tests.
//! [`mcp_python_or_skip`]: the Python with the official MCP SDK, for the MCP tests.
//! [`cross_cpu_round_trip`]: how far apart two CPUs are, for benchmarks to print beside figures
//! that depend on it.

mod anthropic;
mod browser;
mod chromedriver;
mod cpus;
mod flood;
mod nats;
mod python;
mod telegram;
mod turn;

#[cfg(test)]
mod tests;

pub use browser::{FixtureSite, Tripwire, chromium_or_skip, processes_naming};
pub use chromedriver::{Browser, Element, WebDriverError};
pub use cpus::{CrossCpu, cross_cpu_round_trip};
pub use nats::NatsServer;
pub use python::mcp_python_or_skip;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, warn};

pub use anthropic::{AnthropicRequest, AnthropicServer, AnthropicTurn, AnthropicUsage};
pub use flood::{FLOOD_LIMIT, Flood};
pub use telegram::{FakeBotApi, SentMessage};
use turn::Completion;
pub use turn::{Gate, Turn};

type Responder = dyn Fn(&Value) -> Turn + Send + Sync;

enum Script {
    Turns(VecDeque<Turn>),
    Responder(Arc<Responder>),
}

struct Shared {
    /// Request bodies received, in order, and the script they consume (one lock: the n-th
    /// recorded request gets the n-th turn).
    state: Mutex<(Vec<Value>, Script)>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, (Vec<Value>, Script)> {
        // A poisoned lock only means a responder panicked; the data is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a request as in flight until dropped (after its body was sent).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(Arc::clone(shared))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A scripted OpenAI-compatible chat-completions server on `127.0.0.1:<random port>`.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
}

impl ScriptedServer {
    /// Starts a server answering `turns` in order, one per request.
    ///
    /// # Panics
    /// If no loopback port can be bound (test support: no test could run anyway).
    #[allow(
        clippy::expect_used,
        reason = "test support; see try_start for the fallible form"
    )]
    pub async fn start(turns: Vec<Turn>) -> ScriptedServer {
        Self::try_start(turns)
            .await
            .expect("scripted server: cannot bind 127.0.0.1:0")
    }

    /// Like [`start`](Self::start), returning the bind error instead of panicking.
    pub async fn try_start(turns: Vec<Turn>) -> std::io::Result<ScriptedServer> {
        Self::spawn(Script::Turns(turns.into())).await
    }

    /// Starts a server that computes each answer from the request body; it never runs out.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[allow(clippy::expect_used, reason = "test support; see try_with_responder")]
    pub async fn with_responder(
        f: impl Fn(&Value) -> Turn + Send + Sync + 'static,
    ) -> ScriptedServer {
        Self::try_with_responder(f)
            .await
            .expect("scripted server: cannot bind 127.0.0.1:0")
    }

    /// Like [`with_responder`](Self::with_responder), returning the bind error.
    pub async fn try_with_responder(
        f: impl Fn(&Value) -> Turn + Send + Sync + 'static,
    ) -> std::io::Result<ScriptedServer> {
        Self::spawn(Script::Responder(Arc::new(f))).await
    }

    async fn spawn(script: Script) -> std::io::Result<ScriptedServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (shutdown, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new((Vec::new(), script)),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            shutdown: rx.clone(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&shared));
        let mut stop = rx;
        tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async move {
                stop.wait_for(|&s| s).await.ok();
            });
            if let Err(e) = server.await {
                warn!(%addr, error = %e, "Scripted server stopped with an error.");
            }
        });
        debug!(%addr, "Scripted server listening.");
        Ok(ScriptedServer {
            addr,
            shared,
            shutdown,
        })
    }

    /// Base URL to give a client: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received so far, in order (a body that was not JSON is kept as a
    /// JSON string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().0.clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.shared.lock().0.len()
    }

    /// The most requests that were in flight at once (from arrival to the end of the answer).
    pub fn max_concurrency(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        // Ends hanging requests and the accept loop.
        self.shutdown.send_replace(true);
    }
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let guard = InFlight::enter(&shared);
    let request: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let (request_no, scripted) = {
        let mut state = shared.lock();
        state.0.push(request.clone());
        let request_no = state.0.len();
        let scripted = match &mut state.1 {
            Script::Turns(turns) => Ok(turns.pop_front()),
            Script::Responder(f) => Err(Arc::clone(f)),
        };
        (request_no, scripted)
    };
    let turn = match scripted {
        Ok(turn) => turn,
        Err(responder) => Some(responder(&request)),
    };
    let Some(turn) = turn else {
        warn!(request_no, "Scripted server has no turn left.");
        let msg = format!("scripted server: no turn left for request #{request_no}");
        return (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response();
    };
    let turn = match turn {
        Turn::Gated { gate, then } => {
            let mut stop = shared.shutdown.clone();
            tokio::select! {
                () = gate.opened() => *then,
                _ = stop.wait_for(|&s| s) => Turn::Hang,
            }
        }
        other => other,
    };
    debug!(request_no, "Scripted server answering.");
    match &turn {
        Turn::HttpError {
            status,
            body,
            retry_after,
        } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                body.clone(),
            )
                .into_response();
            if let Some(secs) = retry_after {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    secs.to_string()
                        .parse()
                        .unwrap_or(header::HeaderValue::from_static("0")),
                );
            }
            response
        }
        Turn::Endless { chunk_bytes } => {
            let content = "x".repeat(*chunk_bytes);
            let chunk = format!(
                "data: {}\n\n",
                serde_json::json!({
                    "id": "endless",
                    "object": "chat.completion.chunk",
                    "choices": [{ "index": 0, "delta": { "content": content } }],
                })
            );
            let stream = futures::stream::repeat(chunk).map(move |c| {
                let _held = &guard;
                Ok::<_, Infallible>(c)
            });
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(stream),
            )
                .into_response()
        }
        Turn::Hang | Turn::Gated { .. } => {
            let mut stop = shared.shutdown.clone();
            stop.wait_for(|&s| s).await.ok();
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "scripted server: shut down",
            )
                .into_response()
        }
        Turn::Flood(flood) => flood.response(guard),
        Turn::Raw { content_type, body } => (
            [(header::CONTENT_TYPE, content_type.clone())],
            body_with(guard, vec![body.clone()]),
        )
            .into_response(),
        Turn::Text { .. } | Turn::ToolCalls { .. } => {
            let model = request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("scripted");
            let completion = Completion {
                request_no,
                model,
                prompt_chars: request.get("messages").map_or(0, |m| m.to_string().len()),
                turn: &turn,
            };
            if request.get("stream").and_then(Value::as_bool) == Some(true) {
                let include_usage = request
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    == Some(true);
                let events = completion.sse_events(include_usage);
                let headers = [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::CACHE_CONTROL, "no-cache"),
                ];
                (headers, body_with(guard, events)).into_response()
            } else {
                let json = completion.json().to_string();
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    body_with(guard, vec![json]),
                )
                    .into_response()
            }
        }
    }
}

/// A body sent as these chunks, holding `guard` until the last one is gone.
fn body_with(guard: InFlight, chunks: Vec<String>) -> Body {
    let stream = futures::stream::iter(chunks).map(move |chunk| {
        let _held = &guard;
        Ok::<_, Infallible>(chunk)
    });
    Body::from_stream(stream)
}
