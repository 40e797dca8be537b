//! The channel a message came in on: the known ones by variant, any other by name.

use std::fmt;
use std::hash::{Hash, Hasher};

/// A channel name (`api`, `telegram`, `cron` …), as a task's origin and a session key carry it.
///
/// Build one with [`Channel::from`], which maps a known name to its variant: two channels are
/// equal when their names are, so `Channel::Other("api".into())` equals [`Channel::Api`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Channel {
    /// Scripts and the task API (`api`).
    Api,
    /// The command line (`clawbus chat`, `clawbus run`: `cli`).
    Cli,
    /// The Telegram bot (`telegram`).
    Telegram,
    /// Inbound and outbound webhooks (`webhook`).
    Webhook,
    /// A cron job's or a heartbeat's fire (`cron`).
    Cron,
    /// Work one run started for another: `sessions_send`, `agent_call`, outcome notices (`agent`).
    Agent,
    /// A spawned subagent's task (`subagent`).
    Subagent,
    /// The WebSocket gateway (`ws`).
    Ws,
    /// The OpenAI-compatible endpoint (`openai`).
    OpenAi,
    /// A node of a flow run (`flow`).
    Flow,
    /// Any other name: a channel the configuration names, or a test's.
    Other(String),
}

impl Channel {
    /// The known channels, each once.
    pub(crate) const KNOWN: [Channel; 10] = [
        Self::Api,
        Self::Cli,
        Self::Telegram,
        Self::Webhook,
        Self::Cron,
        Self::Agent,
        Self::Subagent,
        Self::Ws,
        Self::OpenAi,
        Self::Flow,
    ];

    /// The channel's name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Api => "api",
            Self::Cli => "cli",
            Self::Telegram => "telegram",
            Self::Webhook => "webhook",
            Self::Cron => "cron",
            Self::Agent => "agent",
            Self::Subagent => "subagent",
            Self::Ws => "ws",
            Self::OpenAi => "openai",
            Self::Flow => "flow",
            Self::Other(name) => name,
        }
    }
}

impl From<&str> for Channel {
    fn from(name: &str) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|c| c.as_str() == name)
            .unwrap_or_else(|| Self::Other(name.to_string()))
    }
}

impl From<String> for Channel {
    fn from(name: String) -> Self {
        Self::from(name.as_str())
    }
}

impl PartialEq for Channel {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Channel {}

impl Hash for Channel {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Channel {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Channel {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl AsRef<str> for Channel {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// On the wire and in stored records a channel is its name, a plain string.
impl serde::Serialize for Channel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Channel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_map_to_their_variant_and_others_keep_theirs() {
        for known in Channel::KNOWN {
            let name = known.as_str().to_string();
            assert!(!matches!(Channel::from(name.as_str()), Channel::Other(_)));
            assert_eq!(Channel::from(name.clone()), known);
            assert_eq!(known.to_string(), name);
        }
        assert_eq!(Channel::from("openai"), Channel::OpenAi);
        assert_eq!(
            Channel::from("demo"),
            Channel::Other("demo".into()),
            "an unknown name is kept"
        );
        assert_eq!(Channel::Other("api".into()), Channel::Api);
        assert!(Channel::Telegram == "telegram");
    }

    #[test]
    fn serializes_as_its_name() {
        let json = serde_json::to_string(&[Channel::Telegram, Channel::from("demo")]).unwrap();
        assert_eq!(json, r#"["telegram","demo"]"#);
        let back: Vec<Channel> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, [Channel::Telegram, Channel::Other("demo".into())]);
    }
}
