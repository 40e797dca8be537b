//! The topics named after a channel.

use bus::Topic;

/// The topic a channel adapter reads outgoing messages from: `channel.<name>.out`.
pub fn outbound_topic(channel: &str) -> Result<Topic, String> {
    let ok = !channel.is_empty()
        && channel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(format!(
            "invalid channel name {channel:?} (expected letters, digits, '-' or '_')"
        ));
    }
    Topic::parse(&format!("channel.{channel}.out")).map_err(|e| e.to_string())
}
