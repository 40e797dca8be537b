//! Dot-separated topics with NATS-style `*` and `>` wildcards.

use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A topic (`agent.researcher`) or, in a subscription, a pattern (`agent.*`, `agent.>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct Topic(String);

/// Why a string is not a topic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid topic {topic:?}: {reason}")]
pub struct TopicError {
    /// The rejected text.
    pub topic: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Topic {
    /// Parses a topic or pattern: non-empty tokens separated by `.`, no spaces, `>` only last.
    pub fn parse(s: &str) -> Result<Self, TopicError> {
        let err = |reason| TopicError {
            topic: s.to_string(),
            reason,
        };
        if s.is_empty() {
            return Err(err("it is empty"));
        }
        let tokens: Vec<&str> = s.split('.').collect();
        for (i, t) in tokens.iter().enumerate() {
            if t.is_empty() {
                return Err(err("it has an empty token"));
            }
            if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(err("it contains white space"));
            }
            if t.len() > 1 && (t.contains('*') || t.contains('>')) {
                return Err(err("wildcards must be whole tokens"));
            }
            if *t == ">" && i + 1 != tokens.len() {
                return Err(err("'>' may only be the last token"));
            }
        }
        Ok(Self(s.to_string()))
    }

    /// The topic an agent consumes its tasks from: `agent.<id>`.
    pub fn agent(agent_id: &str) -> Self {
        Self(format!("agent.{}", sanitize(agent_id)))
    }

    /// The topic an agent publishes its lifecycle and stream events on: `agent.<id>.events`.
    pub fn agent_events(agent_id: &str) -> Self {
        Self(format!("agent.{}.events", sanitize(agent_id)))
    }

    /// Where cancellations are announced: `tasks.cancelled`.
    pub fn cancellations() -> Self {
        Self("tasks.cancelled".to_string())
    }

    /// Where requests to start a flow run go (a cron job's `flow` payload): `flow.starts`. The
    /// flow engine consumes it; the task ends when the run does.
    pub fn flow_starts() -> Self {
        Self("flow.starts".to_string())
    }

    /// Where the start and the end of every task are published (its `queued` and `terminal`
    /// events, also on [`Topic::task_events`]): `tasks.lifecycle`, for whoever tracks every
    /// task without its stream of deltas.
    pub fn task_lifecycle() -> Self {
        Self("tasks.lifecycle".to_string())
    }

    /// Where requests to the task coordinator go: `coord.<request>` (`coord.wait`).
    pub fn coordinator(request: &str) -> Self {
        Self(format!("coord.{}", sanitize(request)))
    }

    /// The topic of a broadcast group posted to shared topic `shared`: `broadcast.<shared>`.
    /// Nobody consumes it: the group's record ends when its member tasks have.
    pub fn broadcast_group(shared: &Topic) -> Self {
        Self(format!("broadcast.{}", shared.0))
    }

    /// Every request to the task coordinator: `coord.>`.
    pub fn coordinator_requests() -> Self {
        Self("coord.>".to_string())
    }

    /// Where every event of one task is published: `events.task.<task_id>`.
    pub fn task_events(task_id: uuid::Uuid) -> Self {
        Self(format!("events.task.{task_id}"))
    }

    /// Where the events of every task submitted to `work` are published: `events.<work>`
    /// (`events.agent.assistant`). The `events.` namespace holds no work topics.
    pub fn events_for(work: &Topic) -> Self {
        Self(format!("events.{}", work.0))
    }

    /// A private reply topic: `_inbox.<unique>`.
    pub fn inbox() -> Self {
        Self(format!("_inbox.{}", uuid::Uuid::now_v7().simple()))
    }

    /// The topic as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when this topic contains a wildcard, so it can only be subscribed to.
    pub fn is_pattern(&self) -> bool {
        self.0.split('.').any(|t| t == "*" || t == ">")
    }

    /// True when the concrete `topic` matches this pattern.
    pub fn matches(&self, topic: &Topic) -> bool {
        let mut pattern = self.0.split('.');
        let mut subject = topic.0.split('.');
        loop {
            match (pattern.next(), subject.next()) {
                (Some(">"), Some(_)) => return true,
                (Some("*"), Some(_)) => {}
                (Some(p), Some(s)) if p == s => {}
                (None, None) => return true,
                _ => return false,
            }
        }
    }
}

/// Topic tokens cannot hold `.`, `*`, `>` or white space; ids are already checked, this is a backstop.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            '.' | '*' | '>' => '_',
            c if c.is_whitespace() => '_',
            c => c,
        })
        .collect()
}

impl TryFrom<String> for Topic {
    type Error = TopicError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<Topic> for String {
    fn from(t: Topic) -> String {
        t.0
    }
}

/// Written as its text, borrowed (serde's `into = "String"` would copy it first).
impl Serialize for Topic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Topic;

    fn t(s: &str) -> Topic {
        Topic::parse(s).unwrap()
    }

    #[test]
    fn wildcards_match_like_nats() {
        assert!(t("agent.*").matches(&t("agent.researcher")));
        assert!(!t("agent.*").matches(&t("agent.researcher.events")));
        assert!(t("agent.>").matches(&t("agent.researcher.events")));
        assert!(!t("agent.>").matches(&t("agent")));
        assert!(t("*.researcher").matches(&t("agent.researcher")));
        assert!(t("agent.researcher").matches(&t("agent.researcher")));
        assert!(!t("agent.researcher").matches(&t("agent.writer")));
        assert!(t(">").matches(&t("a.b.c")));
    }

    #[test]
    fn malformed_topics_are_rejected_with_reason() {
        for bad in ["", "a..b", "a.>.b", "a.b*", "a b"] {
            assert!(Topic::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        assert_eq!(
            Topic::parse("a..b").unwrap_err().to_string(),
            "invalid topic \"a..b\": it has an empty token"
        );
    }
}
