//! The envelope every message travels in, and its request id.

use crate::topic::Topic;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

/// The envelope format version written by this build.
pub(crate) const ENVELOPE_VERSION: u32 = 1;

/// A caller-supplied request id that is not one ([`RequestId::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestIdError {
    /// Empty or longer than [`RequestId::MAX_LEN`] bytes.
    #[error("request id must be 1-{max} bytes long, got {len}", max = RequestId::MAX_LEN)]
    Length {
        /// Its length in bytes.
        len: usize,
    },
    /// It holds a character that is not printable ASCII, or a space.
    #[error("request id {given:?} contains {c:?} (expected printable ASCII without spaces)")]
    Character {
        /// The id given.
        given: String,
        /// The first character that is not allowed.
        c: char,
    },
}

/// The caller's idempotency key: one request id is processed at most once inside the dedup window.
///
/// Compared, hashed, ordered, printed and serialised as its text; its clones share the text and
/// its task-id bits (module `task_id`), worked out once.
#[derive(Clone)]
pub struct RequestId(Arc<IdText>);

/// A request id's text, and its task-id bits once asked for.
struct IdText {
    text: Box<str>,
    bits: OnceLock<[u8; 8]>,
}

impl RequestId {
    /// The longest request id accepted, in bytes.
    pub const MAX_LEN: usize = 256;

    /// A request id of `text`, unchecked.
    fn of(text: Box<str>) -> Self {
        Self(Arc::new(IdText {
            text,
            bits: OnceLock::new(),
        }))
    }

    /// A fresh, time-ordered request id (UUIDv7).
    pub fn random() -> Self {
        Self::of(Uuid::now_v7().to_string().into())
    }

    /// Its task-id bits: worked out by `work` the first time, shared by every clone.
    pub(crate) fn bits(&self, work: impl FnOnce(&str) -> [u8; 8]) -> &[u8; 8] {
        self.0.bits.get_or_init(|| work(&self.0.text))
    }

    /// Checks a caller-supplied id: 1–256 bytes of printable ASCII without spaces.
    pub fn parse(s: &str) -> Result<Self, RequestIdError> {
        if s.is_empty() || s.len() > Self::MAX_LEN {
            return Err(RequestIdError::Length { len: s.len() });
        }
        if let Some(c) = s.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(RequestIdError::Character {
                given: s.to_string(),
                c,
            });
        }
        Ok(Self::of(s.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// The id as a store key: injective, and only `[-/_0-9A-Za-z]`, which every store accepts
    /// (JetStream KV allows `[-/_=.a-zA-Z0-9]`; `.` is escaped too, as it separates subject tokens).
    ///
    /// `-`, `/`, digits and letters stay; every other byte becomes `_` and two upper-case hex digits.
    /// An id of those characters only is its own key (borrowed, not copied).
    pub fn store_key(&self) -> Cow<'_, str> {
        // Folded over every byte (no early exit), which the compiler checks many bytes at a time.
        let text = self.as_str();
        if text
            .bytes()
            .fold(true, |all, b| all & stays_in_store_key(b))
        {
            return Cow::Borrowed(text);
        }
        let mut key = String::with_capacity(text.len() + 8);
        for b in text.bytes() {
            if stays_in_store_key(b) {
                key.push(char::from(b));
            } else {
                key.push('_');
                key.push(hex_digit(b >> 4));
                key.push(hex_digit(b & 0xf));
            }
        }
        Cow::Owned(key)
    }
}

/// Whether `b` stands for itself in a store key (see [`RequestId::store_key`]).
fn stays_in_store_key(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'/'
}

fn hex_digit(n: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(n & 0xf)])
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RequestId").field(&self.as_str()).finish()
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RequestId {}

impl Hash for RequestId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for RequestId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RequestId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// As stored and sent: its text, unchecked (as it always was read).
impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self::of(Box::<str>::deserialize(deserializer)?))
    }
}

/// What an envelope carries, which decides how the bus treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// Work for exactly one consumer: deduplicated, journaled, acknowledged.
    Task,
    /// A notification for every current subscriber; not journaled.
    Event,
    /// The terminal outcome of a task, sent to its `reply_to`.
    Result,
}

impl Kind {
    /// The kind's wire name (`task`, `event`, `result`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Event => "event",
            Self::Result => "result",
        }
    }
}

/// A message on the bus. Serde-only data: it crosses process and machine boundaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Format version (`ENVELOPE_VERSION`); readers accept older versions.
    pub v: u32,
    /// This message's own id (UUIDv7); a redelivery keeps it. A task's is its task id.
    pub id: Uuid,
    /// The idempotency key: duplicates of it are never processed twice.
    pub request_id: RequestId,
    /// Where it is published.
    pub topic: Topic,
    /// How the bus treats it.
    pub kind: Kind,
    /// Who sent it (`cli`, `http`, `agent:<id>` …), for logs and routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Where the outcome of a task is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Topic>,
    /// Unix milliseconds after which the work is no longer wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// Delivery attempt, starting at 1; raised by each redelivery.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// Free-form metadata (trace ids, channel names, session names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The body.
    #[serde(default)]
    pub payload: serde_json::Value,
}

fn first_attempt() -> u32 {
    1
}

impl Envelope {
    /// A task for `topic` with a fresh message id, which is its task id and carries its request
    /// id's bits (so the store finds the task by it without an index).
    pub fn task(topic: Topic, request_id: RequestId, payload: serde_json::Value) -> Self {
        Self::new(Kind::Task, topic, request_id, payload)
    }

    /// An event for `topic` with a fresh message id and request id.
    pub fn event(topic: Topic, payload: serde_json::Value) -> Self {
        Self::new(Kind::Event, topic, RequestId::random(), payload)
    }

    /// An event for `topic` about the work of `request_id` (a task event), with a fresh message id.
    pub(crate) fn event_for(
        topic: Topic,
        request_id: RequestId,
        payload: serde_json::Value,
    ) -> Self {
        Self::new(Kind::Event, topic, request_id, payload)
    }

    /// A task's id carries its request id's bits (see [`crate::task_id`]); other ids are plain
    /// UUIDv7s.
    fn new(kind: Kind, topic: Topic, request_id: RequestId, payload: serde_json::Value) -> Self {
        let id = match kind {
            Kind::Task => crate::task_id::mint(&request_id),
            Kind::Event | Kind::Result => Uuid::now_v7(),
        };
        Self {
            v: ENVELOPE_VERSION,
            id,
            request_id,
            topic,
            kind,
            from: None,
            reply_to: None,
            deadline: None,
            attempt: 1,
            headers: BTreeMap::new(),
            payload,
        }
    }

    /// Sets the sender.
    pub fn from(mut self, from: impl Into<String>) -> Self {
        self.from = Some(from.into());
        self
    }

    /// Sets a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }
}
