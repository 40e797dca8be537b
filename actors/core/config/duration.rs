//! Human durations in config files: `"500ms"`, `"30s"`, `"2m"`, `"24h"`, `"1d"`, `"1h30m"`.
//!
//! The `humantime` crate does the parsing, so its wider forms are accepted too (`"1h 30m"`,
//! `"1.5s"`, `"2days"`, `"1w"`); this module only turns its errors into sentences that name the
//! input and say what is expected.

use std::fmt;
use std::time::Duration;

const EXPECTED: &str =
    "(expected a number followed by ms, s, m, h or d, e.g. \"30s\" or \"1h30m\")";

/// Parses a human duration such as `"30s"` or `"1h30m"` (see the module docs for every form).
///
/// The error displays as a complete sentence naming the input, ready to show to a person.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let text = s.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    humantime::parse_duration(text).map_err(|source| {
        let why = match &source {
            humantime::DurationError::Empty => "empty".to_string(),
            humantime::DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
                "missing unit".to_string()
            }
            humantime::DurationError::UnknownUnit { unit, .. } => {
                format!("unknown unit {unit:?}")
            }
            humantime::DurationError::NumberExpected(_) => {
                "a number must come before each unit".to_string()
            }
            humantime::DurationError::InvalidCharacter(at) => match text.get(*at..) {
                Some(rest) => match rest.chars().next() {
                    Some(c) => format!("unexpected character {c:?}"),
                    None => "unexpected end".to_string(),
                },
                None => "unexpected character".to_string(),
            },
            humantime::DurationError::NumberOverflow => "too large or too precise".to_string(),
        };
        DurationError::Invalid {
            given: s.to_string(),
            why,
            source,
        }
    })
}

/// A text that is not a duration ([`parse_duration`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing but blanks.
    #[error("empty duration {EXPECTED}")]
    Empty,
    /// `humantime` refuses it; `why` says where, in words.
    #[error("invalid duration {given:?}: {why} {EXPECTED}")]
    Invalid {
        /// The text given.
        given: String,
        /// What is wrong, in words.
        why: String,
        /// The parser's error.
        source: humantime::DurationError,
    },
}

/// A duration as written in a file (`"30s"`), checked later with [`parse_duration`]. It reads like
/// a string; only its type error differs: `timeout = 30` asks for a duration, not "a string".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DurationText(pub String);

impl<'de> serde::Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = DurationText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"30s\", \"500ms\" or \"1h30m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationText, E> {
                Ok(DurationText(v.to_string()))
            }
        }
        d.deserialize_str(Text)
    }
}
