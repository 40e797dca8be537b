//! A task record as the API answers it, encoded straight from the record: the JSON of
//! [`TaskView`], without building an owned view or a `serde_json::Value` first.

use super::api::TaskView;
use bus::TaskRecord;
use clawbus_core::task::TaskResult;
use clawbus_runtime::origin::Origin;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// A task as the API shows it, borrowed from its record; it encodes as [`TaskView`] does (its
/// fields in [`TaskView`]'s order; a broadcast group's `members` are added by the caller that
/// knows them, so they are never here).
#[derive(Debug, Serialize)]
pub(crate) struct TaskAnswer<'a> {
    task_id: Uuid,
    request_id: &'a str,
    state: &'static str,
    duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<ResultAnswer<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<String>,
}

/// A succeeded task's answer: its `text` (as recorded), its token `usage`, and the marks of an
/// answer the output-token limit cut off. The fields are in the order of their names, as a
/// `serde_json::Value` object writes them.
#[derive(Debug, Serialize)]
struct ResultAnswer<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_reason: Option<&'static str>,
    text: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Value>,
}

impl<'a> ResultAnswer<'a> {
    fn of(result: &'a Value) -> Self {
        let truncated = TaskResult::is_truncated(result);
        Self {
            finish_reason: truncated.then_some("length"),
            text: TaskResult::text_value_of(result),
            truncated: truncated.then_some(true),
            usage: TaskResult::usage_of(result),
        }
    }
}

impl<'a> TaskAnswer<'a> {
    /// The answer for `rec`; `duplicate` when its request id was already known.
    pub(crate) fn of(rec: &'a TaskRecord, duplicate: bool) -> Self {
        let origin = Origin::of(&rec.envelope).ok();
        let (session, lane) = match origin {
            Some(o) => (o.session_key.map(|k| k.to_string()), Some(o.lane)),
            None => (None, None),
        };
        Self {
            task_id: rec.task_id,
            request_id: rec.request_id.as_str(),
            state: rec.state.as_str(),
            duplicate,
            result: rec.result().map(ResultAnswer::of),
            error: rec.error(),
            agent: rec.envelope.topic.as_str().strip_prefix("agent."),
            session,
            lane,
        }
    }

    /// The owned view of the same answer.
    pub(crate) fn into_view(self) -> TaskView {
        TaskView {
            task_id: self.task_id.to_string(),
            request_id: self.request_id.to_string(),
            state: self.state.to_string(),
            duplicate: self.duplicate,
            result: self
                .result
                .map(|r| serde_json::to_value(r).unwrap_or(Value::Null)),
            error: self.error.map(str::to_string),
            agent: self.agent.map(str::to_string),
            session: self.session,
            members: Vec::new(),
            lane: self.lane,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::{Envelope, Outcome, RequestId, TaskState, Topic};
    use serde_json::json;

    fn record(topic: Topic, state: TaskState, outcome: Option<Outcome>) -> TaskRecord {
        let request_id = RequestId::parse("r1").unwrap();
        let mut envelope = Envelope::task(topic, request_id.clone(), json!({ "text": "hi" }));
        envelope
            .headers
            .insert("session_key".into(), "agent:main:api:direct:s1".into());
        envelope.headers.insert("lane".into(), "main".into());
        TaskRecord {
            task_id: Uuid::from_u128(0x1234),
            request_id,
            state,
            attempts: 1,
            envelope: envelope.into(),
            outcome,
            created_ms: 100,
            updated_ms: 130,
            seq: 1,
            progress: None,
            fingerprint: None,
        }
    }

    fn succeeded(result: Value) -> TaskRecord {
        record(
            Topic::agent("main"),
            TaskState::Succeeded,
            Some(Outcome::Succeeded { result }),
        )
    }

    /// The answer's bytes, and the owned view's (what clients decode) as the same JSON.
    fn encoded(rec: &TaskRecord, duplicate: bool) -> String {
        let answer = serde_json::to_string(&TaskAnswer::of(rec, duplicate)).unwrap();
        let view = serde_json::to_string(&TaskView::of(rec, duplicate)).unwrap();
        assert_eq!(answer, view);
        let back: TaskView = serde_json::from_str(&answer).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), answer);
        answer
    }

    const HEAD: &str = r#"{"task_id":"00000000-0000-0000-0000-000000001234","request_id":"r1""#;

    #[test]
    fn a_succeeded_task_is_answered_with_its_text_and_usage_in_the_shape_clients_read() {
        let rec = succeeded(json!({
            "text": "pong \"quoted\" ü",
            "usage": { "m": { "input": 3, "output": 4 } },
            "other": [1, 2],
        }));
        assert_eq!(
            encoded(&rec, true),
            format!(
                r#"{HEAD},"state":"succeeded","duplicate":true,"result":{{"text":"pong \"quoted\" ü","usage":{{"m":{{"input":3,"output":4}}}}}},"agent":"main","session":"agent:main:api:direct:s1","lane":"main"}}"#
            )
        );
    }

    #[test]
    fn a_cut_off_answer_says_so_and_a_result_without_text_is_shown_whole() {
        let rec = succeeded(json!({ "text": "par", "truncated": true, "finish_reason": "length" }));
        assert_eq!(
            encoded(&rec, false),
            format!(
                r#"{HEAD},"state":"succeeded","duplicate":false,"result":{{"finish_reason":"length","text":"par","truncated":true}},"agent":"main","session":"agent:main:api:direct:s1","lane":"main"}}"#
            )
        );
        let rec = succeeded(json!({ "n": 1 }));
        assert_eq!(
            encoded(&rec, false),
            format!(
                r#"{HEAD},"state":"succeeded","duplicate":false,"result":{{"text":{{"n":1}}}},"agent":"main","session":"agent:main:api:direct:s1","lane":"main"}}"#
            )
        );
    }

    #[test]
    fn an_unfinished_or_failed_task_off_an_agent_topic_is_answered_without_what_it_lacks() {
        let rec = record(Topic::parse("jobs.x").unwrap(), TaskState::Queued, None);
        assert_eq!(
            encoded(&rec, false),
            format!(
                r#"{HEAD},"state":"queued","duplicate":false,"session":"agent:main:api:direct:s1","lane":"main"}}"#
            )
        );
        let mut rec = record(
            Topic::agent("main"),
            TaskState::Failed,
            Some(Outcome::Failed {
                error: "boom".into(),
            }),
        );
        // A header that does not read leaves the origin out whole.
        std::sync::Arc::make_mut(&mut rec.envelope)
            .headers
            .insert("depth".into(), "x".into());
        assert_eq!(
            encoded(&rec, false),
            format!(r#"{HEAD},"state":"failed","duplicate":false,"error":"boom","agent":"main"}}"#)
        );
    }
}
