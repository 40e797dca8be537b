//! The router: maps an inbound message (channel, chat type, peer, bindings) to an agent and a
//! session key in OpenClaw's format.
//!
//! The routing table is immutable after start (it is built from the agent files), so it is a plain
//! value shared by reference rather than an actor: a mailbox hop would add latency to every message
//! and serialise lookups that need no coordination.

#[cfg(test)]
mod tests;

use crate::config::Config;
use crate::ids::AgentId;
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
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let ok = parts.next() == Some("agent")
            && parts.next().is_some_and(|a| AgentId::parse(a).is_ok())
            && s.split(':').count() >= 3
            && s.split(':').all(|p| !p.is_empty());
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(format!(
                "invalid session key {s:?} (expected agent:<agentId>:main or agent:<agentId>:<channel>:<chatType>:<peerId>)"
            ))
        }
    }

    /// A key a client names on an ingress (a WebSocket `sessionKey`, `GET /v1/sessions/{key}`):
    /// [`SessionKey::parse`], at most [`MAX_CLIENT_KEY_LEN`] characters, and every part after
    /// `agent:<id>` a name ([`crate::ids::check_name`]; the last may be a request id instead).
    pub fn from_client(s: &str) -> Result<Self, String> {
        if s.len() > MAX_CLIENT_KEY_LEN {
            return Err(format!(
                "session key {}: longer than {MAX_CLIENT_KEY_LEN} characters",
                crate::ids::shown(s)
            ));
        }
        let key = Self::parse(s)?;
        let parts: Vec<&str> = s.split(':').skip(2).collect();
        for (i, part) in parts.iter().enumerate() {
            let request_id = i + 1 == parts.len() && bus::RequestId::parse(part).is_ok();
            if let Err(e) = crate::ids::check_name("part", part)
                && !request_id
            {
                return Err(format!("session key {}: {e}", crate::ids::shown(s)));
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

/// Where an inbound message came from.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    /// The channel (`api`, `telegram`, `webhook` …).
    pub channel: String,
    /// `direct`, `group`, `task` …
    pub chat_type: String,
    /// Who sent it on that channel.
    pub peer: String,
    /// The agent named by the sender (a topic `agent.<id>`), if any.
    pub agent: Option<AgentId>,
    /// A session name given by a script (`--session NAME`).
    pub session_name: Option<String>,
    /// The message's request id.
    pub request_id: String,
}

/// The router's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The agent that answers.
    pub agent: AgentId,
    /// The session the run belongs to.
    pub session: SessionKey,
}

/// Why a message could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The named agent does not exist.
    #[error("no agent \"{0}\"")]
    UnknownAgent(String),
    /// No binding matches, the channel has no default agent, and no agent was named.
    #[error(
        "no agent is bound to channel \"{channel}\" (chat type \"{chat_type}\", peer \"{peer}\")"
    )]
    Unbound {
        /// The channel.
        channel: String,
        /// The chat type.
        chat_type: String,
        /// The peer.
        peer: String,
    },
}

/// The routing table.
#[derive(Debug, Clone, Default)]
pub struct Router {
    agents: Vec<AgentId>,
    /// (agent, channel, chat type, peer), most specific first.
    bindings: Vec<(AgentId, String, Option<String>, Option<String>)>,
    /// A channel's default agent (`[channels.<name>] agent`), for messages no binding claims.
    defaults: std::collections::BTreeMap<String, AgentId>,
}

impl Router {
    /// Builds the table from the agents' `[[bindings]]`.
    pub fn new(config: &Config) -> Self {
        let mut bindings = Vec::new();
        for a in &config.agents {
            for b in &a.bindings {
                bindings.push((
                    a.id.clone(),
                    b.channel.clone(),
                    b.chat_type.clone(),
                    b.peer.clone(),
                ));
            }
        }
        // A binding naming a peer beats one naming a chat type, which beats a channel-wide one.
        bindings.sort_by_key(|(_, _, chat, peer)| (peer.is_none(), chat.is_none()));
        Self {
            agents: config.agents.iter().map(|a| a.id.clone()).collect(),
            bindings,
            defaults: config
                .channels
                .iter()
                .filter_map(|(name, c)| c.agent.clone().map(|a| (name.clone(), a)))
                .collect(),
        }
    }

    /// Routes one inbound message.
    pub fn route(&self, m: &Inbound) -> Result<Route, RouteError> {
        let agent = match &m.agent {
            Some(a) if self.agents.contains(a) => a.clone(),
            Some(a) => return Err(RouteError::UnknownAgent(a.to_string())),
            None => self
                .bindings
                .iter()
                .find(|(_, channel, chat, peer)| {
                    *channel == m.channel
                        && chat.as_ref().is_none_or(|c| *c == m.chat_type)
                        && peer.as_ref().is_none_or(|p| *p == m.peer)
                })
                .map(|(a, ..)| a.clone())
                .or_else(|| self.defaults.get(&m.channel).cloned())
                .ok_or_else(|| RouteError::Unbound {
                    channel: m.channel.clone(),
                    chat_type: m.chat_type.clone(),
                    peer: m.peer.clone(),
                })?,
        };
        let session = match (&m.session_name, m.channel.as_str()) {
            (Some(name), "api") => SessionKey::named(&agent, name),
            (None, "api") => SessionKey::task(&agent, &m.request_id),
            (Some(name), _) => SessionKey::peer(&agent, &m.channel, &m.chat_type, name),
            (None, channel) => SessionKey::peer(&agent, channel, &m.chat_type, &m.peer),
        };
        Ok(Route { agent, session })
    }
}
