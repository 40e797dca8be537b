//! Identifier newtypes shared by the actors: [`AgentId`], [`SessionKey`], [`Channel`], and the names derived
//! from them ([`chat_of_session`], [`outbound_topic`]).

mod channel;
mod session_key;
mod topic;

pub use channel::Channel;
pub use session_key::{SessionKey, SessionKeyError, chat_of_session};
pub use topic::outbound_topic;

use serde::{Deserialize, Serialize};
use std::fmt;

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
    pub fn parse(id: &str) -> Result<Self, String> {
        let ok_len = !id.is_empty() && id.len() <= 64;
        let ok_chars = id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        let ok_start = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if ok_len && ok_chars && ok_start {
            Ok(Self(id.to_string()))
        } else {
            Err(format!(
                "invalid agent id {id:?} (expected 1-64 characters of a-z, 0-9, '-' or '_', starting with a letter or digit)"
            ))
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

/// The longest name a client may give on any ingress (a session name, a peer, a chat type).
pub const MAX_NAME_LEN: usize = 128;

/// Checks a name a client gives on any ingress (HTTP, the channel inbound, the OpenAI endpoint,
/// the WebSocket gateway): 1-128 characters of `A-Z a-z 0-9 - _ . @ +`. The one alphabet keeps
/// control characters (a forged log line) and separators (`:` in a session key) out. `what`
/// names the field in the error, which shows at most the first 64 characters of a long name.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'));
    if ok {
        return Ok(());
    }
    Err(format!(
        "{what} {}: expected 1-{MAX_NAME_LEN} characters of A-Z, a-z, 0-9, '-', '_', '.', '@' or '+'",
        shown(name)
    ))
}

/// A client's text for an error message: quoted, the first 64 characters of a longer one with
/// its length.
pub fn shown(text: &str) -> String {
    const SHOWN: usize = 64;
    let count = text.chars().count();
    if count <= SHOWN {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{head:?}… ({count} characters)")
}

#[cfg(test)]
mod tests {
    use super::{check_name, shown};

    #[test]
    fn one_alphabet_for_names_and_long_ones_shown_cut() {
        assert!(check_name("session", "alice@example.com+1_a-b.c").is_ok());
        for bad in ["", "a b", "a\nb", "a:b", "é"] {
            assert!(check_name("session", bad).is_err(), "{bad:?}");
        }
        let long = "x".repeat(129);
        let e = check_name("session", &long).unwrap_err();
        assert!(e.contains("(129 characters)") && e.len() < 250, "{e}");
        assert_eq!(shown("ab"), "\"ab\"");
    }
}
