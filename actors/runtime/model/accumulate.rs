//! Folds `chat.completion.chunk` deltas (or one whole `chat.completion`) into a [`ModelReply`].
//!
//! Works on `serde_json::Value` rather than strict structs: "OpenAI-compatible" servers omit
//! fields, send `null` or `""` where OpenAI sends nothing, send usage-only chunks with
//! `choices: []`, or forget the tool-call `index`.

use std::collections::HashSet;

use serde_json::Value;

use super::{ModelReply, ToolCall, Usage};

/// How a streamed tool-call fragment finds the call it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CallKey {
    /// The `index` field (OpenAI).
    Index(u64),
    /// The `id` field, for servers that omit `index`.
    Id(String),
    /// Position in the delta's `tool_calls` array, when both are missing.
    Position(usize),
}

#[derive(Debug)]
struct PartialCall {
    key: CallKey,
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates one reply from successive chunks.
#[derive(Debug, Default)]
pub(crate) struct ReplyAccumulator {
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    chunks: usize,
    /// The `model` the server named in its chunks.
    served_model: Option<String>,
}

impl ReplyAccumulator {
    /// The assistant text accumulated so far.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Bytes of content accumulated so far: the text plus every tool call's arguments.
    pub(crate) fn size(&self) -> usize {
        self.calls
            .iter()
            .fold(self.text.len(), |n, c| n.saturating_add(c.arguments.len()))
    }

    /// Whether a non-empty `finish_reason` has arrived.
    pub(crate) fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Number of chunks applied so far.
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// Applies one chunk (streamed) or one whole completion (`message` instead of `delta`).
    /// An `error` object in the payload is returned as `Err` with its message.
    pub(crate) fn apply(&mut self, payload: &Value) -> Result<(), ChunkError> {
        if let Some(error) = payload.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned);
            return Err(ChunkError::Server(
                message.unwrap_or_else(|| error.to_string()),
            ));
        }
        if !payload.is_object() {
            return Err(ChunkError::NotObject(short(&payload.to_string())));
        }
        self.chunks += 1;
        if let Some(model) = non_empty_str(payload.get("model")) {
            if self.served_model.as_deref() != Some(model) {
                self.served_model = Some(model.to_owned());
            }
        }
        if let Some(usage) = payload.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                prompt_tokens: usage
                    .get("prompt_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                completion_tokens: usage
                    .get("completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cache_read_tokens: usage
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64),
                cache_write_tokens: None,
            });
        }
        let Some(choice) = first_choice(payload) else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            if !reason.is_empty() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        let delta = match choice.get("delta").filter(|d| d.is_object()) {
            Some(delta) => delta,
            None => match choice.get("message") {
                Some(message) => message,
                None => return Ok(()),
            },
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.push_str(text);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                self.apply_call(position, call);
            }
        }
        Ok(())
    }

    fn apply_call(&mut self, position: usize, call: &Value) {
        let id = non_empty_str(call.get("id"));
        let function = call.get("function");
        let name = non_empty_str(function.and_then(|f| f.get("name")));
        let key = match (call.get("index").and_then(Value::as_u64), id) {
            (Some(index), _) => CallKey::Index(index),
            (None, Some(id)) => CallKey::Id(id.to_owned()),
            (None, None) => CallKey::Position(position),
        };
        // Search from the end: some servers reuse index 0 for parallel calls, each with its own id.
        let found = self.calls.iter().rposition(|c| {
            c.key == key
                && !matches!((id, c.id.as_str()), (Some(new), old) if !old.is_empty() && new != old)
        });
        let slot = match found {
            Some(i) => i,
            None => {
                self.calls.push(PartialCall {
                    key,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let Some(partial) = self.calls.get_mut(slot) else {
            return;
        };
        if let Some(id) = id {
            if partial.id.is_empty() {
                partial.id = id.to_owned();
            }
        }
        if let Some(name) = name {
            // OpenAI sends the name whole once; some servers repeat it, a few stream it in pieces.
            if partial.name != name {
                partial.name.push_str(name);
            }
        }
        match function.and_then(|f| f.get("arguments")) {
            // A server that repeats a finished call whole (same id, same arguments) in a later
            // chunk: appending would garble the arguments, so the repeat is dropped.
            Some(Value::String(fragment)) if is_repeat(partial, id, fragment) => {}
            Some(Value::String(fragment)) => partial.arguments.push_str(fragment),
            Some(Value::Null) | None => {}
            // A few servers send the arguments already parsed.
            Some(other) => partial.arguments = other.to_string(),
        }
    }

    /// The finished reply. Empty arguments become `{}`; a call that repeats an earlier one
    /// (same id, name and arguments) is dropped, so it runs once; a call whose id is missing or
    /// already taken by another call of this reply gets a fresh `call_<n>`, so each tool result
    /// pairs with exactly one call.
    pub(crate) fn finish(self) -> ModelReply {
        let mut kept: Vec<PartialCall> = Vec::with_capacity(self.calls.len());
        for mut call in self.calls {
            if call.arguments.trim().is_empty() {
                call.arguments = "{}".to_owned();
            }
            let repeat = !call.id.is_empty()
                && kept.iter().any(|k| {
                    k.id == call.id
                        && k.name == call.name
                        && same_arguments(&k.arguments, &call.arguments)
                });
            if !repeat {
                kept.push(call);
            }
        }
        // Ids as sent, each kept by its first call; generated ids avoid all of them.
        let sent: HashSet<String> = kept.iter().map(|c| c.id.clone()).collect();
        let mut taken: HashSet<String> = HashSet::new();
        let mut tool_calls = Vec::with_capacity(kept.len());
        for (i, call) in kept.into_iter().enumerate() {
            let mut id = call.id;
            if id.is_empty() || taken.contains(&id) {
                let mut n = i + 1;
                id = format!("call_{n}");
                while taken.contains(&id) || sent.contains(&id) {
                    n += 1;
                    id = format!("call_{n}");
                }
            }
            taken.insert(id.clone());
            tool_calls.push(ToolCall {
                id,
                name: call.name,
                arguments: call.arguments,
            });
        }
        ModelReply {
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: None,
            served_model: self.served_model,
        }
    }
}

/// Whether `fragment` repeats the whole, already complete arguments of `partial` under the
/// same id.
fn is_repeat(partial: &PartialCall, id: Option<&str>, fragment: &str) -> bool {
    id.is_some_and(|id| id == partial.id)
        && !fragment.trim().is_empty()
        && fragment == partial.arguments
        && serde_json::from_str::<Value>(fragment).is_ok()
}

/// Whether two argument strings say the same: equal as JSON, or equal as text.
fn same_arguments(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn first_choice(payload: &Value) -> Option<&Value> {
    let choices = payload.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| choices.first())
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The first 200 characters of `s`, for error messages.
pub(crate) fn short(s: &str) -> String {
    truncate_chars(s, 200)
}

/// `s` cut to at most `max` characters, with `…` when something was cut.
pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// A chunk that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChunkError {
    /// An `error` object: the server's message (or the object, when it has none).
    #[error("{0}")]
    Server(String),
    /// Not a JSON object (the payload, shortened).
    #[error("expected a JSON object, got {0}")]
    NotObject(String),
}
