//! A WebSocket client written from the protocol description (OpenClaw's frames, version 4) and
//! a `clawbus up` child to point it at, for the WebSocket scenarios.

use super::system::{Child as Daemon, up};
use crate::support::{NET, Project};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::process::Child;
use tokio_tungstenite::tungstenite::Message;

/// A `clawbus up` child on a free port; killed on drop.
pub(super) struct Up {
    child: Child,
    pub url: String,
    pub token: String,
}

impl Up {
    pub(super) async fn start(project: &Project) -> Self {
        let Daemon { child, url, token } = up(project).await;
        Self { child, url, token }
    }

    pub(super) fn ws_url(&self) -> String {
        format!("{}/", self.url.replacen("http://", "ws://", 1))
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the server sent.
#[derive(Debug)]
pub(super) enum Got {
    Frame(Value),
    Close(u16, String),
}

/// A protocol client.
pub(super) struct Client {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    /// Events read while waiting for an answer.
    pub events: Vec<Value>,
    /// Second answers of `agent` (the run's end) read while waiting for another answer.
    pub finals: Vec<Value>,
}

impl Client {
    /// Opens the socket and reads the challenge.
    pub(super) async fn open(up: &Up) -> (Self, Value) {
        Self::open_url(&up.ws_url()).await
    }

    /// Opens the socket at `ws_url` and reads the challenge.
    async fn open_url(ws_url: &str) -> (Self, Value) {
        let (ws, _) = tokio::time::timeout(NET, tokio_tungstenite::connect_async(ws_url))
            .await
            .unwrap()
            .unwrap();
        let mut c = Self {
            ws,
            next_id: 0,
            events: Vec::new(),
            finals: Vec::new(),
        };
        let challenge = c.frame().await;
        (c, challenge)
    }

    /// Opens, answers the challenge with `connect` and the token, and returns the `hello-ok`.
    pub(super) async fn connect(up: &Up, token: &str) -> (Self, Value) {
        Self::connect_url(&up.ws_url(), token).await
    }

    /// [`Client::connect`] to the gateway whose base URL is `http_url` (a daemon started some
    /// other way than [`Up`]).
    pub(super) async fn connect_to(http_url: &str, token: &str) -> (Self, Value) {
        let ws_url = format!("{}/", http_url.replacen("http://", "ws://", 1));
        Self::connect_url(&ws_url, token).await
    }

    async fn connect_url(ws_url: &str, token: &str) -> (Self, Value) {
        let (mut c, challenge) = Self::open_url(ws_url).await;
        assert_eq!(challenge["type"], "event", "{challenge}");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let id = c.send("connect", connect_params(token)).await;
        let res = c.answer(&id).await;
        (c, res)
    }

    pub(super) async fn send_text(&mut self, text: String) {
        self.ws.send(Message::Text(text.into())).await.unwrap();
    }

    pub(super) async fn send(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let frame = json!({ "type": "req", "id": id, "method": method, "params": params });
        self.send_text(frame.to_string()).await;
        id
    }

    pub(super) async fn recv(&mut self) -> Got {
        loop {
            let msg = tokio::time::timeout(NET, self.ws.next())
                .await
                .expect("the server must send a frame or close in time");
            match msg {
                Some(Ok(Message::Text(t))) => return Got::Frame(serde_json::from_str(&t).unwrap()),
                Some(Ok(Message::Close(Some(f)))) => {
                    return Got::Close(u16::from(f.code), f.reason.to_string());
                }
                Some(Ok(Message::Close(None))) | None => return Got::Close(1005, String::new()),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Got::Close(1006, e.to_string()),
            }
        }
    }

    pub(super) async fn frame(&mut self) -> Value {
        match self.recv().await {
            Got::Frame(v) => v,
            Got::Close(code, reason) => panic!("expected a frame, got close {code} {reason:?}"),
        }
    }

    /// The `res` to request `id`; the events before it are kept in `events`.
    pub(super) async fn answer(&mut self, id: &str) -> Value {
        loop {
            let f = self.frame().await;
            if f["type"] == "res" && f["id"] == id {
                return f;
            }
            if f["type"] == "res" {
                // The second answer of an earlier `agent` (its run's end).
                assert_ne!(f["payload"]["status"], "accepted", "{f}");
                self.finals.push(f);
                continue;
            }
            assert_eq!(f["type"], "event", "only events come between: {f}");
            self.events.push(f);
        }
    }

    /// Calls a method and returns the payload of its successful `res`.
    pub(super) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        let res = self.answer(&id).await;
        assert_eq!(res["ok"], true, "{method} must succeed: {res}");
        res["payload"].clone()
    }

    /// The next event named `name` whose payload satisfies `pick` (earlier ones read included).
    pub(super) async fn event_where(&mut self, name: &str, pick: impl Fn(&Value) -> bool) -> Value {
        let seen = |e: &Value| e["event"] == name && pick(&e["payload"]);
        if let Some(i) = self.events.iter().position(seen) {
            return self.events.remove(i);
        }
        loop {
            let f = self.frame().await;
            if seen(&f) {
                return f;
            }
            if f["type"] == "res" {
                self.finals.push(f);
            } else {
                self.events.push(f);
            }
        }
    }

    /// The close frame, skipping frames before it.
    pub(super) async fn closed(&mut self) -> (u16, String) {
        loop {
            if let Got::Close(code, reason) = self.recv().await {
                return (code, reason);
            }
        }
    }
}

pub(super) fn connect_params(token: &str) -> Value {
    json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": { "id": "test", "version": "0.0.1", "platform": "linux", "mode": "backend" },
        "role": "operator", "scopes": ["operator.admin"],
        "auth": { "token": token },
    })
}
