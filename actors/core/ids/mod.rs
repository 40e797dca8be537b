//! Identifier newtypes shared by the actors: [`AgentId`], [`SessionKey`], [`Channel`], the names a client
//! gives on an ingress ([`SessionName`], [`Peer`], [`ChatType`], [`ChannelName`], one
//! [`NameError`]),
//! and the names derived from them ([`chat_of_session`], [`outbound_topic`]).

mod channel;
mod name;
mod session_key;
mod topic;

pub use channel::Channel;
pub use name::{
    ChannelName, ChatType, MAX_CHANNEL_LEN, MAX_NAME_LEN, NameError, Peer, SessionName, check_name,
    shown,
};
pub use session_key::{
    ClientKeyError, MAX_CLIENT_KEY_LEN, SessionKey, SessionKeyError, chat_of_session,
};
pub use topic::{OutboundTopicError, outbound_topic};

use serde::{Deserialize, Serialize};
use std::fmt;

/// A text that is not an agent id ([`AgentId::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid agent id {given:?} (expected 1-64 characters of a-z, 0-9, '-' or '_', starting with a letter or digit)"
)]
pub struct AgentIdError {
    /// The text given.
    pub given: String,
}

/// The id of an agent: the stem of its file in `agents.d/` (`researcher` for `researcher.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentId(String);

impl AgentId {
    /// Wraps a string that has already been checked by [`AgentId::parse`] or comes from a trusted source.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// Checks that `id` is a usable agent id: 1–64 chars of `[a-z0-9_-]`, starting with a letter or digit.
    pub fn parse(id: &str) -> Result<Self, AgentIdError> {
        let ok_len = !id.is_empty() && id.len() <= 64;
        let ok_chars = id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        let ok_start = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if ok_len && ok_chars && ok_start {
            Ok(Self(id.to_string()))
        } else {
            Err(AgentIdError {
                given: id.to_string(),
            })
        }
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AgentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for AgentId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for AgentId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<AgentId> for &str {
    fn eq(&self, other: &AgentId) -> bool {
        *self == other.0
    }
}

impl PartialEq<AgentId> for String {
    fn eq(&self, other: &AgentId) -> bool {
        *self == other.0
    }
}
