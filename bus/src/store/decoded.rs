//! The task records the sled store last wrote or read, each beside the exact bytes it stands for,
//! so a read of unchanged bytes clones the record instead of decoding it again.
//!
//! A turn reads its task's record several times between writes (the session's check, the start,
//! the waiter, the completion, the waiter's final read); each read still fetches the bytes from
//! sled and compares them with the kept ones, so a record changed by anyone (another handle on the
//! database, a migration, a purge) is decoded afresh. The kept records are bounded in bytes: two
//! generations, the older dropped whole when the newer fills.
//!
//! A record kept from a write also keeps its envelope's JSON, which the next write of that record
//! copies instead of encoding the envelope again (see [`super::record_bytes`]).
//!
//! An ended record written here is not kept, and what was kept for its key goes: nothing writes
//! it again, and only a later duplicate or lookup reads it (decoded once then, and kept as read).
//! So the budget holds the tasks in flight, not the last ones that ended: with ended records kept,
//! 256 tasks in flight with 400-byte payloads overflowed it, and a third of each start and
//! outcome went into decoding its record again. A duplicate of an ended task is then presumed
//! new once (see `SledTaskStore::admit`), as one of a task evicted from here always was.

#[cfg(test)]
use super::record_bytes::encode;
use super::record_bytes::{decode, encode_envelope, encode_with};
use crate::error::BusError;
use crate::fast_map::FastMap;
use crate::task::TaskRecord;
use sled::IVec;
use std::sync::{Arc, Mutex, MutexGuard};

/// What one generation holds before it becomes the older one (and the older one goes), in bytes
/// as [`weight`] counts them. Only the records of tasks in flight stay (ended ones are dropped),
/// so this is reached only when that many are in flight at once.
const GENERATION_BYTES: usize = 512 * 1024;

/// A record and the bytes it was decoded from or encoded to.
struct Kept {
    bytes: IVec,
    record: TaskRecord,
    /// The JSON of `record.envelope` inside `bytes`, when it was written from here.
    envelope: EnvelopeJson,
}

/// The JSON of a record's envelope, as kept from its last write here.
pub(super) type EnvelopeJson = Option<Arc<[u8]>>;

#[derive(Default)]
struct Generations {
    newer: FastMap<IVec, Kept>,
    older: FastMap<IVec, Kept>,
    /// The [`weight`] of what `newer` keeps.
    newer_bytes: usize,
}

impl Generations {
    /// The record kept for `key`, the newer generation first.
    fn get(&self, key: &[u8]) -> Option<&Kept> {
        self.newer.get(key).or_else(|| self.older.get(key))
    }
}

/// Decoded records by store key, checked against the stored bytes on every read.
#[derive(Default)]
pub(super) struct Decoded {
    kept: Mutex<Generations>,
}

impl Decoded {
    fn lock(&self) -> MutexGuard<'_, Generations> {
        // The maps hold only copies of what is on disk: a panic elsewhere cannot make them wrong.
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The record stored under `key` as `bytes`: the kept one when it stands for exactly these
    /// bytes, else decoded (and kept).
    pub(super) fn read(&self, key: &[u8], bytes: &IVec) -> Result<TaskRecord, BusError> {
        Ok(self.read_for_update(key, bytes)?.0)
    }

    /// Like [`Decoded::read`], with the JSON of the record's envelope when it is kept: give it
    /// back to [`Decoded::encode`] with the changed record (whose envelope must not change).
    pub(super) fn read_for_update(
        &self,
        key: &[u8],
        bytes: &IVec,
    ) -> Result<(TaskRecord, EnvelopeJson), BusError> {
        if let Some(found) = self.hit(key, bytes) {
            return Ok(found);
        }
        let record = decode(bytes)?;
        self.keep(key, bytes.clone(), record.clone(), None);
        Ok((record, None))
    }

    /// Encodes `record` for writing under `key`, copying `envelope` (the JSON of its envelope,
    /// from [`Decoded::read_for_update`]) or else encoding its envelope, and keeps it as the
    /// record those bytes stand for (whether or not the write then happens: a read answers it
    /// only for these very bytes); an ended record is not kept, and what was kept for `key`
    /// goes.
    pub(super) fn encode(
        &self,
        key: &[u8],
        record: &TaskRecord,
        envelope: EnvelopeJson,
    ) -> Result<IVec, BusError> {
        let envelope = match envelope {
            Some(kept) => kept,
            None => Arc::from(encode_envelope(&record.envelope)?),
        };
        let bytes = IVec::from(encode_with(record, &envelope)?);
        if record.state.is_terminal() {
            self.forget(key);
        } else {
            self.keep(key, bytes.clone(), record.clone(), Some(envelope));
        }
        Ok(bytes)
    }

    /// Whether a record is kept for `key` (written or read lately).
    pub(super) fn knows(&self, key: &[u8]) -> bool {
        self.lock().get(key).is_some()
    }

    /// The bytes last kept for `key` with their record: what the store holds unless someone
    /// changed it since (a compare-and-swap against these bytes tells, without a read first).
    pub(super) fn last(&self, key: &[u8]) -> Option<(IVec, TaskRecord, EnvelopeJson)> {
        let kept = self.lock();
        let found = kept.get(key)?;
        Some((
            found.bytes.clone(),
            found.record.clone(),
            found.envelope.clone(),
        ))
    }

    fn hit(&self, key: &[u8], bytes: &IVec) -> Option<(TaskRecord, EnvelopeJson)> {
        let kept = self.lock();
        let found = kept.get(key)?;
        (found.bytes == *bytes).then(|| (found.record.clone(), found.envelope.clone()))
    }

    /// Drops what is kept for `key`.
    fn forget(&self, key: &[u8]) {
        let mut kept = self.lock();
        kept.older.remove(key);
        if let Some(gone) = kept.newer.remove(key) {
            kept.newer_bytes = kept.newer_bytes.saturating_sub(weight(&gone));
        }
    }

    fn keep(&self, key: &[u8], bytes: IVec, record: TaskRecord, envelope: EnvelopeJson) {
        if !round_trips(&record) {
            return;
        }
        let entry = Kept {
            bytes,
            record,
            envelope,
        };
        let added = weight(&entry);
        let mut kept = self.lock();
        if kept.newer_bytes + added > GENERATION_BYTES {
            // The older generation's table is emptied and reused: a new one would grow (and
            // rehash) a dozen times over while the newer generation fills again.
            let mut emptied = std::mem::take(&mut kept.older);
            emptied.clear();
            kept.older = std::mem::replace(&mut kept.newer, emptied);
            kept.newer_bytes = 0;
        }
        kept.older.remove(key);
        kept.newer_bytes += added;
        if let Some(replaced) = kept.newer.insert(IVec::from(key), entry) {
            kept.newer_bytes = kept.newer_bytes.saturating_sub(weight(&replaced));
        }
    }
}

/// What a kept record takes, about: its bytes, its envelope's JSON, and the decoded record
/// (counted as its bytes again).
fn weight(kept: &Kept) -> usize {
    2 * kept.bytes.len() + kept.envelope.as_ref().map_or(0, |e| e.len())
}

/// False for the one record shape whose decoding differs from itself: a progress note that is
/// JSON `null` is written as `"progress":null` and read back as no note. Such a record is not
/// kept, so a read always answers what decoding the stored bytes answers.
fn round_trips(record: &TaskRecord) -> bool {
    !matches!(record.progress, Some(serde_json::Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{Envelope, RequestId};
    use crate::task::{Outcome, TaskState};
    use crate::topic::Topic;
    use serde_json::json;

    fn record(n: u32) -> TaskRecord {
        let env = Envelope::task(
            Topic::agent("a"),
            RequestId::parse(&format!("r-{n}")).unwrap(),
            json!({ "text": "x".repeat(500) }),
        )
        .header("session", "s");
        TaskRecord {
            task_id: env.id,
            request_id: env.request_id.clone(),
            state: TaskState::Running,
            attempts: 1,
            envelope: env.into(),
            outcome: Some(Outcome::Succeeded {
                result: json!({ "n": n, "f": 2.5, "neg": -3, "list": [null, true, "é\n"] }),
            }),
            created_ms: 1,
            updated_ms: 2,
            seq: u64::from(n),
            progress: Some(json!({ "step": n })),
            fingerprint: Some("fnv1a64:0".into()),
        }
    }

    #[test]
    fn a_kept_record_is_what_decoding_its_bytes_gives() {
        let decoded = Decoded::default();
        let mut r = record(1);
        let bytes = decoded.encode(b"k", &r, None).unwrap();
        assert_eq!(decoded.read(b"k", &bytes).unwrap(), decode(&bytes).unwrap());
        // The next write copies the envelope's JSON: still the record's own bytes.
        let (mut again, envelope) = decoded.read_for_update(b"k", &bytes).unwrap();
        assert!(envelope.is_some());
        again.attempts += 1;
        let bytes = decoded.encode(b"k", &again, envelope).unwrap();
        assert_eq!(bytes.as_ref(), encode(&again).unwrap().as_slice());
        assert_eq!(decoded.read(b"k", &bytes).unwrap(), again);
        // A note of `null` reads back as none: such a record is decoded, never cloned.
        r.progress = Some(serde_json::Value::Null);
        let bytes = decoded.encode(b"k", &r, None).unwrap();
        assert!(decoded.hit(b"k", &bytes).is_none());
        assert_eq!(decoded.read(b"k", &bytes).unwrap().progress, None);
    }

    #[test]
    fn other_bytes_under_the_same_key_are_decoded_not_answered_from_what_is_kept() {
        let decoded = Decoded::default();
        decoded.encode(b"k", &record(1), None).unwrap();
        let mut changed = record(1);
        changed.state = TaskState::Succeeded;
        let elsewhere = IVec::from(encode(&changed).unwrap());
        assert!(decoded.hit(b"k", &elsewhere).is_none());
        assert_eq!(decoded.read(b"k", &elsewhere).unwrap(), changed);
        let kept = decoded.hit(b"k", &elsewhere).map(|(r, _)| r);
        assert_eq!(kept, Some(changed), "kept once decoded");
    }

    #[test]
    fn an_ended_record_written_is_not_kept_and_what_was_kept_for_it_goes() {
        let decoded = Decoded::default();
        let running = record(1);
        let bytes = decoded.encode(b"k", &running, None).unwrap();
        let weight_running = decoded.lock().newer_bytes;
        assert!(decoded.hit(b"k", &bytes).is_some());
        let mut ended = running.clone();
        ended.state = TaskState::Succeeded;
        let ended_bytes = decoded.encode(b"k", &ended, None).unwrap();
        assert!(!decoded.knows(b"k"), "nothing kept for the ended task");
        assert_eq!(decoded.lock().newer_bytes, 0, "its weight went with it");
        assert!(weight_running > 0);
        // Read later (a duplicate, a lookup): decoded once, then kept as read.
        assert_eq!(decoded.read(b"k", &ended_bytes).unwrap(), ended);
        assert!(decoded.hit(b"k", &ended_bytes).is_some());
        // The same from the older generation.
        let other = Decoded::default();
        other.encode(b"k", &running, None).unwrap();
        {
            let mut kept = other.lock();
            let newer = std::mem::take(&mut kept.newer);
            kept.older = newer;
            kept.newer_bytes = 0;
        }
        assert!(other.knows(b"k"));
        other.encode(b"k", &ended, None).unwrap();
        assert!(!other.knows(b"k"));
    }

    #[test]
    fn what_is_kept_stays_within_two_generations_of_bytes() {
        let decoded = Decoded::default();
        let written: Vec<IVec> = (0..2_000)
            .map(|n| {
                let key = format!("k{n}");
                let bytes = decoded.encode(key.as_bytes(), &record(n), None).unwrap();
                let kept = decoded.lock();
                let older: usize = kept.older.values().map(weight).sum();
                assert!(kept.newer_bytes <= GENERATION_BYTES && older <= GENERATION_BYTES);
                bytes
            })
            .collect();
        assert!(decoded.hit(b"k0", &written[0]).is_none(), "the oldest went");
        assert!(
            decoded.hit(b"k1999", &written[1_999]).is_some(),
            "the newest is kept"
        );
    }
}
