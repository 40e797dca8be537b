//! Approval requests in OpenClaw's shape: `exec.approval.list` answers a bare array of
//! `{id, createdAtMs, expiresAtMs, request: {command, agentId, sessionKey}}`.

use clawbus_runtime::approvals::ApprovalRecord;
use serde_json::{Value, json};

/// One request as an entry of `exec.approval.list`.
pub(crate) fn request(r: &ApprovalRecord) -> Value {
    json!({
        "id": r.id,
        "createdAtMs": r.created_ms,
        "expiresAtMs": r.expires_ms,
        "state": r.state,
        "request": {
            "command": r.command,
            "agentId": r.agent,
            "sessionKey": r.session,
            "rule": r.rule,
        },
    })
}
