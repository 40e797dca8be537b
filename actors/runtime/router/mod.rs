//! The router: maps an inbound message (channel, chat type, peer, bindings) to an agent and a
//! session key in OpenClaw's format.
//!
//! The routing table is immutable after start (it is built from the agent files), so it is a plain
//! value shared by reference rather than an actor: a mailbox hop would add latency to every message
//! and serialise lookups that need no coordination.

#[cfg(test)]
mod tests;

use clawbus_core::config::Config;
use clawbus_core::ids::{AgentId, SessionKey};

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

    /// Whether `agent` is one of the configured agents.
    pub fn knows(&self, agent: &AgentId) -> bool {
        self.agents.contains(agent)
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
