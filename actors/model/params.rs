//! Per-agent request parameters (`[model_params]` of an agent file), as the clients send them.

use serde_json::{Map, Value};

use super::{ChatRequest, Role};

/// `tool_choice`: whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some tool (Anthropic: `any`).
    Required,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

impl ToolChoice {
    /// What to send for `req`: a choice that forces a call (`required`, a tool name) holds for
    /// the first round of a turn only; once a tool result follows the user's message the model
    /// gets `auto`, so it can answer in text instead of calling tools forever.
    pub fn for_request(&self, req: &ChatRequest) -> ToolChoice {
        match self {
            Self::Required | Self::Tool(_) if after_tool_result(req) => Self::Auto,
            other => other.clone(),
        }
    }
}

/// Whether a tool result comes after the last user message: a later round of a turn.
pub fn after_tool_result(req: &ChatRequest) -> bool {
    req.messages
        .iter()
        .rev()
        .take_while(|m| m.role != Role::User)
        .any(|m| m.role == Role::Tool)
}

/// `reasoning_effort`: how hard a reasoning model thinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEffort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
}

impl ReasoningEffort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// `stop`: one stop sequence, or several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `stop = "END"`.
    One(String),
    /// `stop = ["END", "###"]`.
    Many(Vec<String>),
}

impl Stop {
    /// As written: a string or an array (OpenAI accepts both).
    pub fn to_json(&self) -> Value {
        match self {
            Self::One(s) => Value::String(s.clone()),
            Self::Many(v) => Value::from(v.clone()),
        }
    }

    /// Always a list (Anthropic's `stop_sequences`).
    pub fn to_list(&self) -> Value {
        match self {
            Self::One(s) => Value::from(vec![s.clone()]),
            Self::Many(v) => Value::from(v.clone()),
        }
    }
}

/// The validated `[model_params]` of an agent; `None` fields are not sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelParams {
    /// Sampling temperature, 0 to 2.
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1.
    pub top_p: Option<f64>,
    /// The most tokens one answer may have (overrides `[providers.x] max_tokens`).
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Option<Stop>,
    /// Sampling seed (OpenAI-compatible servers only).
    pub seed: Option<i64>,
    /// Whether and which tool the model must call (see [`ToolChoice::for_request`]).
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one answer.
    pub parallel_tool_calls: Option<bool>,
    /// Effort of reasoning models (OpenAI-compatible servers only).
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Merged into the request body last, key by key: server-specific knobs.
    pub extra: Map<String, Value>,
}

/// Body keys `extra` may not set: the client owns them.
pub const RESERVED_BODY_KEYS: &[&str] = &["model", "messages", "stream", "tools", "system"];

/// Sets every key of `extra` in `body` (an object), replacing what was there.
pub(crate) fn merge_extra(body: &mut Value, extra: &Map<String, Value>) {
    if let Value::Object(map) = body {
        for (key, value) in extra {
            map.insert(key.clone(), value.clone());
        }
    }
}
