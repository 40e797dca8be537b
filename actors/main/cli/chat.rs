//! `clawbus chat --agent ID [--session NAME]`: a conversation in the terminal over the WebSocket
//! gateway. Each line read from stdin is sent with `chat.send`; the answer is printed from its
//! `chat` events (whole with `final`: chat events carry only the answer), then a newline. `/exit`
//! or end of input quits.
//!
//! Exit codes: 0 when the input ends or on `/exit`; 2 when the gateway cannot be reached,
//! refuses the token, does not run the agent, refuses a message, or goes away mid-conversation.

use super::client::{GatewayClient, usage};
use super::{Global, out::out};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::AsyncBufReadExt as _;
use tokio_tungstenite::tungstenite::Message;

/// How long connecting and the handshake may take.
const CONNECT: Duration = Duration::from_secs(10);

/// Arguments of `clawbus chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The agent to talk to.
    #[arg(long)]
    pub agent: String,
    /// The conversation: `agent:<id>:ws:direct:<NAME>`; the agent's main session without it.
    #[arg(long)]
    pub session: Option<String>,
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Runs `clawbus chat`.
pub(super) fn run(global: &Global, args: ChatArgs) -> ExitCode {
    let client = match GatewayClient::connect(global, CONNECT) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let url = format!("{}/", client.url().replacen("http", "ws", 1));
    let token = client.token().to_string();
    match client.block_on(chat(&url, &token, &args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

async fn chat(url: &str, token: &str, args: &ChatArgs) -> Result<(), ExitCode> {
    let mut ws = connect(url, token).await?;
    known_agent(&mut ws, &args.agent).await?;
    let session = args.session.clone().unwrap_or_else(|| "main".into());
    let prompt = std::io::stdin().is_terminal();
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut n = 0u64;
    loop {
        if prompt {
            out!("> ");
        }
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => return Err(usage(format!("reading stdin: {e}"))),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/exit" || text == "/quit" {
            return Ok(());
        }
        n += 1;
        let id = format!("chat-{n}");
        let req = json!({ "type": "req", "id": id, "method": "chat.send", "params": {
            "agentId": args.agent, "sessionKey": session, "message": text,
            "idempotencyKey": uuid::Uuid::now_v7().to_string(),
        } });
        ws.send(Message::Text(req.to_string().into()))
            .await
            .map_err(|e| usage(format!("the gateway went away: {e}")))?;
        turn(&mut ws, &id).await?;
    }
}

/// Opens the socket and runs the handshake.
async fn connect(url: &str, token: &str) -> Result<Socket, ExitCode> {
    let handshake = async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let mut request = url
            .into_client_request()
            .map_err(|e| usage(format!("gateway URL {url}: {e}")))?;
        // The token on the upgrade too: the gateway then counts the connection among the
        // authenticated ones, which a flood of unauthenticated sockets cannot fill.
        if let Ok(value) = format!("Bearer {token}").parse() {
            request.headers_mut().insert(
                tokio_tungstenite::tungstenite::http::header::AUTHORIZATION,
                value,
            );
        }
        let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
            .await
            .map_err(|e| {
                usage(format!(
                    "cannot reach the gateway at {url}: {e} (is `clawbus up` running?)"
                ))
            })?;
        let challenge = next_frame(&mut ws).await?;
        if challenge["event"] != "connect.challenge" {
            return Err(usage(format!("unexpected first frame: {challenge}")));
        }
        let req = json!({ "type": "req", "id": "connect", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": { "id": "cli", "version": env!("CARGO_PKG_VERSION"), "platform": std::env::consts::OS, "mode": "cli" },
            "role": "operator", "scopes": ["operator.admin"], "auth": { "token": token },
        } });
        ws.send(Message::Text(req.to_string().into()))
            .await
            .map_err(|e| usage(format!("the gateway went away: {e}")))?;
        let hello = next_frame(&mut ws).await?;
        if hello["ok"] != true {
            return Err(usage(format!(
                "the gateway refused the connection: {}",
                hello["error"]["message"]
                    .as_str()
                    .unwrap_or("no reason given")
            )));
        }
        Ok(ws)
    };
    tokio::time::timeout(CONNECT, handshake)
        .await
        .map_err(|_| {
            usage(format!(
                "no answer from the gateway at {url} within {}s",
                CONNECT.as_secs()
            ))
        })?
}

/// Refuses (exit 2) an agent the gateway does not run, before any input is read.
async fn known_agent(ws: &mut Socket, agent: &str) -> Result<(), ExitCode> {
    let req = json!({ "type": "req", "id": "agents", "method": "agents.list", "params": {} });
    ws.send(Message::Text(req.to_string().into()))
        .await
        .map_err(|e| usage(format!("the gateway went away: {e}")))?;
    let answer = loop {
        let frame = next_frame(ws).await?;
        if frame["type"] == "res" && frame["id"] == "agents" {
            break frame;
        }
    };
    let known: Vec<&str> = answer["payload"]["agents"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["id"].as_str()).collect())
        .unwrap_or_default();
    if known.contains(&agent) {
        return Ok(());
    }
    Err(usage(format!(
        "--agent {agent:?}: no such agent (the gateway runs: {})",
        known.join(", ")
    )))
}

/// The next JSON frame; a close or a broken socket is an error naming why.
async fn next_frame(ws: &mut Socket) -> Result<Value, ExitCode> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                return serde_json::from_str(&t)
                    .map_err(|e| usage(format!("unreadable frame from the gateway: {e}")));
            }
            Some(Ok(Message::Close(frame))) => {
                let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                return Err(usage(format!("the gateway closed the connection: {why}")));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(usage(format!("the gateway went away: {e}"))),
            None => return Err(usage("the gateway closed the connection")),
        }
    }
}

/// Prints one answer as it streams: the `chat` events of the run request `id` started.
async fn turn(ws: &mut Socket, id: &str) -> Result<(), ExitCode> {
    let mut run: Option<String> = None;
    // Events of runs not known yet: they may come before the answer that names the run.
    let mut early: Vec<Value> = Vec::new();
    let mut printed = 0usize;
    loop {
        let frame = next_frame(ws).await?;
        if frame["type"] == "res" && frame["id"] == id {
            if frame["ok"] != true {
                // A refused message (bad session, unknown agent) cannot be sent again as it is.
                return Err(usage(
                    frame["error"]["message"]
                        .as_str()
                        .unwrap_or("chat.send failed"),
                ));
            }
            let mine = frame["payload"]["runId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for e in std::mem::take(&mut early) {
                if e["runId"] == mine.as_str() && show(&e, &mut printed) {
                    return Ok(());
                }
            }
            run = Some(mine);
            continue;
        }
        if frame["event"] != "chat" {
            continue;
        }
        let payload = frame["payload"].clone();
        match &run {
            None => early.push(payload),
            Some(mine) if payload["runId"] == mine.as_str() => {
                if show(&payload, &mut printed) {
                    return Ok(());
                }
            }
            Some(_) => {}
        }
    }
}

/// Prints what a `chat` event adds; true when the run ended.
fn show(chat: &Value, printed: &mut usize) -> bool {
    let text = chat["message"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    if let Some(rest) = text.get(*printed..).filter(|r| !r.is_empty()) {
        out!("{rest}");
        *printed = text.len();
    }
    match chat["state"].as_str() {
        Some("final") => {
            out!("\n");
            true
        }
        Some("error" | "aborted") => {
            if *printed > 0 {
                out!("\n");
            }
            eprintln!(
                "error: the turn ended {}: {}",
                chat["state"].as_str().unwrap_or_default(),
                chat["errorMessage"].as_str().unwrap_or("no reason given")
            );
            true
        }
        _ => false,
    }
}
