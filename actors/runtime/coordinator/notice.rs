//! The announcement of a task's outcome in the session that posted it without waiting (a
//! subagent, an `agent_call` with `wait: false`).

use crate::ingress::{Duplicates, Request, Target};
use crate::origin::Origin;
use bus::{Outcome, RequestId};
use clawbus_core::ids::{AgentId, SessionKey};
use clawbus_core::task::TaskResult;
use uuid::Uuid;

/// The request (for the ingress pipeline) of the task that tells session `to` how task
/// `task_id` of `agent` ended: a message that wakes that session. Its request id
/// (`notify-<task_id>`) is the same whoever sends it (the run, or the coordinator for a task
/// ended from outside), so the session hears it exactly once.
pub fn outcome_notice(
    agent: &str,
    task_id: Uuid,
    to: &SessionKey,
    outcome: &Outcome,
) -> Option<Request> {
    let answer = match outcome {
        Outcome::Succeeded { result } => {
            TaskResult::text_of(result).unwrap_or_default().to_string()
        }
        other => format!("{} ({})", other.state().as_str(), error_text(other)),
    };
    let text = format!(
        "[task result] agent \"{agent}\" finished task {task_id} ({}): {answer}",
        outcome.state().as_str()
    );
    let request_id = notice_id(task_id)?;
    let origin = Origin {
        channel: clawbus_core::ids::Channel::Agent,
        chat_type: "notice".into(),
        peer: agent.to_string(),
        session_key: Some(to.clone()),
        parent_task: Some(task_id),
        ..Origin::api()
    };
    Some(Request {
        // The same notice sent twice (by the run and by the coordinator) is one task.
        duplicates: Duplicates::SameWork,
        ..Request::new(
            Target::Agent(AgentId::new(to.agent())),
            request_id,
            text,
            format!("agent:{agent}"),
            origin,
        )
    })
}

/// The request id of the notice that announces task `task_id`'s outcome (`notify-<task_id>`).
pub(super) fn notice_id(task_id: Uuid) -> Option<RequestId> {
    RequestId::parse(&format!("notify-{task_id}")).ok()
}

/// The error text of an outcome that is not a success.
pub(crate) fn error_text(outcome: &Outcome) -> &str {
    match outcome {
        Outcome::Failed { error }
        | Outcome::TimedOut { error }
        | Outcome::DeadLettered { error } => error,
        Outcome::Cancelled { reason } => reason,
        _ => "",
    }
}
