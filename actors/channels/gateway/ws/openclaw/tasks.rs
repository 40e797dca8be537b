//! Tasks in OpenClaw's shapes: the params of `tasks.list` (`{status?, agentId?, sessionKey?,
//! limit?}`; `cursor` and `sortBy` are dropped by [`super::fields`]) and its rows, OpenClaw's
//! `TaskSummary` (`{id, status, runtime, agentId, sessionKey, runId, createdAt, …}`).

use crate::gateway::api::TaskView;
use bus::{TaskRecord, TaskState};
use serde::Deserialize;
use serde_json::{Value, json};

/// OpenClaw's task statuses.
const STATUSES: [&str; 6] = [
    "queued",
    "running",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
];

/// One status or several (`status: "running"` or `status: ["queued", "running"]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Statuses {
    /// One.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

/// The params of `tasks.list`: OpenClaw's, plus clawbus's `state` (a clawbus task state).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListParams {
    /// Only tasks in these OpenClaw statuses.
    #[serde(default)]
    pub status: Option<Statuses>,
    /// Only tasks posted to this agent.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Only tasks run in this session.
    #[serde(default)]
    pub session_key: Option<String>,
    /// At most this many (1..=500), the newest.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only tasks in this clawbus state (`succeeded`, `dead_lettered`, …).
    #[serde(default)]
    pub state: Option<String>,
}

impl ListParams {
    /// The statuses asked for, each checked against OpenClaw's; `None` for all.
    pub(crate) fn statuses(&self) -> Result<Option<Vec<&'static str>>, String> {
        let named: Vec<&str> = match &self.status {
            None => return Ok(None),
            Some(Statuses::One(s)) => vec![s.as_str()],
            Some(Statuses::Many(v)) => v.iter().map(String::as_str).collect(),
        };
        named
            .into_iter()
            .map(|s| {
                STATUSES
                    .iter()
                    .copied()
                    .find(|k| *k == s)
                    .ok_or_else(|| format!("status: {s:?} is not one of {}", STATUSES.join(", ")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The limit, checked against OpenClaw's bounds.
    pub(crate) fn limit(&self) -> Result<Option<usize>, String> {
        match self.limit {
            Some(n) if !(1..=500).contains(&n) => Err(format!("limit: {n} is not within 1..=500")),
            n => Ok(n),
        }
    }
}

/// OpenClaw's status of a clawbus task state (a dead-lettered task has `failed`).
pub(crate) fn status(s: TaskState) -> &'static str {
    match s {
        TaskState::Queued => "queued",
        TaskState::Running => "running",
        TaskState::Succeeded => "completed",
        TaskState::Cancelled => "cancelled",
        TaskState::TimedOut => "timed_out",
        _ => "failed",
    }
}

/// A task as OpenClaw's `TaskSummary`.
pub(crate) fn summary(rec: &TaskRecord) -> Value {
    let view = TaskView::of(rec, false);
    let id = rec.task_id.to_string();
    let mut v = json!({
        "id": id,
        "taskId": id,
        "runId": id,
        "kind": "agent",
        "runtime": "cli",
        "status": status(rec.state),
        "title": title(rec),
        "createdAt": rec.created_ms,
        "updatedAt": rec.updated_ms,
        "execution": { "state": execution(rec.state) },
    });
    let put = |v: &mut Value, k: &str, x: Option<String>| {
        if let Some(x) = x {
            v[k] = json!(x);
        }
    };
    put(&mut v, "agentId", view.agent);
    put(&mut v, "sessionKey", view.session);
    put(&mut v, "error", view.error);
    if rec.state.is_terminal() {
        v["endedAt"] = json!(rec.updated_ms);
    }
    if let Some(text) = view.result.as_ref().and_then(answer_text) {
        v["terminalSummary"] = json!(clip(&text, 200));
    }
    v
}

fn execution(s: TaskState) -> &'static str {
    match s {
        TaskState::Queued => "queued",
        TaskState::Running => "running",
        s if s.is_terminal() => "finished",
        _ => "unknown",
    }
}

/// The task's message, cut to a title.
fn title(rec: &TaskRecord) -> String {
    let text = clawbus_core::task::TaskInput::text_of(&rec.envelope.payload).unwrap_or("task");
    clip(text, 80)
}

fn answer_text(result: &Value) -> Option<String> {
    match result {
        Value::String(s) => Some(s.clone()),
        v => v.get("text").and_then(Value::as_str).map(str::to_string),
    }
}

/// `text` on one line, at most `max` characters (an ellipsis when cut).
fn clip(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ws::openclaw::fields;
    use bus::{Envelope, Outcome, RequestId, Topic};

    fn read(mut p: Value) -> Result<ListParams, String> {
        fields::strip("tasks.list", &mut p);
        serde_json::from_value(p).map_err(|e| e.to_string())
    }

    fn record(state: TaskState, outcome: Option<Outcome>) -> TaskRecord {
        let env = Envelope::task(
            Topic::agent("main"),
            RequestId::parse("r1").unwrap(),
            json!({ "text": "write the\nweekly report" }),
        );
        TaskRecord {
            task_id: uuid::Uuid::nil(),
            request_id: RequestId::parse("r1").unwrap(),
            state,
            attempts: 1,
            envelope: env.into(),
            outcome,
            created_ms: 100,
            updated_ms: 130,
            seq: 1,
            progress: None,
            fingerprint: None,
        }
    }

    #[test]
    fn the_control_uis_tasks_list_params_are_read_and_checked() {
        let q = read(json!({
            "status": ["queued", "running"], "agentId": "main", "sessionKey": "agent:main:main",
            "limit": 50, "cursor": "abc", "sortBy": "updatedAt",
        }))
        .unwrap();
        assert_eq!(q.statuses().unwrap(), Some(vec!["queued", "running"]));
        assert_eq!(q.limit().unwrap(), Some(50));
        assert_eq!(q.agent_id.as_deref(), Some("main"));
        assert_eq!(q.session_key.as_deref(), Some("agent:main:main"));
        let one = read(json!({ "status": "completed" })).unwrap();
        assert_eq!(one.statuses().unwrap(), Some(vec!["completed"]));
        let e = read(json!({ "status": "succeeded" })).unwrap().statuses();
        assert!(
            e.unwrap_err()
                .starts_with("status: \"succeeded\" is not one of")
        );
        assert!(read(json!({ "limit": 0 })).unwrap().limit().is_err());
        let e = read(json!({ "bogus": 1 })).unwrap_err();
        assert!(e.contains("unknown field `bogus`"), "{e}");
    }

    #[test]
    fn a_task_reads_as_openclaws_task_summary() {
        let done = record(
            TaskState::Succeeded,
            Some(Outcome::Succeeded {
                result: json!({ "text": "Done: 3 items." }),
            }),
        );
        let s = summary(&done);
        assert_eq!(s["id"], uuid::Uuid::nil().to_string());
        assert_eq!(s["status"], "completed");
        assert_eq!(s["agentId"], "main");
        assert_eq!(s["title"], "write the weekly report");
        assert_eq!(s["terminalSummary"], "Done: 3 items.");
        assert_eq!(s["createdAt"], 100);
        assert_eq!(s["endedAt"], 130);
        assert_eq!(s["execution"]["state"], "finished");
        let queued = summary(&record(TaskState::Queued, None));
        assert_eq!(queued["status"], "queued");
        assert!(queued.get("endedAt").is_none(), "{queued}");
        assert_eq!(status(TaskState::DeadLettered), "failed");
        assert_eq!(clip(&"x".repeat(300), 10).chars().count(), 10);
    }
}
