//! `subscribe = ["team.research"]` in an agent file: the shared topics the agent takes work
//! from besides `agent.<id>`. A task posted to a shared topic goes to exactly one subscriber.

use super::Problem;
use super::span::Source;
use bus::Topic;
use toml::Spanned;

/// Topic prefixes a shared topic may not start with: agent topics, event streams, the
/// cancellation notices and reply inboxes belong to the system.
pub(crate) const RESERVED_PREFIXES: &[&str] = &[
    "agent.",
    "events.",
    "tasks.",
    "_inbox.",
    "coord.",
    "broadcast.",
];

/// Checks one shared topic: a concrete topic (no wildcard) outside the reserved namespaces.
pub fn shared_topic(raw: &str) -> Result<Topic, SharedTopicError> {
    let topic = Topic::parse(raw)?;
    if topic.is_pattern() {
        return Err(SharedTopicError::Pattern {
            given: raw.to_string(),
        });
    }
    if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| raw.starts_with(**p)) {
        return Err(SharedTopicError::Reserved {
            given: raw.to_string(),
            prefix,
        });
    }
    Ok(topic)
}

/// A text that is not a shared topic ([`shared_topic`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SharedTopicError {
    /// Not a topic.
    #[error(transparent)]
    Topic(#[from] bus::topic::TopicError),
    /// A pattern (`*`, `>`).
    #[error("{given:?} is a pattern (expected a concrete topic such as \"team.research\")")]
    Pattern {
        /// The text given.
        given: String,
    },
    /// In a namespace the system keeps.
    #[error(
        "{given:?} starts with the reserved {prefix:?} (expected a shared topic such as \"team.research\")"
    )]
    Reserved {
        /// The text given.
        given: String,
        /// The reserved prefix.
        prefix: &'static str,
    },
}

/// The agent's checked shared topics, without repeats; problems go to `problems`.
pub(super) fn subscriptions(
    src: &Source,
    raw: &[Spanned<String>],
    problems: &mut Vec<Problem>,
) -> Vec<Topic> {
    let mut out: Vec<Topic> = Vec::new();
    for entry in raw {
        match shared_topic(entry.get_ref()) {
            Ok(t) if out.contains(&t) => {}
            Ok(t) => out.push(t),
            Err(message) => problems.push(src.at(Some(entry.span()), "subscribe", message)),
        }
    }
    out
}
