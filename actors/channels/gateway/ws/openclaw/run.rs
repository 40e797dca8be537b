//! The second `res` of `agent`: OpenClaw answers an `agent` request twice on one id, first
//! `{runId, status: "accepted"}` and at the run's end `{runId, status, summary, result}`; its
//! CLI waits for the second.

use bus::{TaskRecord, TaskState};
use clawbus_core::task::TaskResult;
use serde_json::{Value, json};

/// The final answer of a run that ended (`rec`), in session `session_key` of `agent`.
pub(crate) fn final_answer(rec: &TaskRecord, session_key: &str, agent: &str) -> Value {
    let text = rec.result().map(TaskResult::shown);
    let usage = rec.result().and_then(|r| r.get("usage")).cloned();
    let (status, summary) = match rec.state {
        TaskState::Succeeded => ("ok", "completed".to_string()),
        TaskState::TimedOut => ("timeout", rec.error().unwrap_or("timed out").to_string()),
        _ => (
            "error",
            rec.error().unwrap_or(rec.state.as_str()).to_string(),
        ),
    };
    let payloads: Vec<Value> = text.into_iter().map(|t| json!({ "text": t })).collect();
    json!({
        "runId": rec.task_id,
        "status": status,
        "summary": summary,
        "result": {
            "payloads": payloads,
            "meta": {
                "durationMs": rec.updated_ms.saturating_sub(rec.created_ms),
                "agentMeta": { "sessionKey": session_key, "agentId": agent, "usage": usage },
                "stopReason": if status == "ok" { "stop" } else { status },
            },
        },
    })
}

/// The answer when the run did not end within the wait.
pub(crate) fn still_running(run_id: &str) -> Value {
    json!({ "runId": run_id, "status": "timeout", "summary": "the run did not end within the timeout" })
}
