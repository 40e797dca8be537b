//! The names a client gives on an ingress, one newtype per kind: [`SessionName`], [`Peer`],
//! [`ChatType`] share one alphabet ([`check_name`]); [`ChannelName`] is stricter (a channel name
//! is also a topic segment, `channel.<name>.out`, and a config key). All answer one error,
//! [`NameError`]; a value of one of these types has been checked, so the pipeline behind the
//! ingress never checks again.

use std::fmt;

/// The longest name a client may give on any ingress (a session name, a peer, a chat type).
pub const MAX_NAME_LEN: usize = 128;

/// The alphabet of names, as an error states it.
const NAME_ALPHABET: &str = "1-128 characters of A-Z, a-z, 0-9, '-', '_', '.', '@' or '+'";

/// The longest channel name.
pub const MAX_CHANNEL_LEN: usize = 64;

/// A name that is not one: which field held it, the name as shown (cut when long), and what
/// was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {shown}: expected {expected}")]
pub struct NameError {
    /// The field that held the name (`session`, `peer`, `X-Clawbus-Session` …).
    pub what: String,
    /// The name, quoted, at most its first 64 characters ([`shown`]).
    pub shown: String,
    /// The alphabet and length the name must have.
    pub expected: &'static str,
}

/// Checks a name a client gives on any ingress (HTTP, the channel inbound, the OpenAI endpoint,
/// the WebSocket gateway): 1-128 characters of `A-Z a-z 0-9 - _ . @ +`. The one alphabet keeps
/// control characters (a forged log line) and separators (`:` in a session key) out. `what`
/// names the field in the error, which shows at most the first 64 characters of a long name.
pub fn check_name(what: &str, name: &str) -> Result<(), NameError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'));
    if ok {
        return Ok(());
    }
    Err(NameError {
        what: what.to_string(),
        shown: shown(name),
        expected: NAME_ALPHABET,
    })
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

/// Declares a checked name type: `parse(what, name)` checks it with [`check_name`].
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Checks `name` ([`check_name`]); `what` names the field it came in for the error.
            pub fn parse(what: &str, name: &str) -> Result<Self, NameError> {
                check_name(what, name).map(|()| Self(name.to_string()))
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A session name a client chose (`--session NAME`, `X-Clawbus-Session`, a WebSocket
    /// `sessionKey` that is not a full key).
    SessionName
);
name_type!(
    /// Who sent a message on a channel, as the client names them.
    Peer
);
name_type!(
    /// The kind of chat a message came from (`direct`, `group` …), as the client names it.
    ChatType
);

/// The name of a channel a client posts on (`POST /v1/channels/{name}/messages`): 1-64
/// characters of `a-z 0-9 - _`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelName(String);

impl ChannelName {
    /// The alphabet of channel names, as an error states it.
    pub const EXPECTED: &str = "lowercase letters, digits, '-' or '_'";

    /// Checks `name`; `what` names the field it came in for the error.
    pub fn parse(what: &str, name: &str) -> Result<Self, NameError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_CHANNEL_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
        if ok {
            return Ok(Self(name.to_string()));
        }
        Err(NameError {
            what: what.to_string(),
            shown: shown(name),
            expected: Self::EXPECTED,
        })
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_alphabet_for_names_and_long_ones_shown_cut() {
        assert!(check_name("session", "alice@example.com+1_a-b.c").is_ok());
        for bad in ["", "a b", "a\nb", "a:b", "é"] {
            assert!(check_name("session", bad).is_err(), "{bad:?}");
        }
        let long = "x".repeat(129);
        let e = check_name("session", &long).unwrap_err().to_string();
        assert!(e.contains("(129 characters)") && e.len() < 250, "{e}");
        assert_eq!(shown("ab"), "\"ab\"");
    }

    #[test]
    fn every_kind_of_name_takes_the_same_alphabet_and_names_its_field() {
        assert_eq!(
            SessionName::parse("session", "s-1").map(|s| s.to_string()),
            Ok("s-1".into())
        );
        assert!(Peer::parse("peer", "alice@x").is_ok());
        let e = ChatType::parse("chat_type", "a:b").unwrap_err();
        assert_eq!(e.what, "chat_type");
        assert!(
            e.to_string()
                .starts_with("chat_type \"a:b\": expected 1-128")
        );
    }
}
