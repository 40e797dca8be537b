//! Folds the events of a streamed Anthropic message (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`) into a [`ModelReply`].

use serde_json::Value;

use super::super::accumulate::short;
use super::super::{ModelReply, ToolCall, Usage};

/// One content block of the message being streamed.
#[derive(Debug)]
enum Block {
    /// `text`: its text so far.
    Text(String),
    /// `tool_use`: id, name, and the `input_json_delta` fragments so far (or the whole input
    /// when the block arrived complete).
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// Any other block type (`thinking`, …): not part of the reply.
    Other,
}

/// What one event meant to the caller.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step<'a> {
    /// A piece of assistant text.
    Text(&'a str),
    /// `message_stop`: the message is complete.
    Stop,
    /// Anything else (`ping`, block boundaries, usage).
    Other,
}

/// Token counts as Anthropic reports them: `input_tokens` excludes the cached part.
#[derive(Debug, Default)]
struct RawUsage {
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    seen: bool,
}

impl RawUsage {
    fn update(&mut self, usage: &Value) {
        let get = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(n) = get("input_tokens") {
            self.input = n;
            self.seen = true;
        }
        if let Some(n) = get("output_tokens") {
            self.output = n;
            self.seen = true;
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.cache_read = Some(n);
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.cache_write = Some(n);
        }
    }

    /// `prompt_tokens` counts every input token, cached or not, as OpenAI's does.
    fn finish(&self) -> Option<Usage> {
        self.seen.then(|| Usage {
            prompt_tokens: self
                .input
                .saturating_add(self.cache_read.unwrap_or(0))
                .saturating_add(self.cache_write.unwrap_or(0)),
            completion_tokens: self.output,
            cache_read_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
        })
    }
}

/// Accumulates one message from its events.
#[derive(Debug, Default)]
pub(super) struct MessageAccumulator {
    /// Blocks by their `index`, in order of arrival.
    blocks: Vec<(u64, Block)>,
    stop_reason: Option<String>,
    usage: RawUsage,
    started: bool,
    stopped: bool,
    /// The `model` the message named.
    served_model: Option<String>,
}

impl MessageAccumulator {
    /// Bytes of content so far: text plus tool inputs.
    pub(super) fn size(&self) -> usize {
        self.blocks.iter().fold(0usize, |n, (_, b)| {
            n.saturating_add(match b {
                Block::Text(t) => t.len(),
                Block::ToolUse { json, .. } => json.len(),
                Block::Other => 0,
            })
        })
    }

    /// Whether `message_stop` (or a whole, non-streamed message) arrived.
    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    /// Applies one event's JSON payload. An `error` event is returned as `Err` with its type and
    /// message.
    pub(super) fn apply<'a>(&mut self, payload: &'a Value) -> Result<Step<'a>, StreamError> {
        let kind = payload.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(message) = payload.get("message") {
                    self.message(message);
                }
            }
            // A whole message: the answer of a server that ignored `stream: true`.
            "message" => {
                self.started = true;
                self.message(payload);
                self.stopped = true;
                return Ok(Step::Stop);
            }
            "content_block_start" => {
                let index = index_of(payload)?;
                let block = payload.get("content_block").unwrap_or(&Value::Null);
                self.start_block(index, block);
            }
            "content_block_delta" => {
                let index = index_of(payload)?;
                let delta = payload.get("delta").unwrap_or(&Value::Null);
                return self.delta(index, delta);
            }
            "message_delta" => {
                if let Some(reason) = payload
                    .pointer("/delta/stop_reason")
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = payload.get("usage") {
                    self.usage.update(usage);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(Step::Stop);
            }
            "error" => return Err(StreamError::Server(error_text(payload))),
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(Step::Other)
    }

    fn message(&mut self, message: &Value) {
        if let Some(model) = message
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            self.served_model = Some(model.to_owned());
        }
        if let Some(usage) = message.get("usage") {
            self.usage.update(usage);
        }
        if let Some(reason) = message.get("stop_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_owned());
        }
        if let Some(content) = message.get("content").and_then(Value::as_array) {
            for (i, block) in content.iter().enumerate() {
                self.start_block(i as u64, block);
            }
        }
    }

    fn start_block(&mut self, index: u64, block: &Value) {
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let block = match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(text("text")),
            Some("tool_use") => Block::ToolUse {
                id: text("id"),
                name: text("name"),
                // Streamed blocks start with `input: {}` and send the input as deltas.
                json: match block.get("input") {
                    Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                    _ => String::new(),
                },
            },
            _ => Block::Other,
        };
        self.blocks.push((index, block));
    }

    fn delta<'a>(&mut self, index: u64, delta: &'a Value) -> Result<Step<'a>, StreamError> {
        let Some((_, block)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index) else {
            return Err(StreamError::NeverStarted(index));
        };
        let field = |key: &str| delta.get(key).and_then(Value::as_str);
        match (block, delta.get("type").and_then(Value::as_str)) {
            (Block::Text(text), Some("text_delta")) => {
                let piece = field("text").unwrap_or("");
                text.push_str(piece);
                Ok(Step::Text(piece))
            }
            (Block::ToolUse { json, .. }, Some("input_json_delta")) => {
                json.push_str(field("partial_json").unwrap_or(""));
                Ok(Step::Other)
            }
            // `thinking_delta`, `signature_delta`, `citations_delta`, …: not part of the reply.
            _ => Ok(Step::Other),
        }
    }

    /// Whether the message started but the stream ended before `message_stop` and without a
    /// `stop_reason`: most likely a cut connection, which is worth another attempt.
    pub(super) fn cut_short(&self) -> bool {
        self.started && !self.stopped && self.stop_reason.is_none()
    }

    /// The finished reply; fails when the stream ended before the message did.
    pub(super) fn finish(self) -> Result<ModelReply, StreamError> {
        if !self.started {
            return Err(StreamError::NoStart);
        }
        if !self.stopped && self.stop_reason.is_none() {
            return Err(StreamError::NoStop);
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (_, block) in self.blocks {
            match block {
                Block::Text(t) => text.push_str(&t),
                Block::ToolUse { id, name, json } => {
                    let n = tool_calls.len() + 1;
                    tool_calls.push(ToolCall {
                        id: if id.is_empty() {
                            format!("toolu_{n}")
                        } else {
                            id
                        },
                        name,
                        arguments: if json.trim().is_empty() {
                            "{}".to_owned()
                        } else {
                            json
                        },
                    });
                }
                Block::Other => {}
            }
        }
        Ok(ModelReply {
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.finish(),
            model: None,
            served_model: self.served_model,
        })
    }
}

/// Anthropic's `stop_reason` in the OpenAI words the rest of the crate uses.
fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        other => other,
    }
    .to_owned()
}

fn index_of(payload: &Value) -> Result<u64, StreamError> {
    payload
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| StreamError::NoIndex(short(&payload.to_string())))
}

/// What is wrong with a stream of events, or its end.
#[derive(Debug, thiserror::Error)]
pub(super) enum StreamError {
    /// An `error` event: its type and message, as the server sent them.
    #[error("{0}")]
    Server(String),
    /// A content block event without an index (the event, shortened).
    #[error("event without an index: {0}")]
    NoIndex(String),
    /// A delta for a block that never started.
    #[error("content_block_delta for block {0}, which never started")]
    NeverStarted(u64),
    /// The stream ended before `message_start`.
    #[error("the stream ended without message_start")]
    NoStart,
    /// The stream ended before the message did.
    #[error("the stream ended before message_stop and without a stop_reason")]
    NoStop,
}

/// `overloaded_error: Overloaded`, from `{"type":"error","error":{"type","message"}}`.
pub(super) fn error_text(payload: &Value) -> String {
    let error = payload.get("error").unwrap_or(payload);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    match error.get("message").and_then(Value::as_str) {
        Some(message) => format!("{kind}: {message}"),
        None => format!("{kind}: {}", short(&error.to_string())),
    }
}
