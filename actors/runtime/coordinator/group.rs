//! The outcome of a broadcast group, from its members' records.

use bus::{Bus, Outcome, TaskState};
use clawbus_core::task::TaskResult;
use serde_json::json;
use uuid::Uuid;

/// The group's outcome once every member has ended: succeeded when any member did, with each
/// member's answer (`text` lists them, one `agent: answer` a line); failed when none did.
pub(super) async fn outcome(bus: &dyn Bus, members: &[Uuid]) -> Outcome {
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    let mut any_succeeded = false;
    for id in members {
        let record = match bus.task(*id).await {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(task_id = %id, error = %e, "Could not read a broadcast member.");
                continue;
            }
        };
        let agent = record
            .envelope
            .topic
            .as_str()
            .strip_prefix("agent.")
            .unwrap_or(record.envelope.topic.as_str())
            .to_string();
        let text = record
            .result()
            .and_then(TaskResult::text_of)
            .map(str::to_string);
        any_succeeded |= record.state == TaskState::Succeeded;
        lines.push(match (&text, record.error()) {
            (Some(t), _) => format!("{agent}: {t}"),
            (None, e) => format!(
                "{agent}: {} ({})",
                record.state.as_str(),
                e.unwrap_or_default()
            ),
        });
        rows.push(json!({
            "agent": agent,
            "task_id": record.task_id,
            "state": record.state,
            "text": text,
            "error": record.error(),
        }));
    }
    if any_succeeded {
        Outcome::Succeeded {
            result: TaskResult {
                members: Some(rows),
                ..TaskResult::text(lines.join("\n"))
            }
            .to_value(),
        }
    } else {
        Outcome::Failed {
            error: format!("no member of the broadcast succeeded: {}", lines.join("; ")),
        }
    }
}
