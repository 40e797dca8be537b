//! A task record as the sled store writes it: its JSON, and the same bytes made from an envelope
//! encoded once.
//!
//! A record's envelope never changes after admission (a start, a progress mark, an outcome, a
//! requeue change the fields around it), so a write can copy the envelope's JSON kept from the
//! last write instead of encoding the envelope again. [`encode_with`] writes exactly the bytes
//! [`encode`] writes (a test holds it to that), so the format on disk is one.

use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::task::{Outcome, TaskRecord, TaskState};
use serde::Serialize;
use serde_json::value::RawValue;
use uuid::Uuid;

/// The record's bytes.
pub(super) fn encode(r: &TaskRecord) -> Result<Vec<u8>, BusError> {
    serde_json::to_vec(r).map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

/// The record from its bytes.
pub(super) fn decode(bytes: &[u8]) -> Result<TaskRecord, BusError> {
    serde_json::from_slice(bytes).map_err(|e| BusError::Corrupt(format!("decode task record: {e}")))
}

/// The envelope's JSON, as a record's bytes hold it.
pub(super) fn encode_envelope(env: &Envelope) -> Result<Box<RawValue>, BusError> {
    serde_json::value::to_raw_value(env)
        .map_err(|e| BusError::Corrupt(format!("encode task envelope: {e}")))
}

/// The record's bytes, its envelope copied from `envelope` (the JSON [`encode_envelope`] made of
/// `r.envelope`): the same bytes as [`encode`] gives.
pub(super) fn encode_with(r: &TaskRecord, envelope: &RawValue) -> Result<Vec<u8>, BusError> {
    let spliced = Spliced {
        task_id: &r.task_id,
        request_id: &r.request_id,
        state: r.state,
        attempts: r.attempts,
        envelope,
        outcome: r.outcome.as_ref(),
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        seq: r.seq,
        progress: r.progress.as_ref(),
        fingerprint: r.fingerprint.as_deref(),
    };
    serde_json::to_vec(&spliced).map_err(|e| BusError::Corrupt(format!("encode task record: {e}")))
}

/// [`TaskRecord`]'s fields, in its order and with its rules for absent ones, but the envelope.
#[derive(Serialize)]
struct Spliced<'a> {
    task_id: &'a Uuid,
    request_id: &'a RequestId,
    state: TaskState,
    attempts: u32,
    envelope: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a Outcome>,
    created_ms: u64,
    updated_ms: u64,
    seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fingerprint: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::Topic;
    use serde_json::json;

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
        for r in [full, bare] {
            let envelope = encode_envelope(&r.envelope).unwrap();
            let bytes = encode_with(&r, &envelope).unwrap();
            assert_eq!(
                String::from_utf8(bytes.clone()).unwrap(),
                String::from_utf8(encode(&r).unwrap()).unwrap()
            );
            assert_eq!(decode(&bytes).unwrap(), r);
        }
    }
}
