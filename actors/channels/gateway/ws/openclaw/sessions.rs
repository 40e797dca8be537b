//! Sessions in OpenClaw's shapes: a row of `sessions.list` / `sessions.describe`
//! (`{key, agentId, sessionId, kind, updatedAt, archived, …tokens}`), the answers of
//! `sessions.patch`, `sessions.delete` and `sessions.compact`, and a transcript as `chat.history`
//! messages (`{role, content: [{type: "text", text}], timestamp}`), and the `session.message`
//! event that carries one message as the transcript commits it.

use super::super::frames::{ErrorCode, ErrorShape};
use crate::gateway::sessions::SessionRow;
use clawbus_runtime::session::index::SessionMeta;
use clawbus_runtime::session::{CompactError, CompactHow, Compacted};
use serde_json::{Value, json};

/// A clawbus session row as an OpenClaw session row.
pub(crate) fn row(r: &SessionRow) -> Value {
    let mut v = json!({
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
        "archived": r.archived_ms.is_some(),
    });
    if let Some(at) = r.archived_ms {
        v["archivedAt"] = json!(at);
    }
    v
}

/// The answer of `sessions.patch`: `{ok, key, entry, session?}`, the entry (OpenClaw's stored
/// session) carrying `archivedAt` while the session is archived.
pub(crate) fn patched(meta: &SessionMeta, session: Option<&SessionRow>) -> Value {
    let mut entry = json!({
        "sessionId": meta.session_id,
        "updatedAt": meta.updated_ms,
        "archived": meta.is_archived(),
    });
    if let Some(at) = meta.archived_ms {
        entry["archivedAt"] = json!(at);
    }
    let mut v = json!({ "ok": true, "key": meta.key, "entry": entry });
    if let Some(r) = session {
        v["session"] = row(r);
    }
    v
}

/// One outcome of `sessions.patchMany`: `{ok: true, key, agentId?}`, or `{ok: false, key,
/// agentId?, error}` with the error shape of the refusal.
pub(crate) fn patch_outcome(key: &str, agent: Option<&str>, done: Result<(), ErrorShape>) -> Value {
    let mut v = match done {
        Ok(()) => json!({ "ok": true, "key": key }),
        Err(e) => json!({ "ok": false, "key": key, "error": e }),
    };
    if let Some(agent) = agent {
        v["agentId"] = json!(agent);
    }
    v
}

/// The answer of `sessions.delete`: `{ok, key, deleted, archived}` (no transcript is kept
/// aside here: `archived` is empty).
pub(crate) fn deleted(key: &str, deleted: bool) -> Value {
    json!({ "ok": true, "key": key, "deleted": deleted, "archived": [] })
}

/// The answer of `sessions.compact` (OpenClaw's `sessions-compact.ts`): with `maxLines`,
/// `{ok: true, key, compacted, kept}`; a summary, `{ok: true, key, compacted: true, result:
/// {summary, firstKeptEntryId, tokensBefore, tokensAfter}}`; a history with nothing to
/// summarise, `{ok: false, key, compacted: false, reason}` (OpenClaw's no-op verdict, which its
/// CLI reports as a failed compaction).
pub(crate) fn compacted(key: &str, how: CompactHow, done: &Compacted) -> Value {
    match how {
        CompactHow::KeepLast(_) => {
            json!({ "ok": true, "key": key, "compacted": done.compacted, "kept": done.kept })
        }
        CompactHow::Summary if done.compacted => json!({
            "ok": true,
            "key": key,
            "compacted": true,
            "result": {
                "summary": done.summary.as_deref().unwrap_or_default(),
                "firstKeptEntryId": done.first_kept.map(|id| id.to_string()).unwrap_or_default(),
                "tokensBefore": done.tokens_before,
                "tokensAfter": done.tokens_after,
            },
        }),
        CompactHow::Summary => json!({
            "ok": false,
            "key": key,
            "compacted": false,
            "reason": done.reason.as_deref().unwrap_or("Nothing to compact"),
        }),
    }
}

/// `sessions.compact` of a session that does not exist: OpenClaw answers that there is nothing
/// to compact (`reason: "no sessionId"`), not an error.
pub(crate) fn compact_unknown(key: &str) -> Value {
    json!({ "ok": true, "key": key, "compacted": false, "reason": "no sessionId" })
}

/// A compaction that was not done, as OpenClaw answers it: a busy session is an
/// `INVALID_REQUEST` naming why (retry after the run); a failed summary is a result with
/// `ok: false` and the reason; what OpenClaw has no counterpart for is `UNAVAILABLE`.
pub(crate) fn compact_refused(e: CompactError) -> Result<Value, ErrorShape> {
    match e {
        CompactError::Running { .. } | CompactError::Queued { .. } => {
            Err(ErrorShape::invalid(e.to_string()))
        }
        CompactError::Unknown { key } => Ok(compact_unknown(&key)),
        CompactError::Failed { key, error } => {
            Ok(json!({ "ok": false, "key": key, "compacted": false, "reason": error }))
        }
        e => Err(ErrorShape::new(ErrorCode::Unavailable, e.to_string())),
    }
}

/// A transcript message in OpenClaw's shape, with where it stands.
pub(crate) struct Numbered {
    /// Its position among the session's messages, from 1 (OpenClaw's `messageSeq`).
    pub(crate) seq: u64,
    /// The request that wrote it (for a user message: the client's idempotency key).
    pub(crate) request_id: Option<String>,
    /// `{role, content, timestamp, id, idempotencyKey?, __openclaw: {id, seq, idempotencyKey?}}`.
    pub(crate) message: Value,
}

/// The transcript entries of a session (clawbus's JSONL records) as `chat.history` messages
/// (the `message` entries only; a tool result's role is OpenClaw's `toolResult`), each with its
/// position and request: a user message carries its
/// request id as OpenClaw's `idempotencyKey`, which is how the Control UI matches the message
/// it sent with the one the transcript holds.
pub(crate) fn numbered(entries: &[Value]) -> Vec<Numbered> {
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
            Some((role, content, e))
        })
        .zip(1u64..)
        .map(|((role, content, e), seq)| {
            let request_id = e["request_id"].as_str().map(str::to_string);
            let mut meta = json!({ "seq": seq });
            let mut out = json!({ "role": role, "content": content, "timestamp": e["ts"] });
            if let Some(id) = e["id"].as_str() {
                out["id"] = json!(id);
                meta["id"] = json!(id);
            }
            if let (Some(rid), "user") = (&request_id, role) {
                out["idempotencyKey"] = json!(rid);
                meta["idempotencyKey"] = json!(rid);
            }
            out["__openclaw"] = meta;
            Numbered {
                seq,
                request_id,
                message: out,
            }
        })
        .collect()
}

/// A `session.message` event: one message the transcript of `key` committed, with the
/// session's row (`row`, OpenClaw's shape) and whether a run of it is still active.
pub(crate) fn session_message(
    key: &str,
    agent: &str,
    run_id: &str,
    m: &Numbered,
    row: Option<Value>,
    active: bool,
) -> Value {
    let mut v = json!({
        "sessionKey": key,
        "agentId": agent,
        "message": m.message,
        "messageSeq": m.seq,
        "runId": run_id,
        "hasActiveRun": active,
        "activeRunIds": if active { json!([run_id]) } else { json!([]) },
        "archived": false,
        "kind": "direct",
    });
    if let Some(id) = m.message.get("id") {
        v["messageId"] = id.clone();
    }
    if let Some(row) = row {
        v["sessionId"] = row["sessionId"].clone();
        v["updatedAt"] = row["updatedAt"].clone();
        v["session"] = row;
    }
    v
}
