//! Human durations in config files: `"500ms"`, `"30s"`, `"2m"`, `"24h"`, `"1d"`, `"1h30m"`.

use std::fmt;
use std::time::Duration;

const EXPECTED: &str =
    "(expected a number followed by ms, s, m, h or d, e.g. \"30s\" or \"1h30m\")";

/// Parses `"<n><unit>"` repeated (`ms`, `s`, `m`, `h`, `d`), e.g. `"1h30m"`.
///
/// The error is a complete sentence naming the input, ready to show to a person.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    if text.is_empty() {
        return Err(format!("empty duration {EXPECTED}"));
    }
    let bad = |why: &str| format!("invalid duration {s:?}: {why} {EXPECTED}");
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("a number must come before each unit"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let millis_per: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad(&format!("unknown unit {unit:?}"))),
        };
        let millis = number
            .checked_mul(millis_per)
            .ok_or_else(|| bad("too large"))?;
        total = total
            .checked_add(Duration::from_millis(millis))
            .ok_or_else(|| bad("too large"))?;
    }
    Ok(total)
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
