//! The payloads of an agent task on the bus: what it asks ([`TaskInput`], `{"text": …}`) and
//! what its success records ([`TaskResult`], `{"text": …, "iterations": …, "usage": …}`).
//!
//! The bus carries both as JSON values (it knows nothing of agents); these types are their one
//! spelling, so no part of the daemon reads a payload key by hand.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a task asks an agent: one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInput {
    /// The message.
    pub text: String,
}

/// A task payload that is not a [`TaskInput`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task payload has no \"text\" string")]
pub struct PayloadError;

impl TaskInput {
    /// The task that asks `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// Its payload on the bus: `{"text": …}`.
    pub fn to_payload(&self) -> Value {
        serde_json::json!({ "text": self.text })
    }

    /// The message of a task `payload`, borrowed; `Err` when it has no `text` string.
    pub fn text_of(payload: &Value) -> Result<&str, PayloadError> {
        payload
            .get("text")
            .and_then(Value::as_str)
            .ok_or(PayloadError)
    }
}

/// What a task's success records: the answer, and what the turn that wrote it adds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// The answer.
    pub text: String,
    /// Model calls the turn made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Tokens (and cost, where priced) by model, as the turn's usage report writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The output-token limit cut the answer off: it is incomplete.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Why the model stopped, where it is not the normal end (`length` for a truncated answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// A broadcast group's members: one row per member task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<Value>>,
}

impl TaskResult {
    /// A result that is only the answer `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Marks the answer cut off by the output-token limit (`truncated`, `finish_reason: length`).
    pub fn truncated(mut self) -> Self {
        self.truncated = true;
        self.finish_reason = Some("length".into());
        self
    }

    /// Its value on the bus (what `Outcome::Succeeded` records).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The answer of a recorded `result`, borrowed; `None` when it has no `text` string (a
    /// result recorded by something other than an agent's turn).
    pub fn text_of(result: &Value) -> Option<&str> {
        result.get("text").and_then(Value::as_str)
    }

    /// The answer of a recorded `result` as shown to a person: its `text` string, else its
    /// `text` value as JSON, else the whole result as JSON.
    pub fn shown(result: &Value) -> String {
        match result.get("text") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => result.to_string(),
        }
    }

    /// The answer of a recorded `result` as a JSON value, kept as recorded: its `text` value,
    /// else the whole result.
    pub fn text_value_of(result: &Value) -> &Value {
        result.get("text").unwrap_or(result)
    }

    /// Whether a recorded `result` is marked cut off by the output-token limit.
    pub fn is_truncated(result: &Value) -> bool {
        result.get("truncated").and_then(Value::as_bool) == Some(true)
    }

    /// The usage report of a recorded `result`, if it has one.
    pub fn usage_of(result: &Value) -> Option<&Value> {
        result.get("usage")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_keeps_its_wire_shape() {
        let input = TaskInput::new("hi");
        assert_eq!(input.to_payload(), json!({ "text": "hi" }));
        assert_eq!(TaskInput::text_of(&input.to_payload()), Ok("hi"));
        assert_eq!(TaskInput::text_of(&json!({ "text": 3 })), Err(PayloadError));
        assert_eq!(
            PayloadError.to_string(),
            "task payload has no \"text\" string"
        );
    }

    #[test]
    fn result_keeps_its_wire_shape() {
        let plain = TaskResult {
            iterations: Some(2),
            usage: Some(json!({ "total": 5 })),
            ..TaskResult::text("done")
        };
        assert_eq!(
            plain.to_value(),
            json!({ "text": "done", "iterations": 2, "usage": { "total": 5 } })
        );
        let cut = TaskResult::text("par").truncated();
        assert_eq!(
            cut.to_value(),
            json!({ "text": "par", "truncated": true, "finish_reason": "length" })
        );
        let back: TaskResult = serde_json::from_value(cut.to_value()).unwrap();
        assert_eq!(back, cut);
        assert_eq!(TaskResult::text_of(&cut.to_value()), Some("par"));
        assert_eq!(TaskResult::text_of(&json!("bare")), None);
        assert!(TaskResult::is_truncated(&cut.to_value()));
        assert!(!TaskResult::is_truncated(&plain.to_value()));
        assert_eq!(
            TaskResult::usage_of(&plain.to_value()),
            Some(&json!({ "total": 5 }))
        );
    }

    #[test]
    fn a_result_is_shown_by_its_text_else_as_json() {
        assert_eq!(TaskResult::shown(&json!({ "text": "hi" })), "hi");
        assert_eq!(TaskResult::shown(&json!({ "text": 3 })), "3");
        assert_eq!(TaskResult::text_value_of(&json!({ "text": 3 })), &json!(3));
        assert_eq!(TaskResult::text_value_of(&json!("bare")), &json!("bare"));
        assert_eq!(TaskResult::shown(&json!({ "n": 1 })), r#"{"n":1}"#);
    }
}
