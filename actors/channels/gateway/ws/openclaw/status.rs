//! `status`, `health` and `system-presence` in the shapes OpenClaw's CLI reads
//! (`status --json` reads `sessions.byAgent`, `heartbeat`, `tasks`, `taskAudit`; the probe of
//! `status --deep` and `health` wants an array from `system-presence`).

use crate::gateway::sessions::SessionRow;
use bus::TaskState;
use serde_json::{Value, json};

/// How many sessions `sessions.recent` (and each agent's `recent`) shows.
const RECENT: usize = 10;

/// What the status is built from.
pub(crate) struct StatusInput<'a> {
    /// The configured agents' ids, the default first.
    pub(crate) agents: Vec<String>,
    /// The default model, `provider/model`.
    pub(crate) model: String,
    /// Every session, any order.
    pub(crate) sessions: &'a [SessionRow],
    /// Every task's state.
    pub(crate) tasks: Vec<TaskState>,
    /// Now (Unix ms), for the ages.
    pub(crate) now_ms: u64,
}

/// OpenClaw's task status name of a clawbus task state.
fn task_status(s: TaskState) -> &'static str {
    match s {
        TaskState::Queued => "queued",
        TaskState::Running => "running",
        TaskState::Succeeded => "succeeded",
        TaskState::Failed => "failed",
        TaskState::Cancelled => "cancelled",
        TaskState::TimedOut => "timed_out",
        _ => "lost",
    }
}

fn recent(rows: &[&SessionRow], now_ms: u64) -> Vec<Value> {
    rows.iter()
        .take(RECENT)
        .map(|r| {
            json!({
                "key": r.key,
                "agentId": r.agent,
                "sessionId": r.session_id,
                "updatedAt": r.updated_ms,
                "age": now_ms.saturating_sub(r.updated_ms),
                "inputTokens": r.tokens_in,
                "outputTokens": r.tokens_out,
                "totalTokens": r.tokens_in + r.tokens_out,
            })
        })
        .collect()
}

/// The `status` payload (OpenClaw's status summary).
pub(crate) fn status(i: &StatusInput<'_>) -> Value {
    let mut rows: Vec<&SessionRow> = i.sessions.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.updated_ms));
    let by_agent: Vec<Value> = i
        .agents
        .iter()
        .map(|a| {
            let mine: Vec<&SessionRow> = rows.iter().copied().filter(|r| &r.agent == a).collect();
            json!({ "agentId": a, "path": null, "count": mine.len(), "recent": recent(&mine, i.now_ms) })
        })
        .collect();
    let mut by_status = serde_json::Map::new();
    for s in [
        "queued",
        "running",
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "lost",
    ] {
        by_status.insert(s.into(), json!(0));
    }
    let (mut active, mut failures) = (0u64, 0u64);
    for t in &i.tasks {
        let name = task_status(*t);
        if let Some(n) = by_status.get_mut(name) {
            *n = json!(n.as_u64().unwrap_or(0) + 1);
        }
        active += u64::from(!t.is_terminal());
        failures += u64::from(matches!(
            t,
            TaskState::Failed | TaskState::TimedOut | TaskState::DeadLettered
        ));
    }
    let total = i.tasks.len() as u64;
    json!({
        "runtimeVersion": format!("clawbus {}", env!("CARGO_PKG_VERSION")),
        "heartbeat": {
            "defaultAgentId": i.agents.first(),
            "agents": i.agents.iter().map(|a| json!({ "agentId": a, "enabled": false, "every": "disabled", "everyMs": null })).collect::<Vec<_>>(),
        },
        "channelSummary": [],
        "queuedSystemEvents": [],
        "degradedSecretOwners": [],
        "tasks": {
            "total": total,
            "active": active,
            "terminal": total - active,
            "failures": failures,
            "byStatus": by_status,
            "byRuntime": { "subagent": 0, "acp": 0, "cli": total, "cron": 0 },
        },
        "taskAudit": {
            "total": 0, "warnings": 0, "errors": 0,
            "byCode": { "stale_queued": 0, "stale_running": 0, "lost": 0, "delivery_failed": 0, "missing_cleanup": 0, "inconsistent_timestamps": 0 },
        },
        "sessions": {
            "paths": [],
            "count": rows.len(),
            "defaults": { "model": i.model, "contextTokens": null },
            "recent": recent(&rows, i.now_ms),
            "byAgent": by_agent,
        },
    })
}

/// The `health` payload: OpenClaw's `{ok, ts, durationMs, agents, sessions, …}` with the reasons
/// clawbus is not ready; `store` names where the sessions are kept.
pub(crate) fn health(reasons: &[String], i: &StatusInput<'_>, store: &str) -> Value {
    let mut rows: Vec<&SessionRow> = i.sessions.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.updated_ms));
    let sessions_of = |agent: Option<&str>| {
        let mine: Vec<&SessionRow> = rows
            .iter()
            .copied()
            .filter(|r| agent.is_none_or(|a| r.agent == a))
            .collect();
        json!({ "path": store, "count": mine.len(), "recent": recent(&mine, i.now_ms) })
    };
    let agents: Vec<Value> = i
        .agents
        .iter()
        .enumerate()
        .map(|(n, a)| {
            json!({
                "agentId": a,
                "isDefault": n == 0,
                "heartbeat": { "enabled": false, "everyMs": null },
                "sessions": sessions_of(Some(a)),
            })
        })
        .collect();
    json!({
        "ok": reasons.is_empty(),
        "reasons": reasons,
        "ts": i.now_ms,
        "durationMs": 0,
        "channels": {},
        "channelOrder": [],
        "channelLabels": {},
        "heartbeatSeconds": 0,
        "defaultAgentId": i.agents.first(),
        "agents": agents,
        "sessions": sessions_of(None),
    })
}

/// `system-presence`: this gateway as the one present instance.
pub(crate) fn presence(now_ms: u64) -> Value {
    json!([{
        "host": "clawbus",
        "mode": "gateway",
        "reason": "self",
        "text": "clawbus gateway",
        "ts": now_ms,
        "version": env!("CARGO_PKG_VERSION"),
    }])
}
