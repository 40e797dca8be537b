//! A minimal client of OpenClaw's gateway WebSocket protocol: JSON text frames
//! `{type:"req",id,method,params}` answered by `{type:"res",id,ok,payload|error}`, events
//! ignored. The server speaks first (`connect.challenge`); the first request is `connect`, as
//! `client.id:"gateway-client"`, `mode:"backend"` with the token, the one device-less loopback
//! client that keeps its operator scopes.

use super::OpenClawError;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// Protocol version spoken (`PROTOCOL_VERSION` = `MIN_CLIENT_PROTOCOL_VERSION` = 4).
const PROTOCOL: u64 = 4;
/// How long the handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(30);

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// A connected, authenticated gateway client; requests may be in flight concurrently.
pub(crate) struct WsClient {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next: AtomicU64,
}

impl WsClient {
    /// Connects, waits for `connect.challenge`, and sends `connect` with `token`.
    pub(crate) async fn connect(url: &str, token: &str) -> Result<Self, OpenClawError> {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .map_err(|e| OpenClawError::ws(format!("connect {url}"), e))?;
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = out_rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let (challenge_tx, challenge_rx) = oneshot::channel();
        let mut challenge_tx = Some(challenge_tx);
        let map = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let Ok(text) = msg.to_text() else { continue };
                let Ok(frame) = serde_json::from_str::<Value>(text) else {
                    continue;
                };
                match frame["type"].as_str() {
                    Some("res") => {
                        let id = frame["id"].as_str().unwrap_or_default().to_string();
                        let waiter = map.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                        if let Some(w) = waiter {
                            let _ = w.send(frame);
                        }
                    }
                    Some("event") if frame["event"] == "connect.challenge" => {
                        if let Some(tx) = challenge_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                }
            }
            // The connection is gone: every waiter gets its answer dropped.
            map.lock().unwrap_or_else(|e| e.into_inner()).clear();
        });
        tokio::time::timeout(HANDSHAKE, challenge_rx)
            .await
            .map_err(|_| OpenClawError::protocol("connect", "no connect.challenge event"))?
            .map_err(|_| OpenClawError::protocol("connect", "closed before connect.challenge"))?;
        let client = WsClient {
            out,
            pending,
            next: AtomicU64::new(1),
        };
        let hello = client
            .request("connect", connect_params(token), HANDSHAKE)
            .await?;
        if hello["type"] != "hello-ok" {
            return Err(OpenClawError::protocol(
                "connect",
                format!("answer {hello}"),
            ));
        }
        Ok(client)
    }

    /// Sends one request and waits (at most `timeout`) for its answer's payload.
    pub(crate) async fn request(
        &self,
        method: &'static str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, OpenClawError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), tx);
        let frame = json!({ "type": "req", "id": id, "method": method, "params": params });
        self.out
            .send(Message::text(frame.to_string()))
            .map_err(|_| OpenClawError::protocol(method, "connection closed"))?;
        let res = tokio::time::timeout(timeout, rx)
            .await
            .map_err(|_| OpenClawError::protocol(method, format!("no answer within {timeout:?}")))?
            .map_err(|_| OpenClawError::protocol(method, "connection closed"))?;
        payload(method, res)
    }

    /// One agent turn: `agent` on `session_key`, then `agent.wait` for its run; the wait's
    /// payload (an error unless its `status` is `"ok"`).
    pub(crate) async fn turn(
        &self,
        session_key: &str,
        message: &str,
        timeout: Duration,
    ) -> Result<Value, OpenClawError> {
        let accepted = self
            .request(
                "agent",
                json!({
                    "message": message, "agentId": "main", "sessionKey": session_key,
                    "idempotencyKey": uuid::Uuid::new_v4().to_string(),
                }),
                timeout,
            )
            .await?;
        let run_id = accepted["runId"]
            .as_str()
            .ok_or_else(|| OpenClawError::protocol("agent", format!("no runId in {accepted}")))?;
        let done = self
            .request(
                "agent.wait",
                json!({ "runId": run_id, "timeoutMs": timeout.as_millis() as u64 }),
                timeout + Duration::from_secs(5),
            )
            .await?;
        if done["status"] != "ok" {
            return Err(OpenClawError::protocol(
                "agent.wait",
                format!("run ended {done}"),
            ));
        }
        Ok(done)
    }
}

/// The `connect` request's params.
pub(crate) fn connect_params(token: &str) -> Value {
    json!({
        "minProtocol": PROTOCOL, "maxProtocol": PROTOCOL,
        "client": { "id": "gateway-client", "version": env!("CARGO_PKG_VERSION"),
                    "platform": std::env::consts::OS, "mode": "backend" },
        "role": "operator",
        "scopes": ["operator.read", "operator.write"],
        "auth": { "token": token },
    })
}

/// A `res` frame's payload, or its error as an [`OpenClawError`].
pub(crate) fn payload(method: &'static str, res: Value) -> Result<Value, OpenClawError> {
    if res["ok"] == true {
        Ok(res["payload"].clone())
    } else {
        let e = &res["error"];
        Err(OpenClawError::protocol(
            method,
            format!("{}: {} {}", e["code"], e["message"], e["details"]),
        ))
    }
}

/// The reply text of a finished run (`agent.wait`'s `terminalReply.text`).
pub(crate) fn reply_text(done: &Value) -> &str {
    done["terminalReply"]["text"].as_str().unwrap_or_default()
}

/// The tools that ran successfully in a finished run (`terminalReceipt.successfulToolNames`).
pub(crate) fn tools_used(done: &Value) -> Vec<&str> {
    done["terminalReceipt"]["successfulToolNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
