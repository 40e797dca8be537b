//! [`Turn`]: one scripted answer, and how it renders as SSE chunks or one JSON completion.

use serde_json::{Value, json};

/// One scripted answer of the [`ScriptedServer`](super::ScriptedServer).
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Assistant text, streamed as one content delta per chunk.
    Text {
        /// Content fragments, one SSE chunk each.
        chunks: Vec<String>,
    },
    /// One or more (parallel) tool calls.
    ToolCalls {
        /// `(tool name, arguments as raw JSON text)`.
        calls: Vec<(String, String)>,
        /// Split each call's arguments into fragments of this many characters.
        split: Option<usize>,
    },
    /// An HTTP error answer.
    HttpError {
        /// Status code.
        status: u16,
        /// Body text.
        body: String,
        /// `Retry-After` header, in seconds.
        retry_after: Option<u64>,
    },
    /// Accept the request and never answer (until the server is dropped).
    Hang,
    /// A stream of content deltas of `chunk_bytes` each that never ends (until the client
    /// hangs up): a provider gone wrong.
    Endless {
        /// Bytes of content per chunk.
        chunk_bytes: usize,
    },
    /// Wait until the gate opens, then answer `then`.
    Gated {
        /// Opened by the test.
        gate: Gate,
        /// The answer once it is open.
        then: Box<Turn>,
    },
    /// An answer that never ends, in one of the hostile shapes of [`Flood`](super::Flood).
    Flood(super::Flood),
    /// A 200 answer with this content type and body, verbatim: for servers that bend the format.
    Raw {
        /// `Content-Type` header.
        content_type: String,
        /// Body bytes, as text.
        body: String,
    },
}

/// A gate a test opens to let gated answers through; clones share one gate.
#[derive(Clone)]
pub struct Gate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self(std::sync::Arc::new(tokio::sync::watch::channel(false).0))
    }

    /// Opens it: every gated answer waiting, and every later one, goes through.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Waits until it is open.
    pub async fn opened(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Gate").field(&*self.0.borrow()).finish()
    }
}

impl Turn {
    /// `then`, once `gate` is open.
    pub fn gated(gate: &Gate, then: Turn) -> Self {
        Self::Gated {
            gate: gate.clone(),
            then: Box::new(then),
        }
    }

    /// A text answer in one content chunk.
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text {
            chunks: vec![s.into()],
        }
    }

    /// A text answer streamed as these content fragments.
    pub fn text_chunks(chunks: Vec<&str>) -> Self {
        Self::Text {
            chunks: chunks.into_iter().map(str::to_owned).collect(),
        }
    }

    /// One tool call. A `Value::String` is sent verbatim as the arguments text (so a test can
    /// send invalid JSON); any other value is serialised.
    pub fn tool_call(name: impl Into<String>, args_json: Value) -> Self {
        Self::tool_calls(vec![(name, args_json)])
    }

    /// Several tool calls in one answer (parallel calls), in order.
    pub fn tool_calls<N: Into<String>>(calls: Vec<(N, Value)>) -> Self {
        let calls = calls
            .into_iter()
            .map(|(n, a)| (n.into(), args_text(a)))
            .collect();
        Self::ToolCalls { calls, split: None }
    }

    /// An HTTP error with a body naming the status.
    pub fn http_error(status: u16) -> Self {
        Self::HttpError {
            status,
            body: format!("{{\"error\":{{\"message\":\"scripted HTTP {status}\"}}}}"),
            retry_after: None,
        }
    }

    /// HTTP 429 with a `Retry-After: <secs>` header.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let mut turn = Self::http_error(429);
        if let Self::HttpError { retry_after, .. } = &mut turn {
            *retry_after = Some(retry_after_secs);
        }
        turn
    }

    /// Accepts the request and never answers.
    pub fn hang() -> Self {
        Self::Hang
    }

    /// A 200 answer with a verbatim body, e.g. hand-written SSE.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::Raw {
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// A 200 event stream of these chunk objects, one `data:` event each, verbatim, then
    /// `data: [DONE]` when `done`: what a real server sent (llama-server's
    /// `finish_reason: "length"` mid tool call, a stream cut after a few chunks).
    pub fn sse(chunks: Vec<Value>, done: bool) -> Self {
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            body.push_str("data: [DONE]\n\n");
        }
        Self::raw("text/event-stream", body)
    }

    /// Splits each tool call's arguments into `n`-character fragments, one SSE chunk each.
    /// No effect on other turns, or with `n == 0`.
    pub fn split_args(mut self, n: usize) -> Self {
        if let Self::ToolCalls { split, .. } = &mut self {
            *split = (n > 0).then_some(n);
        }
        self
    }
}

fn args_text(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// What a text or tool-call turn answers, ready to render.
pub(crate) struct Completion<'a> {
    pub(crate) request_no: usize,
    pub(crate) model: &'a str,
    pub(crate) prompt_chars: usize,
    pub(crate) turn: &'a Turn,
}

impl Completion<'_> {
    fn id(&self) -> String {
        format!("chatcmpl-scripted-{}", self.request_no)
    }

    fn call_id(&self, i: usize) -> String {
        format!("call_{}_{}", self.request_no, i + 1)
    }

    fn usage(&self, output_chars: usize) -> Value {
        let prompt = (self.prompt_chars / 4) as u64;
        let completion = (output_chars / 4 + 1) as u64;
        json!({ "prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion })
    }

    fn chunk(&self, choices: Value) -> String {
        let chunk = json!({
            "id": self.id(), "object": "chat.completion.chunk", "created": 0,
            "model": self.model, "choices": choices,
        });
        format!("data: {chunk}\n\n")
    }

    fn delta(&self, delta: Value, finish: Option<&str>) -> String {
        self.chunk(json!([{ "index": 0, "delta": delta, "finish_reason": finish }]))
    }

    /// The SSE events of the answer, ending with `data: [DONE]`; a usage-only chunk
    /// (`choices: []`) precedes it when `include_usage` is set, as OpenAI does.
    pub(crate) fn sse_events(&self, include_usage: bool) -> Vec<String> {
        let mut events = Vec::new();
        let (finish, output_chars) = match self.turn {
            Turn::Text { chunks } => {
                events.push(self.delta(json!({ "role": "assistant", "content": "" }), None));
                for c in chunks {
                    events.push(self.delta(json!({ "content": c }), None));
                }
                ("stop", chunks.iter().map(|c| c.chars().count()).sum())
            }
            Turn::ToolCalls { calls, split } => {
                events.push(self.delta(json!({ "role": "assistant", "content": null }), None));
                for (i, (name, args)) in calls.iter().enumerate() {
                    let head = json!({ "index": i, "id": self.call_id(i), "type": "function",
                                       "function": { "name": name, "arguments": "" } });
                    events.push(self.delta(json!({ "tool_calls": [head] }), None));
                    for fragment in fragments(args, *split) {
                        let part = json!({ "index": i, "function": { "arguments": fragment } });
                        events.push(self.delta(json!({ "tool_calls": [part] }), None));
                    }
                }
                (
                    "tool_calls",
                    calls.iter().map(|(n, a)| n.len() + a.len()).sum(),
                )
            }
            _ => return Vec::new(),
        };
        events.push(self.delta(json!({}), Some(finish)));
        if include_usage {
            let usage = json!({
                "id": self.id(), "object": "chat.completion.chunk", "created": 0,
                "model": self.model, "choices": [], "usage": self.usage(output_chars),
            });
            events.push(format!("data: {usage}\n\n"));
        }
        events.push("data: [DONE]\n\n".to_owned());
        events
    }

    /// The answer as one non-streamed `chat.completion` object.
    pub(crate) fn json(&self) -> Value {
        let (message, finish, output_chars) = match self.turn {
            Turn::Text { chunks } => {
                let text = chunks.concat();
                let n = text.chars().count();
                (json!({ "role": "assistant", "content": text }), "stop", n)
            }
            Turn::ToolCalls { calls, .. } => {
                let wire: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        json!({ "id": self.call_id(i), "type": "function",
                                "function": { "name": name, "arguments": args } })
                    })
                    .collect();
                let n = calls.iter().map(|(n, a)| n.len() + a.len()).sum();
                (
                    json!({ "role": "assistant", "content": null, "tool_calls": wire }),
                    "tool_calls",
                    n,
                )
            }
            _ => (json!({ "role": "assistant", "content": null }), "stop", 0),
        };
        json!({
            "id": self.id(), "object": "chat.completion", "created": 0, "model": self.model,
            "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
            "usage": self.usage(output_chars),
        })
    }
}

/// `args` cut into `n`-character pieces (whole when `n` is `None`); at least one piece.
fn fragments(args: &str, n: Option<usize>) -> Vec<String> {
    let Some(n) = n else {
        return vec![args.to_owned()];
    };
    let chars: Vec<char> = args.chars().collect();
    let pieces: Vec<String> = chars.chunks(n).map(|c| c.iter().collect()).collect();
    if pieces.is_empty() {
        vec![String::new()]
    } else {
        pieces
    }
}
