//! Approval requests in OpenClaw's shapes: `exec.approval.list` answers a bare array of
//! `{id, createdAtMs, expiresAtMs, request: {command, agentId, sessionKey}}`; `approval.get` and
//! `approval.resolve` answer `ApprovalSnapshot`s.

use clawbus_runtime::approvals::{ApprovalRecord, ApprovalState};
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

/// The decisions a clawbus exec approval takes.
const DECISIONS: [&str; 3] = ["allow-once", "allow-always", "deny"];

/// A request as OpenClaw's `ApprovalSnapshot` (`approval.get`, `approval.resolve`).
pub(crate) fn snapshot(r: &ApprovalRecord) -> Value {
    let mut v = json!({
        "id": r.id,
        "urlPath": format!("/approvals/{}", r.id),
        "createdAtMs": r.created_ms,
        "expiresAtMs": r.expires_ms,
        "presentation": {
            "kind": "exec",
            "commandText": r.command,
            "agentId": r.agent,
            "allowedDecisions": DECISIONS,
        },
    });
    let settled = |v: &mut Value, status: &str| {
        v["status"] = json!(status);
        v["resolvedAtMs"] = json!(r.resolved_ms.unwrap_or(r.expires_ms));
        v["source"] = json!({ "agentId": r.agent, "sessionKey": r.session });
    };
    match r.state {
        ApprovalState::Pending => {
            v["status"] = json!("pending");
            v["sourceSessionKey"] = json!(r.session);
        }
        ApprovalState::Allowed => {
            settled(&mut v, "allowed");
            let decision = if r.always {
                "allow-always"
            } else {
                "allow-once"
            };
            v["decision"] = json!(decision);
            v["reason"] = json!("user");
            v["resolver"] = json!({ "kind": "device" });
        }
        ApprovalState::Denied => {
            settled(&mut v, "denied");
            v["decision"] = json!("deny");
            v["reason"] = json!("user");
            v["resolver"] = json!({ "kind": "device" });
        }
        ApprovalState::Expired => {
            settled(&mut v, "expired");
            v["reason"] = json!("timeout");
        }
    }
    v
}
