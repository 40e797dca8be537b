//! Sessions in OpenClaw's shapes: a row of `sessions.list` / `sessions.describe`
//! (`{key, agentId, sessionId, kind, updatedAt, …tokens}`), and a transcript as `chat.history`
//! messages (`{role, content: [{type: "text", text}], timestamp}`).

use crate::gateway::sessions::SessionRow;
use serde_json::{Value, json};

/// A clawbus session row as an OpenClaw session row.
pub(crate) fn row(r: &SessionRow) -> Value {
    json!({
        "key": r.key,
        "agentId": r.agent,
        "sessionId": r.session_id,
        "kind": "direct",
        "updatedAt": r.updated_ms,
        "status": r.state,
        "inputTokens": r.tokens_in,
        "outputTokens": r.tokens_out,
        "totalTokens": r.tokens_in + r.tokens_out,
        "turns": r.turns,
        "queued": r.queued,
    })
}

/// The transcript entries of a session (clawbus's JSONL records) as `chat.history` messages:
/// the `message` entries only; a tool result's role is OpenClaw's `toolResult`.
pub(crate) fn messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message")
        .filter_map(|e| {
            let m = &e["message"];
            let role = match m["role"].as_str()? {
                "tool" => "toolResult",
                other => other,
            };
            let content = match &m["content"] {
                Value::String(t) => json!([{ "type": "text", "text": t }]),
                Value::Array(parts) => Value::Array(parts.clone()),
                _ => json!([]),
            };
            let mut out = json!({ "role": role, "content": content, "timestamp": e["ts"] });
            if let Some(id) = e["id"].as_str() {
                out["id"] = json!(id);
            }
            Some(out)
        })
        .collect()
}
