//! A task record as the sled store writes it: its JSON, and the same bytes made from an envelope
//! encoded once.
//!
//! A record's envelope never changes after admission (a start, a progress mark, an outcome, a
//! requeue change the fields around it), so a write can copy the envelope's JSON kept from the
//! last write instead of encoding the envelope again. [`encode_with`] writes exactly the bytes
//! [`encode`] writes (a test holds it to that), so the format on disk is one.

use crate::envelope::Envelope;
use crate::error::BusError;
use crate::json_text::{write_str, write_value};
use crate::task::{Outcome, TaskRecord};
use serde::Serialize;
use uuid::Uuid;

/// The record's bytes.
pub(super) fn encode(r: &TaskRecord) -> Result<Vec<u8>, BusError> {
    serde_json::to_vec(r).map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

/// The record from its bytes.
pub(super) fn decode(bytes: &[u8]) -> Result<TaskRecord, BusError> {
    serde_json::from_slice(bytes).map_err(|e| BusError::Corrupt(format!("decode task record: {e}")))
}

/// The envelope's JSON, as a record's bytes hold it: the bytes serde writes for it.
///
/// Written by hand like [`encode_with`] (a test holds the two to serde's bytes): serde's writer
/// escapes every field name and copies the topic into a `String` first, and this runs once a
/// task. The payload goes through serde.
pub(super) fn encode_envelope(env: &Envelope) -> Result<Vec<u8>, BusError> {
    let mut out = Vec::with_capacity(192);
    out.extend_from_slice(b"{\"v\":");
    json(&mut out, &env.v)?;
    out.extend_from_slice(b",\"id\":");
    uuid(&mut out, env.id);
    out.extend_from_slice(b",\"request_id\":");
    write_str(&mut out, env.request_id.as_str());
    out.extend_from_slice(b",\"topic\":");
    write_str(&mut out, env.topic.as_str());
    out.extend_from_slice(b",\"kind\":\"");
    out.extend_from_slice(env.kind.as_str().as_bytes());
    out.push(b'"');
    if let Some(from) = &env.from {
        out.extend_from_slice(b",\"from\":");
        write_str(&mut out, from);
    }
    if let Some(reply_to) = &env.reply_to {
        out.extend_from_slice(b",\"reply_to\":");
        write_str(&mut out, reply_to.as_str());
    }
    if let Some(deadline) = &env.deadline {
        out.extend_from_slice(b",\"deadline\":");
        json(&mut out, deadline)?;
    }
    out.extend_from_slice(b",\"attempt\":");
    json(&mut out, &env.attempt)?;
    if !env.headers.is_empty() {
        out.extend_from_slice(b",\"headers\":{");
        for (n, (name, value)) in env.headers.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_str(&mut out, name);
            out.push(b':');
            write_str(&mut out, value);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b",\"payload\":");
    write_value(&mut out, &env.payload);
    out.push(b'}');
    Ok(out)
}

/// The record's bytes, its envelope copied from `envelope` (the JSON [`encode_envelope`] made of
/// `r.envelope`): the same bytes as [`encode`] gives.
///
/// Written by hand, field by field in [`TaskRecord`]'s order and with its rules for absent ones:
/// a record is written three times a task, and serde's writer escapes every field name and
/// grows its buffer several times a record. Numbers, the outcome and the progress note still go
/// through serde.
pub(super) fn encode_with(r: &TaskRecord, envelope: &[u8]) -> Result<Vec<u8>, BusError> {
    let mut out = Vec::with_capacity(envelope.len() + 256);
    out.extend_from_slice(b"{\"task_id\":");
    uuid(&mut out, r.task_id);
    out.extend_from_slice(b",\"request_id\":");
    write_str(&mut out, r.request_id.as_str());
    out.extend_from_slice(b",\"state\":\"");
    out.extend_from_slice(r.state.as_str().as_bytes());
    out.extend_from_slice(b"\",\"attempts\":");
    json(&mut out, &r.attempts)?;
    out.extend_from_slice(b",\"envelope\":");
    out.extend_from_slice(envelope);
    if let Some(outcome) = &r.outcome {
        out.extend_from_slice(b",\"outcome\":");
        write_outcome(&mut out, outcome);
    }
    out.extend_from_slice(b",\"created_ms\":");
    json(&mut out, &r.created_ms)?;
    out.extend_from_slice(b",\"updated_ms\":");
    json(&mut out, &r.updated_ms)?;
    out.extend_from_slice(b",\"seq\":");
    json(&mut out, &r.seq)?;
    if let Some(progress) = &r.progress {
        out.extend_from_slice(b",\"progress\":");
        json(&mut out, progress)?;
    }
    if let Some(fingerprint) = &r.fingerprint {
        out.extend_from_slice(b",\"fingerprint\":");
        write_str(&mut out, fingerprint);
    }
    out.push(b'}');
    Ok(out)
}

/// `id` as serde writes a UUID: hyphenated, lower case, quoted.
fn uuid(out: &mut Vec<u8>, id: Uuid) {
    out.push(b'"');
    out.extend_from_slice(
        id.hyphenated()
            .encode_lower(&mut Uuid::encode_buffer())
            .as_bytes(),
    );
    out.push(b'"');
}

/// `outcome` as serde writes it (internally tagged by `state`).
fn write_outcome(out: &mut Vec<u8>, outcome: &Outcome) {
    let (state, field, text) = match outcome {
        Outcome::Succeeded { result } => {
            out.extend_from_slice(b"{\"state\":\"succeeded\",\"result\":");
            write_value(out, result);
            out.push(b'}');
            return;
        }
        Outcome::Failed { error } => ("failed", "error", error),
        Outcome::Cancelled { reason } => ("cancelled", "reason", reason),
        Outcome::TimedOut { error } => ("timed_out", "error", error),
        Outcome::DeadLettered { error } => ("dead_lettered", "error", error),
    };
    out.extend_from_slice(b"{\"state\":\"");
    out.extend_from_slice(state.as_bytes());
    out.extend_from_slice(b"\",\"");
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(b"\":");
    write_str(out, text);
    out.push(b'}');
}

fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), BusError> {
    serde_json::to_writer(out, value)
        .map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::RequestId;
    use crate::task::{Outcome, TaskState};
    use crate::topic::Topic;
    use serde_json::json;

    #[test]
    fn an_envelope_written_by_hand_is_byte_for_byte_serdes() {
        let bare = Envelope::task(
            Topic::agent("a"),
            RequestId::parse("r-1").unwrap(),
            serde_json::Value::Null,
        );
        // Every field set, as a literal: a field added to the envelope breaks this until it is
        // added to `encode_envelope` (and here).
        let full = Envelope {
            v: 3,
            id: Uuid::now_v7(),
            request_id: RequestId::parse(r#"q"uote\back/?"#).unwrap(),
            topic: Topic::agent("b"),
            kind: crate::envelope::Kind::Task,
            from: Some("agent:\"x\"\t".into()),
            reply_to: Some(Topic::agent("c")),
            deadline: Some(u64::MAX),
            attempt: 7,
            headers: [("session", "s\\1"), ("läne", "main\u{7f}\u{0}"), ("a", "")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            payload: json!({ "text": "hé \"quoted\"\n\u{1}", "n": [1, 2.5, -3, null, u64::MAX] }),
        };
        let mut event = Envelope::event(Topic::agent("d"), json!("x"));
        event.kind = crate::envelope::Kind::Result;
        for env in [bare, full, event] {
            assert_eq!(
                encode_envelope(&env).unwrap(),
                serde_json::to_vec(&env).unwrap()
            );
        }
    }

    #[test]
    fn a_record_written_with_its_kept_envelope_is_byte_for_byte_the_encoded_record() {
        let env = Envelope::task(
            Topic::agent("a"),
            RequestId::parse("r/1:é?").unwrap_or_else(|_| RequestId::random()),
            json!({ "text": "hé \"quoted\"\n", "n": [1, 2.5, -3, null] }),
        )
        .from("http")
        .header("session", "s")
        .header("lane", "main");
        // Every field set: a field added to the record breaks this literal until it is added to
        // `Spliced` (and here).
        let full = TaskRecord {
            task_id: env.id,
            request_id: env.request_id.clone(),
            state: TaskState::Succeeded,
            attempts: 2,
            envelope: env.into(),
            outcome: Some(Outcome::Succeeded {
                result: json!({ "text": "done" }),
            }),
            created_ms: 1,
            updated_ms: 2,
            seq: 3,
            progress: Some(json!({ "step": 1 })),
            fingerprint: Some("fnv1a64:0123456789abcdef".into()),
        };
        let bare = TaskRecord {
            state: TaskState::Queued,
            outcome: None,
            progress: None,
            fingerprint: None,
            ..full.clone()
        };
        let escaped = TaskRecord {
            request_id: RequestId::parse(r#"q"uote\back"#).unwrap(),
            fingerprint: Some("tab\t\u{1}é\"\\".into()),
            progress: Some(serde_json::Value::Null),
            ..full.clone()
        };
        let states = [
            TaskState::Queued,
            TaskState::Running,
            TaskState::Succeeded,
            TaskState::Failed,
            TaskState::Cancelled,
            TaskState::TimedOut,
            TaskState::DeadLettered,
        ];
        let every_state = states.map(|state| TaskRecord {
            state,
            ..bare.clone()
        });
        let text = "line\n\"quoted\" \\ é \u{1f}".to_string();
        let outcomes = [
            Outcome::Succeeded {
                result: json!([text.clone(), 1e20, -0.5, { "b": null, "a": true }]),
            },
            Outcome::Failed {
                error: text.clone(),
            },
            Outcome::Cancelled {
                reason: text.clone(),
            },
            Outcome::TimedOut {
                error: text.clone(),
            },
            Outcome::DeadLettered { error: text },
        ];
        let every_outcome = outcomes.map(|outcome| TaskRecord {
            state: outcome.state(),
            outcome: Some(outcome),
            ..bare.clone()
        });
        for r in [full, bare, escaped]
            .into_iter()
            .chain(every_state)
            .chain(every_outcome)
        {
            let envelope = encode_envelope(&r.envelope).unwrap();
            let bytes = encode_with(&r, &envelope).unwrap();
            assert_eq!(
                String::from_utf8(bytes.clone()).unwrap(),
                String::from_utf8(encode(&r).unwrap()).unwrap()
            );
            if r.progress != Some(serde_json::Value::Null) {
                assert_eq!(decode(&bytes).unwrap(), r);
            }
        }
    }
}
