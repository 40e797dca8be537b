//! Figures, printed, never asserted: `cargo bench --bench stream`.
//!
//! The client's own cost per streamed model call (SSE parsing, delta accumulation, the checks
//! and the observer), excluding the model, for both providers: 1,000 calls each answering 200
//! text deltas, recorded in each provider's wire format.
//! 1. Pure parse: the recorded body folded by the client's `decode_stream` (the same code a
//!    streamed call runs), no network.
//! 2. Loopback: `complete_observed` against a local server that answers the recorded body at
//!    once, and the floor of the same request read whole by a bare reqwest client; the difference
//!    is the client's overhead on a real connection.
//!
//! A run on the 2-core development machine (release, load average ≈ 11 from other builds, so the
//! p99 column is mostly the scheduler), medians over 1,000 calls:
//!
//! | path | OpenAI SSE (33 KB) | Anthropic SSE (25 KB) |
//! |---|---|---|
//! | pure parse, per call | 222–237 µs | 165 µs |
//! | pure parse, per delta | 1.1–1.2 µs | 0.8 µs |
//! | loopback client call | 313 µs | 246–248 µs |
//! | loopback floor (reqwest, body read whole) | 63–65 µs | 54 µs |
//! | client overhead over the floor, per call | 249–251 µs | 192–194 µs |
//! | client overhead over the floor, per delta | 1.2–1.3 µs | 1.0 µs |
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use axum::Router;
use axum::http::header;
use axum::routing::post;
use clawbus::model::{
    AnthropicClient, AnthropicConfig, ChatMessage, ChatModel, ChatRequest, ModelObserver,
    OpenAiClient, OpenAiConfig,
};
use serde_json::json;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const CALLS: usize = 1_000;
const DELTAS: usize = 200;

/// The words each delta carries: `w<n> `.
fn word(n: usize) -> String {
    format!("w{n} ")
}

fn expected_text() -> String {
    (0..DELTAS).map(word).collect()
}

/// An OpenAI `chat.completion.chunk` stream: a role chunk, 200 content deltas, a finish chunk
/// with usage, `[DONE]`.
fn openai_body() -> String {
    let mut out = String::new();
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
            "model": "bench", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
        })
    };
    let _ = write!(
        out,
        "data: {}\n\n",
        chunk(json!({ "role": "assistant", "content": "" }), None)
    );
    for n in 0..DELTAS {
        let _ = write!(
            out,
            "data: {}\n\n",
            chunk(json!({ "content": word(n) }), None)
        );
    }
    let mut last = chunk(json!({}), Some("stop"));
    last["usage"] =
        json!({ "prompt_tokens": 20, "completion_tokens": DELTAS, "total_tokens": 20 + DELTAS });
    let _ = write!(out, "data: {last}\n\ndata: [DONE]\n\n");
    out
}

/// An Anthropic Messages stream: `message_start`, a text block of 200 `text_delta`s, `ping`,
/// `message_delta` with the stop reason and usage, `message_stop`.
fn anthropic_body() -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: serde_json::Value| {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
    };
    event(
        "message_start",
        json!({ "type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench", "content": [],
        "stop_reason": null, "usage": { "input_tokens": 20, "output_tokens": 1,
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0 } } }),
    );
    event(
        "content_block_start",
        json!({ "type": "content_block_start", "index": 0,
        "content_block": { "type": "text", "text": "" } }),
    );
    event("ping", json!({ "type": "ping" }));
    for n in 0..DELTAS {
        event(
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0,
            "delta": { "type": "text_delta", "text": word(n) } }),
        );
    }
    event(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": 0 }),
    );
    event(
        "message_delta",
        json!({ "type": "message_delta",
        "delta": { "stop_reason": "end_turn", "stop_sequence": null }, "usage": { "output_tokens": DELTAS } }),
    );
    event("message_stop", json!({ "type": "message_stop" }));
    out
}

/// Counts the streamed text, as the agent's event forwarder would see it.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl ModelObserver for Counting {
    fn text(&self, delta: &str) {
        self.0
            .fetch_add(delta.len(), std::sync::atomic::Ordering::Relaxed);
    }
    fn retry(&self, _: u32, _: Duration, _: &clawbus::model::ModelError) {}
}

fn request(model: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        messages: vec![ChatMessage::system("bench"), ChatMessage::user("go")],
        tools: Default::default(),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (openai, anthropic) = (openai_body(), anthropic_body());
    println!(
        "bodies: OpenAI {} bytes, Anthropic {} bytes, {DELTAS} deltas each; {CALLS} calls per row",
        openai.len(),
        anthropic.len()
    );
    let addr = rt.block_on(serve(openai.clone(), anthropic.clone()));
    let oa = OpenAiClient::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        api_key: Some("sk-bench".into()),
        timeout: Duration::from_secs(10),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
    })
    .unwrap();
    let an = AnthropicClient::new(AnthropicConfig {
        base_url: format!("http://{addr}"),
        api_key: Some("sk-ant-bench".into()),
        timeout: Duration::from_secs(10),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
        max_tokens: 1000,
    })
    .unwrap();
    let text = expected_text();

    println!("\n| path | provider | median/call | p99/call | median/delta |");
    println!("|---|---|---|---|---|");
    let parse_oa = measure(|| {
        let observer = Counting::default();
        let reply = oa.decode_stream(openai.as_bytes(), &observer).unwrap();
        assert_eq!(reply.text.as_deref(), Some(text.as_str()));
    });
    row("pure parse", "OpenAI SSE", &parse_oa);
    let parse_an = measure(|| {
        let observer = Counting::default();
        let reply = an.decode_stream(anthropic.as_bytes(), &observer).unwrap();
        assert_eq!(reply.text.as_deref(), Some(text.as_str()));
    });
    row("pure parse", "Anthropic SSE", &parse_an);

    let floor = reqwest::Client::new();
    for (name, url, client) in [
        (
            "OpenAI SSE",
            format!("http://{addr}/v1/chat/completions"),
            &oa as &dyn ChatModel,
        ),
        (
            "Anthropic SSE",
            format!("http://{addr}/v1/messages"),
            &an as &dyn ChatModel,
        ),
    ] {
        let raw = rt.block_on(async {
            measure_async(|| async {
                let body = floor
                    .post(&url)
                    .json(&json!({ "model": "bench", "stream": true }))
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                assert!(body.len() > 1000);
            })
            .await
        });
        row("loopback floor (reqwest, body read whole)", name, &raw);
        let req = request("bench");
        let full = rt.block_on(async {
            measure_async(|| async {
                let observer = Counting::default();
                let reply = client.complete_observed(&req, &observer).await.unwrap();
                assert_eq!(reply.text.as_deref(), Some(text.as_str()));
            })
            .await
        });
        row("loopback client call", name, &full);
        let over = median(&full).saturating_sub(median(&raw));
        println!(
            "| client overhead over the floor (median) | {name} | {} | | {} |",
            us(over),
            us(over / DELTAS as u32)
        );
    }
}

/// A local server that answers each provider's endpoint with its recorded body at once.
async fn serve(openai: String, anthropic: String) -> std::net::SocketAddr {
    let sse = |body: String| {
        move || {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "text/event-stream")], body) }
        }
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(sse(openai)))
        .route("/v1/messages", post(sse(anthropic)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn measure(mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..50 {
        f();
    }
    (0..CALLS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect()
}

async fn measure_async<F, Fut>(mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..50 {
        f().await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        f().await;
        samples.push(started.elapsed());
    }
    samples
}

fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 50)
}

fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn row(path: &str, provider: &str, samples: &[Duration]) {
    let m = median(samples);
    println!(
        "| {path} | {provider} | {} | {} | {} |",
        us(m),
        us(percentile(samples, 99)),
        us(m / DELTAS as u32)
    );
}
