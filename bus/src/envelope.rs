//! The envelope every message travels in, and its request id.

use crate::topic::Topic;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// The longest request id accepted, in bytes.
    pub const MAX_LEN: usize = 256;

    /// A fresh, time-ordered request id (UUIDv7).
    pub fn random() -> Self {
        Self(Uuid::now_v7().to_string().into())
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
        Ok(Self(s.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as a store key: injective, and only `[-/_0-9A-Za-z]`, which every store accepts
    /// (JetStream KV allows `[-/_=.a-zA-Z0-9]`; `.` is escaped too, as it separates subject tokens).
    ///
    /// `-`, `/`, digits and letters stay; every other byte becomes `_` and two upper-case hex digits.
    /// An id of those characters only is its own key (borrowed, not copied).
    pub fn store_key(&self) -> Cow<'_, str> {
        // Folded over every byte (no early exit), which the compiler checks many bytes at a time.
        if self
            .0
            .bytes()
            .fold(true, |all, b| all & stays_in_store_key(b))
        {
            return Cow::Borrowed(&self.0);
        }
        let mut key = String::with_capacity(self.0.len() + 8);
        for b in self.0.bytes() {
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
        f.write_str(&self.0)
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
    /// This message's own id (UUIDv7); a redelivery keeps it.
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
    /// A task for `topic` with a fresh message id.
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

    fn new(kind: Kind, topic: Topic, request_id: RequestId, payload: serde_json::Value) -> Self {
        Self {
            v: ENVELOPE_VERSION,
            id: Uuid::now_v7(),
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
