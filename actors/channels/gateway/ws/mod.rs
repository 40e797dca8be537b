//! The WebSocket gateway, on the HTTP port (`GET /` or `/ws` with an upgrade), speaking
//! OpenClaw's frame protocol version 4.
//!
//! - `frames`: `req` / `res` / `event` and error shapes, and the parsing of a client's frame.
//! - `handshake`: `connect.challenge`, `req connect` (token compared in constant time), `hello-ok`;
//!   `device`: a client's signed device identity, verified against the challenge nonce.
//! - `openclaw`: the one conversion layer between OpenClaw's shapes and the HTTP API's.
//! - `methods`: the methods and their dispatch onto what the HTTP API does; `runs`: the runs,
//!   `run_delivery`: what became of the delivery `agent --deliver` asked for;
//!   `ui_calls`: the methods only the Control UI calls; `scopes`: the scope each method needs.
//! - `events`: bus events (tasks, cron, approvals) to protocol events.
//! - `outbox`: the bounded, ordered output of one connection.
//!
//! Errors: a malformed frame, an unknown method or bad params get an error `res` and the
//! connection stays open; a first frame other than `req connect` gets an error `res`, then a
//! close (1008); a wrong token closes with 1008 and the reason; a frame over `maxPayload`
//! (`[gateway] max_body`) closes with 1009; a client whose queued output passes
//! `maxBufferedBytes` (`[gateway] ws_max_buffered`) is disconnected (1008, "slow consumer"); past
//! `[gateway] ws_max_connections` an upgrade answers 503. Connections still in their handshake
//! (no `Authorization: Bearer` on the upgrade) have their own [`MAX_UNAUTHENTICATED`] places and
//! `HANDSHAKE_TIMEOUT`; past those an upgrade without the header answers 503.

mod catalog_calls;
mod device;
mod events;
pub(crate) mod frames;
mod handshake;
pub(crate) mod methods;
mod openclaw;
mod outbox;
mod run_delivery;
mod runs;
mod scopes;
mod session_calls;
mod session_events;
#[cfg(test)]
mod tests;
mod ui_calls;

use super::api::{ApiState, error};
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use frames::{ErrorCode, ErrorShape, EventName, Frame};
use futures::StreamExt as _;
use futures::stream::SplitStream;
use outbox::{
    CLOSE_GOING_AWAY, CLOSE_NORMAL, CLOSE_POLICY, CLOSE_PROTOCOL, CLOSE_TOO_BIG, CLOSE_TRY_AGAIN,
    Outbox,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;

pub use handshake::TICK_INTERVAL_MS;

/// How long a client has to send `req connect` after the challenge.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the second answer of `agent` waits for the run's end when the client names no
/// `timeout` (OpenClaw's default).
const AGENT_FINAL_WAIT: Duration = Duration::from_secs(600);
/// Requests of one connection running at once; more are answered `UNAVAILABLE`.
const MAX_IN_FLIGHT: usize = 64;

/// The WebSocket routes (outside `/v1`: the handshake carries the token).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/", get(upgrade))
        .route("/ws", get(upgrade))
}

/// Connections that have not authenticated yet (no `Authorization: Bearer` on the upgrade, no
/// `connect` yet) may hold at most this many places, apart from `[gateway] ws_max_connections`:
/// a flood of them cannot keep a client with the token out.
pub const MAX_UNAUTHENTICATED: usize = 16;

/// The counts of open connections, shared by the server: authenticated ones (`[gateway]
/// ws_max_connections`) and ones still in their handshake ([`MAX_UNAUTHENTICATED`]).
#[derive(Debug, Clone, Default)]
pub struct Connections {
    members: Arc<AtomicUsize>,
    pending: Arc<AtomicUsize>,
    /// The transcript reads behind `session.message`, one per task event for every connection.
    reads: session_events::SharedReads,
}

/// One open connection's place in a count of [`Connections`]; given back on drop.
struct Slot(Arc<AtomicUsize>);

/// The place a connection holds (given back when it is dropped): among the authenticated, or
/// among those still in their handshake.
struct Held {
    member: bool,
    _slot: Slot,
}

impl Held {
    fn member(slot: Slot) -> Self {
        Self {
            member: true,
            _slot: slot,
        }
    }

    fn pending(slot: Slot) -> Self {
        Self {
            member: false,
            _slot: slot,
        }
    }
}

fn acquire(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
    let before = count.fetch_add(1, Ordering::SeqCst);
    if before >= max {
        count.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    Some(Slot(count.clone()))
}

impl Connections {
    /// How many authenticated connections are open.
    pub fn open(&self) -> usize {
        self.members.load(Ordering::SeqCst)
    }

    /// The transcript reads the connections share.
    pub(crate) fn reads(&self) -> &session_events::SharedReads {
        &self.reads
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn upgrade(
    State(state): State<ApiState>,
    headers: axum::http::HeaderMap,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            if let Some(page) = super::control_ui::asset(&state, "/").await {
                return page;
            }
            return error(
                e.status(),
                "websocket_upgrade",
                format!("{} (this path serves the WebSocket gateway)", e.body_text()),
            );
        }
    };
    if state.shutdown.is_shutdown() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the gateway is shutting down",
        );
    }
    let held = match place(&state, &headers) {
        Ok(held) => held,
        Err(answer) => return answer,
    };
    let max_payload = state.config.gateway.max_body;
    ws.max_message_size(max_payload)
        .max_frame_size(max_payload)
        .on_upgrade(move |socket| connection(socket, state, held))
        .into_response()
}

/// The place of a new connection: an authenticated one (`Authorization: Bearer <token>` on the
/// upgrade) among the members, else one among the [`MAX_UNAUTHENTICATED`]; 503 when full.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
fn place(state: &ApiState, headers: &axum::http::HeaderMap) -> Result<Held, Response> {
    let max = state.config.gateway.ws_max_connections;
    let full = || {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            format!("{max} WebSocket connections are open ([gateway] ws_max_connections)"),
        )
    };
    if crate::gateway::token::presented(&state.token, headers) {
        return acquire(&state.ws.members, max)
            .map(Held::member)
            .ok_or_else(full);
    }
    if state.ws.open() >= max {
        return Err(full());
    }
    acquire(&state.ws.pending, MAX_UNAUTHENTICATED)
        .map(Held::pending)
        .ok_or_else(|| {
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_unauthenticated",
                format!(
                    "{MAX_UNAUTHENTICATED} WebSocket connections are still in their handshake; try again, or send Authorization: Bearer <token> with the upgrade"
                ),
            )
        })
}

/// Moves an authenticated connection among the members; false (closed with 1013) when they
/// are full.
fn admit(state: &ApiState, out: &Outbox, held: &mut Held) -> bool {
    if !held.member {
        let max = state.config.gateway.ws_max_connections;
        match acquire(&state.ws.members, max) {
            Some(slot) => *held = Held::member(slot),
            None => {
                out.close(
                    CLOSE_TRY_AGAIN,
                    format!("{max} WebSocket connections are open ([gateway] ws_max_connections)"),
                );
                return false;
            }
        }
    }
    true
}

/// What the client sent next.
enum Incoming {
    Text(String),
    Binary,
    TooBig,
    End,
}

async fn next_message(stream: &mut SplitStream<WebSocket>) -> Incoming {
    loop {
        match stream.next().await {
            Some(Ok(Message::Text(t))) => return Incoming::Text(t.to_string()),
            Some(Ok(Message::Binary(_))) => return Incoming::Binary,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | None => return Incoming::End,
            Some(Err(e)) => {
                let too_big = e
                    .into_inner()
                    .downcast_ref::<tokio_tungstenite::tungstenite::Error>()
                    .is_some_and(|e| {
                        matches!(e, tokio_tungstenite::tungstenite::Error::Capacity(_))
                    });
                return if too_big {
                    Incoming::TooBig
                } else {
                    Incoming::End
                };
            }
        }
    }
}

fn too_big(state: &ApiState) -> String {
    format!(
        "frame larger than maxPayload ({} bytes, [gateway] max_body)",
        state.config.gateway.max_body
    )
}

/// Serves one connection: handshake, then requests and events until either side closes.
async fn connection(socket: WebSocket, state: ApiState, mut held: Held) {
    let (sink, mut stream) = socket.split();
    let (out, writer) = outbox::outbox(state.config.gateway.ws_max_buffered);
    let writer = tokio::spawn(writer.run(sink));
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    if out
        .send(&handshake::challenge(&nonce, state.clock.now_ms()))
        .is_ok()
        && let Some(client) = handshake(&state, &out, &mut stream, &mut held, &nonce).await
    {
        serve(&state, &out, &mut stream, &client.scopes).await;
    }
    // Ends the writer (after what is queued), and with it the event and tick tasks.
    out.close(CLOSE_NORMAL, "closing");
    drop(out);
    if tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .is_err()
    {
        tracing::warn!("WebSocket writer did not stop; dropping the connection.");
    }
}

/// Runs the handshake; the client once `hello-ok` is queued.
async fn handshake(
    state: &ApiState,
    out: &Outbox,
    stream: &mut SplitStream<WebSocket>,
    held: &mut Held,
    nonce: &str,
) -> Option<handshake::Client> {
    let first = match tokio::time::timeout(HANDSHAKE_TIMEOUT, next_message(stream)).await {
        Err(_) => {
            out.close(
                CLOSE_POLICY,
                format!(
                    "handshake timeout: no connect within {}s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            );
            return None;
        }
        Ok(Incoming::Text(t)) => t,
        Ok(Incoming::Binary) => {
            out.close(
                CLOSE_PROTOCOL,
                "handshake: binary frames are not part of the protocol",
            );
            return None;
        }
        Ok(Incoming::TooBig) => {
            out.close(CLOSE_TOO_BIG, too_big(state));
            return None;
        }
        Ok(Incoming::End) => return None,
    };
    let req = match frames::parse_request(&first) {
        Ok(req) => req,
        Err(bad) => {
            let _ = out.send(&bad.answer());
            out.close(
                CLOSE_POLICY,
                format!(
                    "handshake: the first frame must be req connect ({})",
                    bad.error.message
                ),
            );
            return None;
        }
    };
    let (client, hello) = match handshake::accept(state, req, nonce) {
        Ok(ok) => ok,
        Err(refusal) => {
            tracing::warn!(reason = %refusal.reason, "WebSocket handshake refused.");
            if let Some(answer) = refusal.answer {
                let _ = out.send(&answer);
            }
            out.close(refusal.code, refusal.reason);
            return None;
        }
    };
    if !admit(state, out, held) {
        return None;
    }
    // Subscribed before hello-ok: every event of a run the client starts reaches it.
    let feed = match events::Feed::subscribe(state).await {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(error = %e, "WebSocket client cannot subscribe to the bus.");
            out.close(1011, format!("bus unavailable: {e}"));
            return None;
        }
    };
    out.send(&hello).ok()?;
    tracing::info!(role = %client.role, "WebSocket client connected.");
    tokio::spawn(feed.run(state.clone(), out.clone()));
    tokio::spawn(tick(state.clock.clone(), out.clone()));
    Some(client)
}

/// Answers requests until the client or the server closes.
async fn serve(
    state: &ApiState,
    out: &Outbox,
    stream: &mut SplitStream<WebSocket>,
    scopes: &[String],
) {
    let mut calls = JoinSet::new();
    let mut shutdown = state.shutdown.clone();
    loop {
        tokio::select! {
            msg = next_message(stream) => match msg {
                Incoming::Text(t) => request(state, out, &mut calls, scopes, &t),
                Incoming::Binary => {
                    let error = ErrorShape::invalid("frame: binary frames are not part of the protocol (send JSON text)");
                    if out.send(&Frame::err(None, error)).is_err() {
                        break;
                    }
                }
                Incoming::TooBig => {
                    out.close(CLOSE_TOO_BIG, too_big(state));
                    break;
                }
                Incoming::End => break,
            },
            Some(_) = calls.join_next(), if !calls.is_empty() => {}
            () = out.closed() => break,
            () = shutdown.recv() => {
                out.close(CLOSE_GOING_AWAY, "the gateway is shutting down");
                break;
            }
        }
    }
    calls.abort_all();
}

/// Parses one request and starts it; an error `res` answers what cannot run (a malformed
/// frame, an unknown method, a method the connection's `scopes` do not allow).
fn request(state: &ApiState, out: &Outbox, calls: &mut JoinSet<()>, scopes: &[String], text: &str) {
    let req = match frames::parse_request(text) {
        Ok(req) => req,
        Err(bad) => {
            let _ = out.send(&bad.answer());
            return;
        }
    };
    tracing::trace!(method = %req.method, params = %req.params, "WebSocket request.");
    let Some(method) = req.known_method() else {
        let error = ErrorShape {
            code: ErrorCode::MethodNotFound,
            message: format!(
                "unknown method {:?} (hello-ok lists features.methods)",
                req.method
            ),
            details: Some(serde_json::json!({ "method": req.method })),
        };
        tracing::debug!(method = %req.method, "Unknown WebSocket method.");
        let _ = out.send(&Frame::err(Some(&req.id), error));
        return;
    };
    if let Err(error) = scopes::check(method, &req.params, scopes) {
        tracing::debug!(method = %req.method, ?scopes, "WebSocket method refused: missing scope.");
        let _ = out.send(&Frame::err(Some(&req.id), error));
        return;
    }
    if calls.len() >= MAX_IN_FLIGHT {
        let error = ErrorShape::new(
            ErrorCode::Unavailable,
            format!("{MAX_IN_FLIGHT} requests of this connection are running; wait for an answer"),
        );
        let _ = out.send(&Frame::err(Some(&req.id), error));
        return;
    }
    let (state, out) = (state.clone(), out.clone());
    // OpenClaw's `timeout` (seconds) bounds the wait for the second answer of `agent`.
    let timeout = req
        .params
        .get("timeout")
        .and_then(serde_json::Value::as_u64)
        .filter(|s| *s > 0)
        .map_or(AGENT_FINAL_WAIT, Duration::from_secs);
    // `agent --deliver`: the second answer says what became of the delivery.
    let deliver = req
        .params
        .get("deliver")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    calls.spawn(async move {
        let answer = methods::call(&state, method, req.params).await;
        let accepted = match (&answer, method) {
            (Ok(payload), methods::Method::Agent) => Some(payload.clone()),
            _ => None,
        };
        let frame = match answer {
            Ok(payload) => Frame::ok(&req.id, payload),
            Err(e) => Frame::err(Some(&req.id), e),
        };
        if out.send(&frame).is_err() {
            return;
        }
        if let Some(accepted) = accepted {
            let end = runs::finish(&state, &accepted, timeout, deliver).await;
            let _ = out.send(&Frame::ok(&req.id, end));
        }
    });
}

/// `tick {ts}` every [`TICK_INTERVAL_MS`] (tokio time; `ts` from the one clock), until the
/// connection closes.
async fn tick(clock: Arc<dyn bus::Clock>, out: Outbox) {
    let period = Duration::from_millis(TICK_INTERVAL_MS);
    #[allow(
        clippy::disallowed_methods,
        reason = "the WebSocket keep-alive tick runs on tokio's real time, as the client's timer does"
    )]
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            _ = every.tick() => {
                if out.event(EventName::Tick, serde_json::json!({ "ts": clock.now_ms() })).is_err() {
                    return;
                }
            }
            () = out.closed() => return,
        }
    }
}
