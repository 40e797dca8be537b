//! The task rules every store applies: duplicate or conflict, the first outcome wins, and payload
//! fingerprints.

use crate::envelope::Envelope;
use crate::error::{BusError, ConflictReason};
use crate::json_text::write_canonical;
use crate::task::{Admission, Outcome, TaskRecord};

/// Ends `r` with `outcome` unless it has ended already (the first outcome wins); true when it did.
pub(crate) fn end_with(r: &mut TaskRecord, outcome: &Outcome) -> bool {
    if r.state.is_terminal() {
        return false;
    }
    r.state = outcome.state();
    r.outcome = Some(outcome.clone());
    true
}

/// A stable fingerprint of a payload: FNV-1a (64 bit) over its canonical JSON (object keys
/// sorted, no white space), as `fnv1a64:<16 hex digits>`.
pub fn fingerprint(payload: &serde_json::Value) -> String {
    let mut text = Vec::with_capacity(64);
    write_canonical(&mut text, payload);
    fingerprint_text(crate::kv::fnv1a_from(0xcbf2_9ce4_8422_2325, &text))
}

/// `fnv1a64:` and `hash` in 16 lower-case hex digits, written without the formatting machinery
/// (a fingerprint is made for every admission).
fn fingerprint_text(hash: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(24);
    text.push_str("fnv1a64:");
    for shift in (0..16).rev() {
        text.push(char::from(DIGITS[((hash >> (shift * 4)) & 0xf) as usize]));
    }
    text
}

/// Answers a submission of `env` whose request id already has the unexpired record `existing`:
/// a duplicate when it is the same work (same topic, same payload by value; headers do not count),
/// else [`BusError::Conflict`].
pub fn reuse(existing: &TaskRecord, env: &Envelope) -> Result<Admission, BusError> {
    let conflict = |reason| BusError::Conflict {
        request_id: existing.request_id.clone(),
        task_id: existing.task_id,
        reason,
    };
    if existing.envelope.topic != env.topic {
        return Err(conflict(ConflictReason::OtherTarget {
            original: existing.envelope.topic.clone(),
        }));
    }
    let same_fingerprint = existing
        .fingerprint
        .as_ref()
        .is_none_or(|f| **f == *fingerprint(&env.payload));
    // A matching fingerprint is confirmed by value: a 64-bit hash can collide.
    if !same_fingerprint || existing.envelope.payload != env.payload {
        return Err(conflict(ConflictReason::OtherPayload));
    }
    Ok(Admission {
        task: existing.clone(),
        duplicate: true,
    })
}

#[cfg(test)]
mod tests {
    use super::{fingerprint, fingerprint_text};
    use serde_json::json;

    /// The text is the stored format: `fnv1a64:` and 16 lower-case hex digits, zero-padded.
    #[test]
    fn fingerprint_text_is_sixteen_lower_case_hex_digits() {
        for hash in [
            0,
            1,
            0xa,
            0x0123_4567_89ab_cdef,
            u64::MAX,
            0xcbf2_9ce4_8422_2325,
        ] {
            assert_eq!(fingerprint_text(hash), format!("fnv1a64:{hash:016x}"));
        }
    }

    /// The fingerprint as it was made before its canonical text had a writer of its own: FNV-1a
    /// over serde's text, which sorts object members by name as long as serde_json's maps are
    /// sorted (no `preserve_order` in the build; were it there, this oracle and the test go
    /// wrong together, which is the point). Stored records hold such fingerprints, so a payload
    /// must keep its fingerprint.
    fn fingerprint_through_serde(payload: &serde_json::Value) -> String {
        let text = serde_json::to_vec(payload).unwrap();
        fingerprint_text(crate::kv::fnv1a_from(0xcbf2_9ce4_8422_2325, &text))
    }

    #[test]
    fn a_payload_keeps_the_fingerprint_it_had() {
        let payloads = [
            json!(null),
            json!(7),
            json!(-2.5e-9),
            json!("line\n\"quoted\" \\ é \u{1}"),
            json!({ "text": "x".repeat(100), "zeta": [1, 2.5, null, true], "alpha": { "b": "c", "a": [] } }),
            json!([{ "k\t": "v" }, "🦀", u64::MAX, i64::MIN]),
        ];
        for payload in &payloads {
            assert_eq!(
                fingerprint(payload),
                fingerprint_through_serde(payload),
                "{payload}"
            );
        }
        // And one written down: a change of the canonical text or of the hash shows here.
        assert_eq!(
            fingerprint(&json!({ "b": [1, "x"], "a": null })),
            "fnv1a64:12d0ea61b8f5b23c"
        );
    }

    #[test]
    fn fingerprint_ignores_key_order_but_not_values() {
        let a = json!({ "a": 1, "b": [1, { "x": "y", "z": null }] });
        let b: serde_json::Value =
            serde_json::from_str(r#"{"b":[1,{"z":null,"x":"y"}],"a":1}"#).unwrap_or_default();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&json!({ "a": 2, "b": [1] })));
        assert_ne!(fingerprint(&json!("1")), fingerprint(&json!(1)));
    }
}
