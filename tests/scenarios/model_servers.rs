//! What a real model server (llama.cpp's `llama-server` with a small model) sends, scripted, on a
//! `clawbus up` child: `finish_reason: "length"` in the middle of a tool call and of a text, a
//! 500 that blames the request, a stream cut after five chunks, a 500 after a tool step. A cut-off
//! call never runs, a cut-off answer is marked truncated everywhere, a request the server calls
//! invalid is not sent again, and the streamed text always equals the stored answer.

use super::openai::sse_data;
use super::system::{Child, spawn_up_logging, stop, up};
use super::ws_client::{Client, Up};
use crate::support::{NET, Project, eventually, get_json, get_text, last_user, post_task};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The model name llama-server answers with, whatever the request named.
const SERVED: &str = "SmolLM2-135M-Instruct";

/// llama-server's answer to a history holding a cut-off call's arguments.
const LLAMA_500: &str = r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal","type":"server_error"}}"#;

const FAST_RETRIES: &str =
    "[limits]\nmax_attempts = 3\nretry_backoff = \"10ms\"\nretry_backoff_max = \"40ms\"\n";

/// One `chat.completion.chunk` as llama-server streams it.
fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({ "id": "chatcmpl-llama", "object": "chat.completion.chunk", "created": 0,
            "model": SERVED, "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
}

/// The usage chunk llama-server ends a stream with.
fn usage_chunk() -> Value {
    json!({ "id": "chatcmpl-llama", "object": "chat.completion.chunk", "created": 0,
            "model": SERVED, "choices": [],
            "usage": { "prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108 } })
}

fn role() -> Value {
    chunk(json!({ "role": "assistant", "content": null }), None)
}

fn text(s: &str) -> Value {
    chunk(json!({ "content": s }), None)
}

fn call(name: &str, arguments: &str) -> Value {
    chunk(
        json!({ "tool_calls": [{ "index": 0, "id": "call_llama", "type": "function",
                                 "function": { "name": name, "arguments": arguments } }] }),
        None,
    )
}

/// A tool call cut off by `max_tokens`: arguments `{`, `finish_reason: "length"`.
fn cut_call() -> Turn {
    Turn::sse(
        vec![
            role(),
            call("write", "{"),
            chunk(json!({}), Some("length")),
            usage_chunk(),
        ],
        true,
    )
}

/// A text answer cut off by `max_tokens`.
fn cut_text() -> Turn {
    Turn::sse(
        vec![
            role(),
            text("He was"),
            text(" a fierce"),
            chunk(json!({}), Some("length")),
            usage_chunk(),
        ],
        true,
    )
}

/// A stream that breaks after five chunks: no `finish_reason`, no `[DONE]`.
fn cut_stream() -> Turn {
    Turn::sse(
        vec![
            role(),
            text("The "),
            text("sea, "),
            text("a "),
            text("myst"),
        ],
        false,
    )
}

fn last_role(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["role"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// `POST /v1/chat/completions` on the child; its status and body text.
async fn completion(child: &Child, body: Value) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", child.url))
        .bearer_auth(&child.token)
        .json(&body)
        .timeout(NET)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The task id behind a completion id (`chatcmpl-<task id, simple form>`).
fn task_of(completion_id: &str) -> String {
    let simple = completion_id.strip_prefix("chatcmpl-").unwrap();
    uuid::Uuid::parse_str(simple).unwrap().to_string()
}

/// The chunks of a streamed completion: their content joined, the last `finish_reason`, the id.
fn read_stream(body: &str) -> (String, String, String) {
    let data = sse_data(body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c.get("error").is_none()), "{body}");
    let content = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let last = chunks.last().unwrap();
    let finish = last["choices"][0]["finish_reason"]
        .as_str()
        .unwrap_or_default();
    (
        content,
        finish.to_string(),
        last["id"].as_str().unwrap().to_string(),
    )
}

/// The `event` objects of a finished task's events.
async fn events(child: &Child, task_id: &str) -> Vec<Value> {
    let body = get_text(child, &format!("/v1/tasks/{task_id}/events")).await;
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .map(|e| e["event"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cut_off_by_max_tokens_never_runs_its_call_and_a_cut_answer_is_marked_truncated() {
    let server = ScriptedServer::with_responder(|req| match last_user(req).as_str() {
        _ if last_role(req) == "tool" => cut_text(),
        "story" => cut_call(),
        "blame" => Turn::HttpError {
            status: 500,
            body: LLAMA_500.into(),
            retry_after: None,
        },
        other => Turn::text(format!("re: {other}")),
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 2)
        .write("agents.d/story.toml", FAST_RETRIES);
    let child = up(&project).await;

    // Non-stream: the cut call is answered with a note, the cut text is the answer, "length".
    let ask = |user: &str, stream: bool| {
        json!({ "model": "agent:story", "user": user, "stream": stream,
                "messages": [{ "role": "user", "content": "story" }] })
    };
    let (status, body) = completion(&child, ask("plain", false)).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "He was a fierce"
    );
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "no retry, no third call: {requests:?}");
    let sent = requests[1]["messages"].as_array().unwrap();
    let assistant = sent.iter().rfind(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"], "{}",
        "the cut-off arguments are not sent back for the server to choke on: {assistant}"
    );
    let note = sent.last().unwrap();
    assert_eq!(note["role"], "tool");
    assert!(
        note["content"].as_str().unwrap().contains("\"truncated\""),
        "{note}"
    );

    let task_id = task_of(answer["id"].as_str().unwrap());
    let task = get_json(&child, &format!("/v1/tasks/{task_id}")).await;
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(task["result"]["truncated"], true, "{task}");
    assert_eq!(task["result"]["finish_reason"], "length", "{task}");
    assert_eq!(
        task["result"]["usage"]["model"],
        format!("mock/{SERVED}"),
        "usage is counted under the model the server named: {task}"
    );
    let kinds: Vec<Value> = events(&child, &task_id).await;
    assert!(
        !kinds.iter().any(|e| e["type"] == "tool_start"),
        "the cut-off call never ran: {kinds:?}"
    );
    let session = get_text(&child, "/v1/sessions/agent:story:openai:direct:plain").await;
    assert_eq!(
        session.matches("\"truncated\":true").count(),
        2,
        "both cut-off replies are marked in the transcript: {session}"
    );

    // Streamed: the same, and the last chunk says "length".
    let (status, body) = completion(&child, ask("streamed", true)).await;
    assert_eq!(status, 200, "{body}");
    let (content, finish, _) = read_stream(&body);
    assert_eq!(
        (content.as_str(), finish.as_str()),
        ("He was a fierce", "length")
    );

    // A 500 that blames the request is not tried again: neither by the client nor the turn.
    let (_, failed) = post_task(&child, "story", json!({ "text": "blame", "wait": true })).await;
    assert_eq!(
        failed["state"], "failed",
        "not retried, not dead-lettered: {failed}"
    );
    let blamed = server
        .requests()
        .iter()
        .filter(|r| last_user(r) == "blame")
        .count();
    assert_eq!(blamed, 1, "the invalid request was sent once");
    stop(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streamed_text_equals_the_answer_after_a_tool_step_a_500_and_cut_streams() {
    let seen = AtomicUsize::new(0);
    let server = ScriptedServer::with_responder(move |req| {
        if last_user(req) != "sea" {
            return Turn::text("re: other");
        }
        match seen.fetch_add(1, Ordering::SeqCst) {
            // A step with text that ends in a tool call.
            0 => Turn::sse(
                vec![
                    role(),
                    text("Let me look first. "),
                    call("read", r#"{"path":"notes.txt"}"#),
                    chunk(json!({}), Some("tool_calls")),
                ],
                true,
            ),
            // A 500 after the tool step, then a stream cut after five chunks: the client's one
            // retry is spent, the turn fails and is tried again from its journal.
            1 => Turn::http_error(500),
            2 | 3 => cut_stream(),
            _ => Turn::sse(
                vec![
                    role(),
                    text("The sea, "),
                    text("a mystic realm."),
                    chunk(json!({}), Some("stop")),
                    usage_chunk(),
                ],
                true,
            ),
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 1)
        .write("agents.d/poet.toml", FAST_RETRIES);
    let log = project.path().join("daemon.log");
    let child = {
        let mut cmd = project.clawbus();
        cmd.args(["up", "--port", "0"]).env("RUST_LOG", "info");
        let file = std::fs::File::create(&log).unwrap();
        spawn_up_logging(&project, cmd, file.into()).await
    };

    let body = json!({ "model": "agent:poet", "stream": true,
                       "messages": [{ "role": "user", "content": "sea" }] });
    let (status, body) = completion(&child, body).await;
    assert_eq!(status, 200, "{body}");
    let (content, finish, id) = read_stream(&body);
    let task_id = task_of(&id);
    let task = get_json(&child, &format!("/v1/tasks/{task_id}")).await;
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(task["result"]["text"], "The sea, a mystic realm.");
    assert_eq!(
        content, "The sea, a mystic realm.",
        "the stream carries the stored answer, nothing of the tool step or the cut attempts"
    );
    assert_eq!(finish, "stop");
    assert_eq!(server.request_count(), 5);

    // Clients that show the steps see the withdrawn text reset, and each retry's cause.
    let events = events(&child, &task_id).await;
    let resets: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "reset")
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(resets, ["tool_calls", "failed", "retry"], "{events:?}");
    let retries: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "retry")
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(retries.len(), 3, "{events:?}");
    assert!(
        retries.iter().all(|r| *r != "nacked"),
        "each retry names its cause: {retries:?}"
    );
    assert!(
        retries
            .iter()
            .any(|r| r.starts_with("transient: ") && r.contains("without [DONE]")),
        "the turn's retry says why: {retries:?}"
    );
    // Text streamed after the last reset is the answer.
    let last_reset = events.iter().rposition(|e| e["type"] == "reset").unwrap();
    let after: String = events[last_reset..]
        .iter()
        .filter(|e| e["type"] == "delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(after, "The sea, a mystic realm.");

    // The failed attempt logs the model calls it made, not 0.
    let mut logged = String::new();
    eventually("the retry is logged", async || {
        logged = std::fs::read_to_string(&log).unwrap_or_default();
        logged.contains("Turn failed; trying again.")
    })
    .await;
    let line = logged
        .lines()
        .find(|l| l.contains("Turn failed; trying again."))
        .unwrap();
    assert!(line.contains("iterations=2"), "{line}");
    stop(child).await;
}

/// Over the WebSocket gateway: `chat` events carry only the answer (no delta of the tool step's
/// text), `agent` events show the steps and withdraw the tool step's text with a reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_chat_events_carry_only_the_answer_and_agent_events_reset_a_tool_steps_text() {
    let server = ScriptedServer::with_responder(|req| {
        if last_role(req) == "tool" {
            return Turn::text_chunks(vec!["All ", "done."]);
        }
        Turn::sse(
            vec![
                role(),
                text("Checking. "),
                call("read", r#"{"path":"notes.txt"}"#),
                chunk(json!({}), Some("tool_calls")),
            ],
            true,
        )
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "");
    let up = Up::start(&project).await;
    let (mut c, hello) = Client::connect(&up, &up.token).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let params = json!({ "message": "go", "agentId": "echo", "sessionKey": "s1", "idempotencyKey": "ws-reset" });
    let accepted = c.call("agent", params).await;
    let run = accepted["runId"].as_str().unwrap().to_string();
    let of_run = |p: &Value| p["runId"] == run.as_str();
    let last = c
        .event_where("chat", |p| of_run(p) && p["state"] == "final")
        .await;
    assert_eq!(
        last["payload"]["message"]["content"][0]["text"], "All done.",
        "{last}"
    );
    let mine = |name: &str| -> Vec<Value> {
        c.events
            .iter()
            .filter(|e| e["event"] == name && of_run(&e["payload"]))
            .map(|e| e["payload"].clone())
            .collect()
    };
    // Every event before the final one is in `c.events`: no chat event came before it.
    let chats = mine("chat");
    assert!(chats.is_empty(), "only the final answer: {chats:?}");
    let assistant: Vec<Value> = mine("agent")
        .into_iter()
        .filter(|p| p["stream"] == "assistant")
        .map(|p| p["data"].clone())
        .collect();
    let reset = assistant
        .iter()
        .position(|d| d["reset"] == true)
        .unwrap_or_else(|| panic!("a reset: {assistant:?}"));
    assert_eq!(assistant[reset]["reason"], "tool_calls");
    assert_eq!(assistant[reset]["text"], "");
    assert_eq!(assistant[..reset].last().unwrap()["text"], "Checking. ");
    assert_eq!(assistant.last().unwrap()["text"], "All done.");
}
