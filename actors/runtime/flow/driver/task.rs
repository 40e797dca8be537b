//! One task of a node: its prompt (with the schema and the last validation errors), its
//! submission through the ingress pipeline, and what its outcome means (output, retry, failure).

use super::Start;
use crate::ingress::{Duplicates, Ingress, IngressError, Request, Target, Waited};
use crate::origin::Origin;
use bus::{Outcome, RequestId, TaskRecord};
use clawbus_core::config::flow::{NodeDef, schema};
use clawbus_core::config::retry::ErrorClass;
use clawbus_core::ids::{Channel, SessionKey};
use clawbus_core::task::TaskResult;
use serde_json::Value;
use std::time::Duration;

/// How long one wait on the bus lasts before it is renewed.
const WAIT_SLICE: Duration = Duration::from_secs(60);

/// The marker between a node's prompt and what the flow adds to it.
const SCHEMA_NOTE: &str = "\n\n---\nAnswer with only a JSON value matching this JSON Schema:\n";
const ERRORS_NOTE: &str = "\n\nYour previous answer did not match it:\n";

/// The prompt without what the flow added (for a retry).
pub(super) fn base_prompt(prompt: &str) -> String {
    prompt
        .split(SCHEMA_NOTE)
        .next()
        .unwrap_or(prompt)
        .to_string()
}

/// The prompt of an attempt: the node's, then (with a schema) the schema and the previous
/// attempt's validation errors.
pub(super) fn prompt_of(node: &NodeDef, base: &str, errors: Option<&[String]>) -> String {
    let Some(schema) = &node.output_schema else {
        return base.to_string();
    };
    let mut out = format!("{base}{SCHEMA_NOTE}{schema}");
    if let Some(errors) = errors {
        out.push_str(ERRORS_NOTE);
        for e in errors {
            out.push_str(&format!("- {e}\n"));
        }
    }
    out
}

/// What an ended task means for its item.
pub(super) enum Verdict {
    Output(Value),
    Cancelled(String),
    Retry {
        /// The failure class (`None`: always tried again while attempts remain — a schema miss).
        class: Option<ErrorClass>,
        error: String,
        /// The validation errors to show the next attempt.
        errors: Option<Vec<String>>,
    },
}

pub(super) fn judge(node: &NodeDef, record: Result<TaskRecord, NodeTaskError>) -> Verdict {
    let record = match record {
        Ok(r) => r,
        Err(e) => {
            return Verdict::Retry {
                class: Some(ErrorClass::InvalidInput),
                error: e.to_string(),
                errors: None,
            };
        }
    };
    let failure = |error: String| Verdict::Retry {
        class: Some(classify(&error).unwrap_or(ErrorClass::InvalidInput)),
        error,
        errors: None,
    };
    match record.outcome {
        Some(Outcome::Succeeded { result }) => {
            let text = TaskResult::text_of(&result).unwrap_or_default().to_string();
            let Some(schema) = &node.output_schema else {
                return Verdict::Output(Value::String(text));
            };
            let errors = match schema::parse_answer(&text) {
                Ok(v) => {
                    let errors = schema::validate(schema, &v);
                    if errors.is_empty() {
                        return Verdict::Output(v);
                    }
                    errors
                }
                Err(e) => vec![e],
            };
            Verdict::Retry {
                class: None,
                error: format!(
                    "the output does not match the schema: {}",
                    errors.join("; ")
                ),
                errors: Some(errors),
            }
        }
        Some(Outcome::Cancelled { reason }) => Verdict::Cancelled(reason),
        Some(Outcome::TimedOut { error }) => Verdict::Retry {
            class: Some(ErrorClass::Timeout),
            error,
            errors: None,
        },
        Some(Outcome::Failed { error } | Outcome::DeadLettered { error }) => failure(error),
        None => failure("the task ended without an outcome".into()),
        Some(other) => failure(format!("the task ended {:?}", other.state())),
    }
}

/// The failure class of a task's error text (the model's HTTP status, a timeout).
fn classify(error: &str) -> Option<ErrorClass> {
    let e = error.to_ascii_lowercase();
    let status = e
        .split("http ")
        .nth(1)
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(408) => Some(ErrorClass::Timeout),
        Some(429) => Some(ErrorClass::RateLimit),
        Some(401 | 403) => Some(ErrorClass::Auth),
        Some(s) if s >= 500 => Some(ErrorClass::Transient),
        Some(_) => Some(ErrorClass::InvalidInput),
        None if e.contains("timed out") || e.contains("no complete answer") => {
            Some(ErrorClass::Timeout)
        }
        None if e.contains("connect") || e.contains("circuit") => Some(ErrorClass::Transient),
        None => None,
    }
}

/// Submits a node's task through the ingress pipeline (joining one already there under the same
/// request id) and awaits its end.
pub(super) async fn submit_and_wait(
    ingress: &Ingress,
    run_id: &str,
    node: &NodeDef,
    s: &Start,
    deadline_ms: Option<u64>,
) -> Result<TaskRecord, NodeTaskError> {
    let request_id = RequestId::parse(&s.request_id)?;
    let agent = node
        .agent
        .as_ref()
        .ok_or_else(|| NodeTaskError::NoAgent(node.id.clone()))?;
    let session = SessionKey::peer(
        agent,
        Channel::Flow.as_str(),
        run_id,
        &format!("{}-{}", node.id, s.item),
    );
    let origin = Origin {
        channel: Channel::Flow,
        chat_type: "node".into(),
        peer: format!("{run_id}:{}", node.id),
        session_name: None,
        session_key: Some(session),
        lane: node
            .lane
            .clone()
            .unwrap_or_else(|| clawbus_core::config::MAIN_LANE.into()),
        parent_task: None,
        call_chain: Vec::new(),
        notify_session: None,
        depth: 0,
        members: None,
        // The flow owns the attempts (its policy, its schema retries): one delivery per task.
        max_attempts: Some(1),
        deliver_to: None,
    };
    let req = Request {
        deadline_ms,
        duplicates: Duplicates::Join,
        ..Request::new(
            Target::Agent(agent.clone()),
            request_id.clone(),
            s.prompt.clone(),
            format!("flow:{run_id}"),
            origin,
        )
    };
    let mut task = ingress.submit(req).await?.task;
    loop {
        match ingress.wait(&request_id, WAIT_SLICE, &task).await? {
            Waited::Ended(rec) => return Ok(rec),
            Waited::Pending(rec) => task = rec,
        }
    }
}

/// Why a node's task could not be submitted or awaited (the node fails as bad input).
#[derive(Debug, thiserror::Error)]
pub(super) enum NodeTaskError {
    /// The derived request id is not one (a run or node id the checks should have refused).
    #[error(transparent)]
    RequestId(#[from] bus::RequestIdError),
    /// The node runs a flow, not an agent (the driver never sends such a node here).
    #[error("node \"{0}\" has no agent")]
    NoAgent(String),
    /// The pipeline refused the task, or the bus failed while it was awaited.
    #[error(transparent)]
    Ingress(#[from] IngressError),
}
