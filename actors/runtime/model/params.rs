//! Per-agent request parameters (`[model_params]` of an agent file), as the clients send them.

use serde_json::{Map, Value};

use super::{ChatRequest, Role};

pub use clawbus_core::config::{
    ModelParams, RESERVED_BODY_KEYS, ReasoningEffort, Stop, ToolChoice,
};

/// What to send for `req` when the agent's choice is `choice`: a choice that forces a call
/// (`required`, a tool name) holds for the first round of a turn only; once a tool result follows
/// the user's message the model gets `auto`, so it can answer in text instead of calling tools
/// forever.
pub(super) fn tool_choice_for(choice: &ToolChoice, req: &ChatRequest) -> ToolChoice {
    match choice {
        ToolChoice::Required | ToolChoice::Tool(_) if after_tool_result(req) => ToolChoice::Auto,
        other => other.clone(),
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

/// Sets every key of `extra` in `body` (an object), replacing what was there.
pub(crate) fn merge_extra(body: &mut Value, extra: &Map<String, Value>) {
    if let Value::Object(map) = body {
        for (key, value) in extra {
            map.insert(key.clone(), value.clone());
        }
    }
}
