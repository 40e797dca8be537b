//! [`SessionKey`]: a session's key in OpenClaw's format, and what can be read from it.

use super::AgentId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A session key: `agent:<agentId>:<channel>:<chatType>:<peerId>`, or `agent:<agentId>:main`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionKey(String);

impl SessionKey {
    /// The agent's main session: `agent:<id>:main`.
    pub fn main(agent: &AgentId) -> Self {
        Self(format!("agent:{agent}:main"))
    }

    /// A conversation with a peer on a channel: `agent:<id>:<channel>:<chatType>:<peer>`.
    pub fn peer(agent: &AgentId, channel: &str, chat_type: &str, peer: &str) -> Self {
        Self(format!(
            "agent:{agent}:{}:{}:{}",
            token(channel),
            token(chat_type),
            token(peer)
        ))
    }

    /// A script's one-off task: `agent:<id>:api:task:<requestId>`.
    pub fn task(agent: &AgentId, request_id: &str) -> Self {
        Self::peer(agent, "api", "task", request_id)
    }

    /// A task taken from shared topic `topic`: `agent:<id>:topic:<topic>:<requestId>`.
    pub fn shared_topic(agent: &AgentId, topic: &str, request_id: &str) -> Self {
        Self::peer(agent, "topic", topic, request_id)
    }

    /// A script's named session: `agent:<id>:api:direct:<name>`.
    pub fn named(agent: &AgentId, name: &str) -> Self {
        Self::peer(agent, "api", "direct", name)
    }

    /// Parses a key given by a user (`clawbus sessions show <key>`).
    pub fn parse(s: &str) -> Result<Self, SessionKeyError> {
        let mut parts = s.split(':');
        let ok = parts.next() == Some("agent")
            && parts.next().is_some_and(|a| AgentId::parse(a).is_ok())
            && s.split(':').count() >= 3
            && s.split(':').all(|p| !p.is_empty());
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(SessionKeyError {
                given: s.to_string(),
            })
        }
    }

    /// A key a client names on an ingress (a WebSocket `sessionKey`, `GET /v1/sessions/{key}`):
    /// [`SessionKey::parse`], at most [`MAX_CLIENT_KEY_LEN`] characters, and every part after
    /// `agent:<id>` a name ([`crate::ids::check_name`]; the last may be a request id instead).
    pub fn from_client(s: &str) -> Result<Self, ClientKeyError> {
        if s.len() > MAX_CLIENT_KEY_LEN {
            return Err(ClientKeyError::TooLong {
                shown: crate::ids::shown(s),
            });
        }
        let key = Self::parse(s)?;
        let parts: Vec<&str> = s.split(':').skip(2).collect();
        for (i, part) in parts.iter().enumerate() {
            let request_id = i + 1 == parts.len() && bus::RequestId::parse(part).is_ok();
            if let Err(source) = crate::ids::check_name("part", part)
                && !request_id
            {
                return Err(ClientKeyError::Part {
                    shown: crate::ids::shown(s),
                    source,
                });
            }
        }
        Ok(key)
    }

    /// The channel a conversation key records (`agent:<id>:<channel>:<chatType>:<peer>`);
    /// `None` for the main session.
    pub fn channel(&self) -> Option<&str> {
        let parts: Vec<&str> = self.0.splitn(5, ':').collect();
        (parts.len() == 5).then(|| parts[2])
    }

    /// The agent part of the key.
    pub fn agent(&self) -> &str {
        self.0.split(':').nth(1).unwrap_or_default()
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A session key that does not parse: not `agent:<agentId>:…` with no empty part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid session key {given:?} (expected agent:<agentId>:main or agent:<agentId>:<channel>:<chatType>:<peerId>)"
)]
pub struct SessionKeyError {
    /// What was given.
    pub given: String,
}

/// A session key a client named that is not one ([`SessionKey::from_client`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientKeyError {
    /// Longer than [`MAX_CLIENT_KEY_LEN`].
    #[error("session key {shown}: longer than {MAX_CLIENT_KEY_LEN} characters")]
    TooLong {
        /// The key as shown ([`crate::ids::shown`]).
        shown: String,
    },
    /// Not `agent:<agentId>:…` ([`SessionKey::parse`]).
    #[error(transparent)]
    Key(#[from] SessionKeyError),
    /// A part after `agent:<id>` is not a name.
    #[error("session key {shown}: {source}")]
    Part {
        /// The key as shown ([`crate::ids::shown`]).
        shown: String,
        /// What is wrong with the part.
        source: crate::ids::NameError,
    },
}

/// The longest session key a client may name: `agent:<id>:<channel>:<chat type>:<peer>` with a
/// 64-character agent id and a request id (256) for the peer fits.
pub const MAX_CLIENT_KEY_LEN: usize = 512;

/// Key parts cannot hold `:`; anything else is kept.
fn token(s: &str) -> String {
    if s.is_empty() {
        return "_".into();
    }
    s.replace(':', "_")
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The chat a session belongs to, when it is a Telegram one
/// (`agent:<id>:telegram:<chat type>:<chat id>`).
pub fn chat_of_session(session: &str) -> Option<i64> {
    let parts: Vec<&str> = session.split(':').collect();
    match parts.as_slice() {
        ["agent", _, channel, _, chat] if super::Channel::Telegram == *channel => chat.parse().ok(),
        _ => None,
    }
}
