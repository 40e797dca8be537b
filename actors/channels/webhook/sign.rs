//! The webhook signature scheme, inbound and outbound (the Stripe/Slack scheme):
//! `X-Clawbus-Timestamp: <Unix seconds>` and `X-Clawbus-Signature: sha256=<hex>`, the
//! HMAC-SHA256 with the hook's secret of `"{timestamp}.{body}"` (the timestamp's decimal digits
//! as sent, a dot, the raw body). A signature is good only while the timestamp is within the
//! hook's tolerance of the receiver's clock, in the past or the future.

use axum::http::HeaderMap;
use clawbus_core::config::WebhookDef;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-clawbus-signature";
/// The timestamp header: Unix seconds, signed together with the body.
pub const TIMESTAMP_HEADER: &str = "x-clawbus-timestamp";
/// The delivery id header.
pub const DELIVERY_HEADER: &str = "x-clawbus-delivery";

/// A hook whose secret is not in the environment at start.
#[derive(Debug, thiserror::Error)]
#[error(
    "webhooks.{hook}.secret_env: the environment variable {env} is unset or empty (expected the hook's signing secret)"
)]
pub struct MissingSecret {
    /// The hook.
    pub hook: String,
    /// The variable it names.
    pub env: String,
}

/// The signing secret of hook `name`, read from the variable its `secret_env` names.
pub fn secret_from_env(name: &str, def: &WebhookDef) -> Result<Vec<u8>, MissingSecret> {
    std::env::var(&def.secret_env)
        .ok()
        .filter(|s| !s.is_empty())
        .map(String::into_bytes)
        .ok_or_else(|| MissingSecret {
            hook: name.to_string(),
            env: def.secret_env.clone(),
        })
}

/// The longest timestamp accepted, in digits (Unix seconds fit in 11 until the year 5138).
const MAX_TIMESTAMP_DIGITS: usize = 12;

/// Why a delivery's signature is refused (each a 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Refusal {
    /// No `X-Clawbus-Signature`.
    #[error(
        "missing header X-Clawbus-Signature: sha256=<hex HMAC-SHA256 of \"{{timestamp}}.{{body}}\">"
    )]
    MissingSignature,
    /// No `X-Clawbus-Timestamp`, or not Unix seconds.
    #[error(
        "header X-Clawbus-Timestamp: missing or invalid (expected the Unix time in seconds at which the delivery was signed)"
    )]
    BadTimestamp,
    /// The signature is not the HMAC of this timestamp and body with the hook's secret.
    #[error(
        "X-Clawbus-Signature does not match (expected sha256=<hex HMAC-SHA256 of \"{{X-Clawbus-Timestamp}}.{{raw body}}\" with the hook's secret>)"
    )]
    Mismatch,
    /// Signed longer ago than the tolerance.
    #[error(
        "X-Clawbus-Timestamp is {age_s} s old, older than the hook's tolerance of {tolerance_s} s (sign each delivery when sending it)"
    )]
    TooOld {
        /// How old the timestamp is.
        age_s: u64,
        /// The hook's tolerance.
        tolerance_s: u64,
    },
    /// Signed further in the future than the tolerance.
    #[error(
        "X-Clawbus-Timestamp is {ahead_s} s in the future, more than the hook's tolerance of {tolerance_s} s (check the sender's clock)"
    )]
    FromTheFuture {
        /// How far ahead the timestamp is.
        ahead_s: u64,
        /// The hook's tolerance.
        tolerance_s: u64,
    },
}

impl Refusal {
    /// The error code of the 401 answer.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::TooOld { .. } | Self::FromTheFuture { .. } => "stale_signature",
            _ => "invalid_signature",
        }
    }
}

/// A delivery whose signature and timestamp were accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verified {
    /// The signature's bytes: what a replay would carry again.
    pub signature: Vec<u8>,
    /// The signed timestamp, in Unix seconds.
    pub timestamp_s: u64,
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// The signature header value of `body` sent at `timestamp_s` (Unix seconds) with `secret`:
/// `sha256=<hex HMAC-SHA256 of "{timestamp_s}.{body}">` (what inbound deliveries must carry,
/// and what outbound ones carry).
pub fn sign(secret: &[u8], timestamp_s: u64, body: &[u8]) -> Option<String> {
    let hex: String = mac(secret, &timestamp_s.to_string(), body)?
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!("sha256={hex}"))
}

/// Hex digits to bytes; `None` unless it is an even number of hex digits.
fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// The signature bytes of `header` when it is `sha256=<hex>` of the HMAC-SHA256 of
/// `"{timestamp}.{body}"` with `secret` (compared in constant time).
pub fn signature_matches(
    secret: &[u8],
    timestamp: &str,
    body: &[u8],
    header: &str,
) -> Option<Vec<u8>> {
    let sig = header.trim().strip_prefix("sha256=").and_then(from_hex)?;
    // `verify_slice` compares in constant time.
    mac(secret, timestamp, body)?.verify_slice(&sig).ok()?;
    Some(sig)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks a delivery's signature, then its timestamp against `now_ms` (the injected clock)
/// with `tolerance` either way.
pub(crate) fn verify(
    secret: &[u8],
    headers: &HeaderMap,
    body: &[u8],
    now_ms: u64,
    tolerance: Duration,
) -> Result<Verified, Refusal> {
    let signature = header(headers, SIGNATURE_HEADER).ok_or(Refusal::MissingSignature)?;
    let timestamp = header(headers, TIMESTAMP_HEADER)
        .map(str::trim)
        .filter(|t| {
            !t.is_empty()
                && t.len() <= MAX_TIMESTAMP_DIGITS
                && t.bytes().all(|b| b.is_ascii_digit())
        })
        .ok_or(Refusal::BadTimestamp)?;
    let timestamp_s: u64 = timestamp.parse().map_err(|_| Refusal::BadTimestamp)?;
    let signature =
        signature_matches(secret, timestamp, body, signature).ok_or(Refusal::Mismatch)?;
    let now_s = now_ms / 1000;
    let tolerance_s = tolerance.as_secs();
    if now_s > timestamp_s.saturating_add(tolerance_s) {
        return Err(Refusal::TooOld {
            age_s: now_s - timestamp_s,
            tolerance_s,
        });
    }
    if timestamp_s > now_s.saturating_add(tolerance_s) {
        return Err(Refusal::FromTheFuture {
            ahead_s: timestamp_s - now_s,
            tolerance_s,
        });
    }
    Ok(Verified {
        signature,
        timestamp_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_800_000_000_000;
    const TOLERANCE: Duration = Duration::from_secs(300);

    fn headers(timestamp: u64, signature: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(TIMESTAMP_HEADER, timestamp.to_string().parse().unwrap());
        h.insert(SIGNATURE_HEADER, signature.parse().unwrap());
        h
    }

    fn check(timestamp: u64, body: &[u8], signed_body: &[u8]) -> Result<Verified, Refusal> {
        let sig = sign(b"s3cret", timestamp, signed_body).unwrap();
        verify(
            b"s3cret",
            &headers(timestamp, &sig),
            body,
            NOW_MS,
            TOLERANCE,
        )
    }

    #[test]
    fn the_timestamp_and_the_body_are_signed_together() {
        let now = NOW_MS / 1000;
        assert!(check(now, b"hello", b"hello").is_ok());
        assert_eq!(check(now, b"hello!", b"hello"), Err(Refusal::Mismatch));
        // The same signature under another timestamp does not match.
        let sig = sign(b"s3cret", now, b"hello").unwrap();
        let moved = verify(
            b"s3cret",
            &headers(now - 1, &sig),
            b"hello",
            NOW_MS,
            TOLERANCE,
        );
        assert_eq!(moved, Err(Refusal::Mismatch));
        let other = verify(b"other", &headers(now, &sig), b"hello", NOW_MS, TOLERANCE);
        assert_eq!(other, Err(Refusal::Mismatch));
        // The documented string: "{timestamp}.{body}".
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(format!("{now}.hello").as_bytes());
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sig, format!("sha256={expected}"));
    }

    #[test]
    fn a_timestamp_beyond_the_tolerance_either_way_is_refused() {
        let now = NOW_MS / 1000;
        assert!(
            check(now - 300, b"x", b"x").is_ok(),
            "at the edge: accepted"
        );
        assert!(
            check(now + 300, b"x", b"x").is_ok(),
            "at the edge: accepted"
        );
        assert_eq!(
            check(now - 301, b"x", b"x"),
            Err(Refusal::TooOld {
                age_s: 301,
                tolerance_s: 300
            })
        );
        assert_eq!(
            check(now + 600, b"x", b"x"),
            Err(Refusal::FromTheFuture {
                ahead_s: 600,
                tolerance_s: 300
            })
        );
    }

    #[test]
    fn a_missing_or_malformed_timestamp_or_signature_is_refused() {
        let now = NOW_MS / 1000;
        let sig = sign(b"s3cret", now, b"x").unwrap();
        let mut h = headers(now, &sig);
        h.remove(TIMESTAMP_HEADER);
        assert_eq!(
            verify(b"s3cret", &h, b"x", NOW_MS, TOLERANCE),
            Err(Refusal::BadTimestamp)
        );
        h.insert(TIMESTAMP_HEADER, "-5".parse().unwrap());
        assert_eq!(
            verify(b"s3cret", &h, b"x", NOW_MS, TOLERANCE),
            Err(Refusal::BadTimestamp)
        );
        let mut h = headers(now, &sig);
        h.remove(SIGNATURE_HEADER);
        assert_eq!(
            verify(b"s3cret", &h, b"x", NOW_MS, TOLERANCE),
            Err(Refusal::MissingSignature)
        );
        let bare = sig.trim_start_matches("sha256=");
        assert_eq!(
            verify(b"s3cret", &headers(now, bare), b"x", NOW_MS, TOLERANCE),
            Err(Refusal::Mismatch)
        );
    }
}
