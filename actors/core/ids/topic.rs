//! The topics named after a channel.

use bus::Topic;

/// The topic a channel adapter reads outgoing messages from: `channel.<name>.out`.
pub fn outbound_topic(channel: &str) -> Result<Topic, OutboundTopicError> {
    let ok = !channel.is_empty()
        && channel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(OutboundTopicError::Name {
            given: channel.to_string(),
        });
    }
    Ok(Topic::parse(&format!("channel.{channel}.out"))?)
}

/// A channel name that cannot name an outbound topic ([`outbound_topic`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OutboundTopicError {
    /// Not letters, digits, `-` or `_`.
    #[error("invalid channel name {given:?} (expected letters, digits, '-' or '_')")]
    Name {
        /// The name given.
        given: String,
    },
    /// The topic does not parse.
    #[error(transparent)]
    Topic(#[from] bus::topic::TopicError),
}
