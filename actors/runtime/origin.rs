//! Where a task came from and where it runs: the typed origin a channel sets on an envelope.
//!
//! The bus carries it as headers (the bus knows nothing of channels or sessions); every read and
//! write goes through [`Origin`] and [`Header`], so no part of the daemon spells a header key.

use bus::Envelope;
use clawbus_core::config::MAIN_LANE;
use clawbus_core::ids::{AgentId, Channel, SessionKey};
use uuid::Uuid;

/// The header keys clawbus sets on task envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Header {
    /// The channel the message came from (`api`, `demo`, `telegram` …).
    Channel,
    /// `direct`, `group`, `task` …
    ChatType,
    /// Who sent it on that channel.
    Peer,
    /// A session name given by a script (`--session NAME`).
    SessionName,
    /// The session key the channel's routing chose (set at ingress).
    SessionKey,
    /// The global lane the run takes a slot in.
    Lane,
    /// The task that started this one (an agent call, a subagent).
    ParentTask,
    /// The agents waiting on this task, outermost first (comma-separated).
    CallChain,
    /// The session told of this task's outcome when it ends.
    NotifySession,
    /// How many subagent spawns deep this task is (0 for work nobody spawned).
    Depth,
    /// A broadcast group: how many member tasks it waits for.
    Members,
    /// The attempts this task may take, over its agent's retry policy.
    MaxAttempts,
    /// Where the reply also goes, as the client asked (`<channel>:<to>`).
    DeliverTo,
}

impl Header {
    /// Every header.
    const ALL: [Self; 13] = [
        Self::CallChain,
        Self::Channel,
        Self::ChatType,
        Self::DeliverTo,
        Self::Depth,
        Self::Lane,
        Self::MaxAttempts,
        Self::Members,
        Self::NotifySession,
        Self::ParentTask,
        Self::Peer,
        Self::SessionName,
        Self::SessionKey,
    ];

    /// The header whose key is `key`, if clawbus sets one.
    pub fn named(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == key)
    }

    /// The key on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Channel => "channel",
            Self::ChatType => "chat_type",
            Self::Peer => "peer",
            Self::SessionName => "session",
            Self::SessionKey => "session_key",
            Self::Lane => "lane",
            Self::ParentTask => "parent_task",
            Self::CallChain => "call_chain",
            Self::NotifySession => "notify_session",
            Self::Depth => "depth",
            Self::Members => "members",
            Self::MaxAttempts => "max_attempts",
            Self::DeliverTo => "deliver_to",
        }
    }
}

/// The origin of a task, as its channel set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The channel (`api` for scripts); its name on the wire.
    pub channel: Channel,
    /// The chat type (`task` for scripts).
    pub chat_type: String,
    /// The sender on that channel (empty for scripts).
    pub peer: String,
    /// A session name given by a script.
    pub session_name: Option<String>,
    /// The session key chosen by routing at ingress; `None`: the agent routes by its own id.
    pub session_key: Option<SessionKey>,
    /// The lane the run takes a slot in.
    pub lane: String,
    /// The task that started this one.
    pub parent_task: Option<Uuid>,
    /// The agents whose turns wait on this task, outermost first.
    pub call_chain: Vec<AgentId>,
    /// The session told of this task's outcome when it ends (an agent call that did not wait,
    /// a subagent).
    pub notify_session: Option<SessionKey>,
    /// How many subagent spawns deep this task is (0 for work nobody spawned).
    pub depth: u32,
    /// For a broadcast group: how many member tasks (one per subscribing agent) it waits for.
    pub members: Option<u32>,
    /// The attempts this task may take (the poster's `max_attempts`); `None`: its agent's policy.
    pub max_attempts: Option<u32>,
    /// Where the reply also goes, as the client asked (OpenClaw's `agent --deliver`); `None`:
    /// only where the channel it came from replies.
    pub deliver_to: Option<DeliverTo>,
}

/// A channel and a target on it that a task's reply is delivered to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverTo {
    /// The delivering channel (`telegram`, `webhook`).
    pub channel: Channel,
    /// The target on it: a chat id, a webhook's name.
    pub to: String,
}

impl DeliverTo {
    /// `<channel>:<to>`, as the header carries it.
    fn encode(&self) -> String {
        format!("{}:{}", self.channel, self.to)
    }

    fn decode(value: &str) -> Result<Self, OriginError> {
        let (channel, to) = value.split_once(':').ok_or_else(|| OriginError {
            key: Header::DeliverTo.as_str(),
            message: format!("{value:?} is not <channel>:<to>"),
        })?;
        Ok(Self {
            channel: Channel::from(channel),
            to: to.to_string(),
        })
    }
}

impl Default for Origin {
    fn default() -> Self {
        Self::api()
    }
}

/// An origin header that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header {key}: {message}")]
pub struct OriginError {
    /// The header key.
    pub key: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

impl Origin {
    /// A script's task posted straight to an agent topic.
    pub fn api() -> Self {
        Self {
            channel: Channel::Api,
            chat_type: "task".into(),
            peer: String::new(),
            session_name: None,
            session_key: None,
            lane: MAIN_LANE.into(),
            parent_task: None,
            call_chain: Vec::new(),
            notify_session: None,
            depth: 0,
            members: None,
            max_attempts: None,
            deliver_to: None,
        }
    }

    /// Writes the origin onto an envelope's headers.
    pub fn apply(&self, mut env: Envelope) -> Envelope {
        let h = &mut env.headers;
        h.insert(Header::Channel.as_str().into(), self.channel.to_string());
        h.insert(Header::ChatType.as_str().into(), self.chat_type.clone());
        if !self.peer.is_empty() {
            h.insert(Header::Peer.as_str().into(), self.peer.clone());
        }
        if let Some(name) = &self.session_name {
            h.insert(Header::SessionName.as_str().into(), name.clone());
        }
        if let Some(key) = &self.session_key {
            h.insert(Header::SessionKey.as_str().into(), key.to_string());
        }
        h.insert(Header::Lane.as_str().into(), self.lane.clone());
        if let Some(parent) = self.parent_task {
            h.insert(Header::ParentTask.as_str().into(), parent.to_string());
        }
        if !self.call_chain.is_empty() {
            let chain: Vec<&str> = self.call_chain.iter().map(AgentId::as_str).collect();
            h.insert(Header::CallChain.as_str().into(), chain.join(","));
        }
        if let Some(key) = &self.notify_session {
            h.insert(Header::NotifySession.as_str().into(), key.to_string());
        }
        if self.depth > 0 {
            h.insert(Header::Depth.as_str().into(), self.depth.to_string());
        }
        if let Some(n) = self.members {
            h.insert(Header::Members.as_str().into(), n.to_string());
        }
        if let Some(n) = self.max_attempts {
            h.insert(Header::MaxAttempts.as_str().into(), n.to_string());
        }
        if let Some(to) = &self.deliver_to {
            h.insert(Header::DeliverTo.as_str().into(), to.encode());
        }
        env
    }

    /// Reads the origin of an envelope; absent headers take the defaults of a script's task.
    /// One pass over the headers (a search of the map per key cost several times more, and a
    /// turn reads its origin four times).
    pub fn of(env: &Envelope) -> Result<Self, OriginError> {
        let mut origin = Self::api();
        for (key, value) in &env.headers {
            if let Some(header) = Header::named(key) {
                origin.read(header, value)?;
            }
        }
        Ok(origin)
    }

    /// Takes the value of one header.
    fn read(&mut self, header: Header, value: &str) -> Result<(), OriginError> {
        let invalid = |message: String| OriginError {
            key: header.as_str(),
            message,
        };
        match header {
            Header::Channel => self.channel = Channel::from(value),
            Header::ChatType => self.chat_type = value.to_string(),
            Header::Peer => self.peer = value.to_string(),
            Header::SessionName => self.session_name = Some(value.to_string()),
            Header::SessionKey => {
                self.session_key =
                    Some(SessionKey::parse(value).map_err(|e| invalid(e.to_string()))?);
            }
            Header::Lane => self.lane = value.to_string(),
            Header::ParentTask => {
                self.parent_task = Some(
                    Uuid::parse_str(value)
                        .map_err(|e| invalid(format!("{value:?} is not a task id: {e}")))?,
                );
            }
            Header::CallChain => self.call_chain = value.split(',').map(AgentId::new).collect(),
            Header::NotifySession => {
                self.notify_session =
                    Some(SessionKey::parse(value).map_err(|e| invalid(e.to_string()))?);
            }
            Header::Depth => {
                self.depth = value
                    .parse()
                    .map_err(|e| invalid(format!("{value:?} is not a depth: {e}")))?;
            }
            Header::Members => {
                self.members = Some(
                    value
                        .parse()
                        .map_err(|e| invalid(format!("{value:?} is not a member count: {e}")))?,
                );
            }
            Header::MaxAttempts => {
                self.max_attempts =
                    Some(value.parse().map_err(|e| {
                        invalid(format!("{value:?} is not a number of attempts: {e}"))
                    })?);
            }
            Header::DeliverTo => self.deliver_to = Some(DeliverTo::decode(value)?),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::{RequestId, Topic};

    #[test]
    fn every_header_is_found_by_its_key_and_no_other() {
        for h in Header::ALL {
            assert_eq!(Header::named(h.as_str()), Some(h));
        }
        let mut keys: Vec<&str> = Header::ALL.iter().map(|h| h.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Header::ALL.len());
        assert_eq!(Header::named("trace_id"), None);
    }

    #[test]
    fn round_trips_through_headers() {
        let origin = Origin {
            channel: "demo".into(),
            chat_type: "group".into(),
            peer: "alice".into(),
            session_name: None,
            session_key: SessionKey::parse("agent:a:demo:group:alice").ok(),
            lane: "cron".into(),
            parent_task: Some(Uuid::now_v7()),
            call_chain: vec![AgentId::new("a"), AgentId::new("b")],
            notify_session: SessionKey::parse("agent:a:main").ok(),
            depth: 2,
            members: Some(3),
            max_attempts: Some(2),
            deliver_to: Some(DeliverTo {
                channel: Channel::Webhook,
                to: "deploys:x".into(),
            }),
        };
        let env = Envelope::task(
            Topic::agent("a"),
            RequestId::random(),
            serde_json::json!({}),
        );
        let env = origin.apply(env);
        assert_eq!(Origin::of(&env), Ok(origin));
    }

    #[test]
    fn an_envelope_stored_before_the_typed_origin_still_loads() {
        // A task envelope as an earlier build stored it: the origin as string headers.
        let stored = r#"{"v":1,"id":"0190f5c2-6c5e-7a8b-9c0d-1e2f3a4b5c6d","request_id":"r-1","topic":"agent.b","kind":"task","payload":{"text":"hi"},"reply_to":null,"headers":{"channel":"agent","chat_type":"direct","peer":"","lane":"main","call_chain":"a,b","session_key":"agent:b:main"}}"#;
        let env: Envelope = serde_json::from_str(stored).unwrap();
        let origin = Origin::of(&env).unwrap();
        assert_eq!(origin.channel, Channel::Agent);
        assert_eq!(origin.call_chain, [AgentId::new("a"), AgentId::new("b")]);
        // Written back, the headers are the same strings.
        let again = origin.apply(Envelope::task(
            Topic::agent("b"),
            RequestId::random(),
            serde_json::json!({}),
        ));
        for key in ["channel", "chat_type", "lane", "call_chain", "session_key"] {
            assert_eq!(again.headers.get(key), env.headers.get(key), "{key}");
        }
        let other: Envelope = serde_json::from_str(
            &stored.replace("\"agent\",\"chat_type\"", "\"demo\",\"chat_type\""),
        )
        .unwrap();
        assert_eq!(
            Origin::of(&other).unwrap().channel,
            Channel::Other("demo".into())
        );
    }

    #[test]
    fn missing_headers_mean_a_script_task_on_main() {
        let env = Envelope::task(
            Topic::agent("a"),
            RequestId::random(),
            serde_json::json!({}),
        );
        assert_eq!(Origin::of(&env), Ok(Origin::api()));
    }

    #[test]
    fn a_bad_parent_names_its_header() {
        let env = Envelope::task(
            Topic::agent("a"),
            RequestId::random(),
            serde_json::json!({}),
        )
        .header("parent_task", "nope");
        let err = Origin::of(&env).err().map(|e| e.key);
        assert_eq!(err, Some("parent_task"));
    }
}
