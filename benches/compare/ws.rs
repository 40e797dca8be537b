//! The WebSocket turn of the comparison: one connection (challenge, `connect` with the token)
//! reused for every turn, each turn `agent` then `agent.wait` until it answers; connecting is not
//! timed. A client written from the protocol description, as `tests/scenarios/ws.rs` has one.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The `res` of request `id` (events before it are read and dropped), at most `within`.
async fn answer(ws: &mut Socket, id: &str, within: Duration) -> Value {
    tokio::time::timeout(within, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["type"] == "res" && v["id"] == id {
                        return v;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the WebSocket ended while waiting for {id}: {other:?}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no answer to {id} within {within:?}"))
}

async fn call(ws: &mut Socket, id: &str, method: &str, params: Value, within: Duration) -> Value {
    let req = json!({ "type": "req", "id": id, "method": method, "params": params });
    ws.send(Message::Text(req.to_string().into()))
        .await
        .unwrap();
    let res = answer(ws, id, within).await;
    assert_eq!(res["ok"], true, "{method}: {res}");
    res["payload"].clone()
}

/// `n` sequential turns to `agent` over one connection to the gateway at `url` (http://…).
pub(super) async fn turns(
    url: &str,
    token: &str,
    agent: &str,
    n: usize,
    within: Duration,
) -> Vec<Duration> {
    let ws_url = format!("{}/", url.replacen("http://", "ws://", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(ws_url, None, true)
        .await
        .unwrap();
    let connect = json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": { "id": "test", "version": "0", "platform": "linux", "mode": "backend" },
        "role": "operator", "scopes": ["operator.admin"], "auth": { "token": token },
    });
    call(&mut ws, "connect", "connect", connect, within).await;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let params = json!({ "message": format!("hello {i}"), "agentId": agent, "sessionKey": format!("ws-{i}") });
        let run = call(&mut ws, &format!("a{i}"), "agent", params, within).await;
        let wait = json!({ "runId": run["runId"], "timeoutMs": within.as_millis() as u64 });
        let done = call(&mut ws, &format!("w{i}"), "agent.wait", wait, within).await;
        out.push(t.elapsed());
        assert_eq!(done["status"], "ok", "turn {i}: {done}");
    }
    out
}
