//! A fake Telegram Bot API server on loopback, speaking the real formats, for tests.
//!
//! It serves `POST /bot<token>/getUpdates` (JSON `{offset?, timeout?, limit?}`; long polling:
//! with nothing new it waits up to `timeout` seconds for [`push_message`](FakeBotApi::push_message))
//! and `POST /bot<token>/sendMessage` (`{chat_id, text}`; a text over 4,096 UTF-16 units or an
//! empty one answers 400 as Telegram does). Answers are `{ok: true, result}` or `{ok: false,
//! error_code, description, parameters?}`. A wrong token answers 404 `Not Found`. Updates below
//! the requested offset are forgotten (confirmed), like Telegram does.
//!
//! Several pollers (nodes) can be told apart by a base URL of their own,
//! [`base_url_for`](FakeBotApi::base_url_for) (`…/<caller>/bot<token>/<method>`): the fake counts
//! each caller's `getUpdates` calls and the most long polls it held at once.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// One message the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    /// The chat.
    pub chat_id: i64,
    /// The text.
    pub text: String,
}

#[derive(Default)]
struct State0 {
    next_update: i64,
    next_message: i64,
    updates: VecDeque<Value>,
    sent: Vec<SentMessage>,
    offsets: Vec<Option<i64>>,
    /// Answers for the next `sendMessage` calls, before any is sent: (status, retry_after).
    send_failures: VecDeque<(u16, Option<u64>)>,
    /// `getUpdates` calls by caller (the path segment before `bot<token>`; empty for none).
    polls_by: std::collections::BTreeMap<String, usize>,
    /// Long polls being held now, and the most ever held at once.
    in_poll: usize,
    max_in_poll: usize,
}

struct Shared {
    token: String,
    state: Mutex<State0>,
    news: Notify,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State0> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake Bot API; dropping it stops the server.
pub struct FakeBotApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
}

impl FakeBotApi {
    /// Starts a fake for the bot with `token`, its first update id `first_update_id`.
    pub async fn start(token: &str, first_update_id: i64) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (shutdown, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            token: token.to_string(),
            state: Mutex::new(State0 {
                next_update: first_update_id,
                next_message: 1,
                ..State0::default()
            }),
            news: Notify::new(),
            shutdown: rx.clone(),
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(method))
            .route("/{caller}/{bot}/{method}", post(method_of_caller))
            .with_state(shared.clone());
        let mut stop = rx;
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                stop.wait_for(|&s| s).await.ok();
            });
            if let Err(e) = serve.await {
                tracing::warn!(%addr, error = %e, "Fake Bot API stopped with an error.");
            }
        });
        Ok(Self {
            addr,
            shared,
            shutdown,
        })
    }

    /// The base URL for `[channels.telegram] base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL for one poller among several: its calls are counted as `caller`'s.
    pub fn base_url_for(&self, caller: &str) -> String {
        format!("http://{}/{caller}", self.addr)
    }

    /// How many `getUpdates` calls each caller made (callers that made none are absent).
    pub fn polls_by(&self) -> std::collections::BTreeMap<String, usize> {
        self.shared.lock().polls_by.clone()
    }

    /// The most `getUpdates` long polls held at once so far (Telegram itself ends the older of
    /// two with `409 Conflict`).
    pub fn max_concurrent_polls(&self) -> usize {
        self.shared.lock().max_in_poll
    }

    /// Queues a text message from `chat_id` (`chat_type`: `private`, `group`, `supergroup`);
    /// returns its update id.
    pub fn push_message(&self, chat_id: i64, chat_type: &str, text: &str) -> i64 {
        let id = {
            let mut s = self.shared.lock();
            let id = s.next_update;
            s.next_update += 1;
            s.next_message += 1;
            let update = json!({
                "update_id": id,
                "message": {
                    "message_id": s.next_message,
                    "date": 1_700_000_000,
                    "from": { "id": chat_id.abs(), "is_bot": false, "first_name": "Tester" },
                    "chat": { "id": chat_id, "type": chat_type },
                    "text": text,
                },
            });
            s.updates.push_back(update);
            id
        };
        self.shared.news.notify_waiters();
        id
    }

    /// Queues an update again under an id it already had (a redelivery).
    pub fn push_again(&self, update_id: i64, chat_id: i64, text: &str) {
        let update = json!({
            "update_id": update_id,
            "message": {
                "message_id": 1, "date": 1_700_000_000,
                "chat": { "id": chat_id, "type": "private" }, "text": text,
            },
        });
        self.shared.lock().updates.push_back(update);
        self.shared.news.notify_waiters();
    }

    /// The messages the bot sent, in order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    /// The `offset` of every `getUpdates` call, in order.
    pub fn offsets(&self) -> Vec<Option<i64>> {
        self.shared.lock().offsets.clone()
    }

    /// The next `sendMessage` calls fail with `status` (`retry_after` seconds with a 429).
    pub fn fail_sends(&self, count: usize, status: u16, retry_after: Option<u64>) {
        let mut s = self.shared.lock();
        for _ in 0..count {
            s.send_failures.push_back((status, retry_after));
        }
    }
}

impl Drop for FakeBotApi {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

fn ok(result: Value) -> Response {
    Json(json!({ "ok": true, "result": result })).into_response()
}

fn fail(status: u16, description: &str, retry_after: Option<u64>) -> Response {
    let mut body = json!({ "ok": false, "error_code": status, "description": description });
    if let Some(s) = retry_after {
        body["parameters"] = json!({ "retry_after": s });
    }
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (code, Json(body)).into_response()
}

async fn method(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Response {
    answer(&shared, "", &bot, &method, body).await
}

async fn method_of_caller(
    State(shared): State<Arc<Shared>>,
    Path((caller, bot, method)): Path<(String, String, String)>,
    body: Option<Json<Value>>,
) -> Response {
    answer(&shared, &caller, &bot, &method, body).await
}

/// Counts a long poll as held until it answers or its client goes away.
struct Polling<'a>(&'a Shared);

impl<'a> Polling<'a> {
    fn start(shared: &'a Shared, caller: &str) -> Self {
        let mut s = shared.lock();
        *s.polls_by.entry(caller.to_string()).or_default() += 1;
        s.in_poll += 1;
        s.max_in_poll = s.max_in_poll.max(s.in_poll);
        Self(shared)
    }
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.0.lock().in_poll -= 1;
    }
}

async fn answer(
    shared: &Shared,
    caller: &str,
    bot: &str,
    method: &str,
    body: Option<Json<Value>>,
) -> Response {
    if bot != format!("bot{}", shared.token) {
        return fail(404, "Not Found", None);
    }
    let body = body.map(|Json(v)| v).unwrap_or(Value::Null);
    match method {
        "getUpdates" => {
            let _held = Polling::start(shared, caller);
            get_updates(shared, &body).await
        }
        "sendMessage" => send_message(shared, &body),
        _ => fail(404, "Not Found: method not found", None),
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the fake Bot API server holds a long poll for the client's timeout in real time, as Telegram does"
)]
async fn get_updates(shared: &Shared, body: &Value) -> Response {
    let offset = body.get("offset").and_then(Value::as_i64);
    let timeout = body.get("timeout").and_then(Value::as_u64).unwrap_or(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    shared.lock().offsets.push(offset);
    let mut stop = shared.shutdown.clone();
    loop {
        let news = shared.news.notified();
        {
            let mut s = shared.lock();
            if let Some(o) = offset {
                // Updates below the offset are confirmed: forgotten for good.
                s.updates
                    .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= o));
            }
            if !s.updates.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(s.updates.iter().cloned().collect()));
            }
        }
        tokio::select! {
            () = news => {}
            () = tokio::time::sleep_until(deadline) => {}
            _ = stop.wait_for(|&s| s) => return ok(json!([])),
        }
    }
}

fn send_message(shared: &Shared, body: &Value) -> Response {
    let Some(chat_id) = body.get("chat_id").and_then(Value::as_i64) else {
        return fail(400, "Bad Request: chat_id is empty", None);
    };
    let text = body.get("text").and_then(Value::as_str).unwrap_or_default();
    if text.trim().is_empty() {
        return fail(400, "Bad Request: message text is empty", None);
    }
    if text.encode_utf16().count() > 4096 {
        return fail(400, "Bad Request: message is too long", None);
    }
    let mut s = shared.lock();
    if let Some((status, retry_after)) = s.send_failures.pop_front() {
        let description = match status {
            429 => format!(
                "Too Many Requests: retry after {}",
                retry_after.unwrap_or(0)
            ),
            _ => "Internal Server Error".to_string(),
        };
        return fail(status, &description, retry_after);
    }
    s.sent.push(SentMessage {
        chat_id,
        text: text.to_string(),
    });
    s.next_message += 1;
    ok(json!({
        "message_id": s.next_message,
        "date": 1_700_000_000,
        "chat": { "id": chat_id, "type": "private" },
        "text": text,
    }))
}
