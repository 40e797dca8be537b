//! The body of a Messages API request: the conversation as Anthropic content blocks, the system
//! prompt as the top-level `system`, the agent's parameters, and `cache_control` breakpoints.

use serde_json::{Map, Value, json};

use super::super::params::{ModelParams, ToolChoice, merge_extra};
use super::super::{ChatMessage, ChatRequest, ImagePart, Role};

/// The heading that opens the prompt's last, volatile layer (agent, session, model, time): see
/// `crate::prompt`. What comes before it is stable between calls and gets the cache breakpoint.
pub const RUNTIME_HEADING: &str = "# Runtime\n";

fn breakpoint() -> Value {
    json!({ "type": "ephemeral" })
}

/// The JSON body of a streaming `/v1/messages` request.
pub(crate) fn request_body(req: &ChatRequest, params: &ModelParams, max_tokens: u32) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "max_tokens".into(),
        json!(params.max_tokens.unwrap_or(max_tokens)),
    );
    body.insert("stream".into(), json!(true));
    let system = system_blocks(&req.messages);
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages(&req.messages)));
    if !req.tools.is_empty() {
        let mut tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.parameters }))
            .collect();
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), breakpoint());
        }
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(req, params) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(t) = params.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(t) = params.top_p {
        body.insert("top_p".into(), json!(t));
    }
    if let Some(stop) = &params.stop {
        body.insert("stop_sequences".into(), stop.to_list());
    }
    let mut body = Value::Object(body);
    merge_extra(&mut body, &params.extra);
    body
}

/// `{type: auto|any|none|tool}`, with `disable_parallel_tool_use` for `parallel_tool_calls = false`.
fn tool_choice(req: &ChatRequest, params: &ModelParams) -> Option<Value> {
    let choice = params
        .tool_choice
        .as_ref()
        .map(|c| crate::model::params::tool_choice_for(c, req));
    let no_parallel = params.parallel_tool_calls == Some(false);
    let mut wire = match choice {
        None if !no_parallel => return None,
        None | Some(ToolChoice::Auto) => json!({ "type": "auto" }),
        Some(ToolChoice::Required) => json!({ "type": "any" }),
        Some(ToolChoice::None) => return Some(json!({ "type": "none" })),
        Some(ToolChoice::Tool(name)) => json!({ "type": "tool", "name": name }),
    };
    if no_parallel {
        wire["disable_parallel_tool_use"] = json!(true);
    }
    Some(wire)
}

/// Every system message as text blocks. The first is split before its runtime line: the stable
/// part carries the cache breakpoint, the volatile runtime line follows it.
fn system_blocks(messages: &[ChatMessage]) -> Vec<Value> {
    let mut blocks = Vec::new();
    let texts = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref());
    for (i, text) in texts.enumerate() {
        if i > 0 {
            push_text(&mut blocks, text);
            continue;
        }
        let (stable, volatile) = split_runtime(text);
        if !stable.is_empty() {
            blocks.push(json!({ "type": "text", "text": stable, "cache_control": breakpoint() }));
        }
        push_text(&mut blocks, volatile);
    }
    blocks
}

/// `(stable, volatile)`: `text` cut where its last runtime layer starts.
fn split_runtime(text: &str) -> (&str, &str) {
    if text.starts_with(RUNTIME_HEADING) {
        return ("", text);
    }
    let marker = format!("\n{RUNTIME_HEADING}");
    match text.rfind(&marker) {
        Some(at) => text.split_at(at + 1),
        None => (text, ""),
    }
}

fn push_text(blocks: &mut Vec<Value>, text: &str) {
    // The API refuses empty text blocks.
    if !text.is_empty() {
        blocks.push(json!({ "type": "text", "text": text }));
    }
}

/// The conversation as `user`/`assistant` messages of content blocks: tool calls become
/// `tool_use` blocks, tool results `tool_result` blocks of a user message, and consecutive
/// messages of one role are merged, as the API requires alternating roles.
fn messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", text_blocks(m)),
            Role::Assistant => {
                let mut blocks = text_blocks(m);
                blocks.extend(m.tool_calls.iter().map(|c| {
                    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(&c.arguments) })
                }));
                ("assistant", blocks)
            }
            Role::Tool => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or(""),
                });
                let text = m.content.as_deref().filter(|t| !t.is_empty());
                if m.images.is_empty() {
                    if let Some(text) = text {
                        block["content"] = json!(text);
                    }
                } else {
                    // With images: a list of blocks, the text first.
                    let mut content = Vec::new();
                    push_text(&mut content, text.unwrap_or_default());
                    content.extend(m.images.iter().map(image_block));
                    block["content"] = Value::Array(content);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

fn text_blocks(m: &ChatMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    push_text(&mut blocks, m.content.as_deref().unwrap_or(""));
    blocks.extend(m.images.iter().map(image_block));
    blocks
}

fn image_block(i: &ImagePart) -> Value {
    json!({ "type": "image", "source": { "type": "base64", "media_type": i.media_type, "data": i.data } })
}

/// A tool call's arguments as the `input` object the API wants; arguments that are not a JSON
/// object (the model sent invalid JSON, which the loop reported back) are kept as text.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "_raw_arguments": arguments }),
    }
}
