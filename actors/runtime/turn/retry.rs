//! When a failed turn is tried again: what kind of failure it was, and how long to wait.

use super::TurnError;
use crate::model::ModelError;
use clawbus_core::config::retry::{ErrorClass, RetryPolicy};
use std::time::Duration;

/// Classifies a failed turn for the retry policy; `None` for failures that no policy retries
/// (a turn guard, a deadline that passed, a scripted-model or configuration error).
pub(crate) fn classify(error: &TurnError) -> Option<ErrorClass> {
    match error {
        TurnError::TimedOut(_) => Some(ErrorClass::Timeout),
        TurnError::Model(e) => classify_model(e),
        _ => None,
    }
}

fn classify_model(error: &ModelError) -> Option<ErrorClass> {
    match error {
        ModelError::TimedOut { .. } => Some(ErrorClass::Timeout),
        ModelError::Http { status: 408, .. } => Some(ErrorClass::Timeout),
        ModelError::Http { status: 429, .. } => Some(ErrorClass::RateLimit),
        ModelError::Http {
            status: 401 | 403, ..
        } => Some(ErrorClass::Auth),
        // A 5xx that blames the request (llama-server's "Failed to parse tool call arguments").
        e if e.is_invalid_request() => Some(ErrorClass::InvalidInput),
        ModelError::Http { status, .. } if *status >= 500 => Some(ErrorClass::Transient),
        ModelError::Http { .. } => Some(ErrorClass::InvalidInput),
        ModelError::Connect(_) | ModelError::CircuitOpen { .. } => Some(ErrorClass::Transient),
        _ => None,
    }
}

/// The wait before attempt `next` (2 for the first retry): the policy's base wait doubled per
/// attempt, capped at its maximum, scaled by `jitter` (expected in 0.8..=1.2).
pub fn backoff(policy: &RetryPolicy, next: u32, jitter: f64) -> Duration {
    let doublings = next.saturating_sub(2).min(20);
    let base = policy
        .base
        .saturating_mul(1u32 << doublings)
        .min(policy.max);
    base.mul_f64(jitter.clamp(0.8, 1.2))
}

/// A jitter factor in 0.8..=1.2, so retries of many tasks do not arrive together.
pub fn jitter() -> f64 {
    0.8 + rand::random::<f64>() * 0.4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_retries(e: &TurnError) -> bool {
        RetryPolicy::default().retries(classify(e))
    }

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let waits: Vec<u128> = (2..=8)
            .map(|n| backoff(&policy, n, 1.0).as_millis())
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(backoff(&policy, 2, 0.8).as_millis(), 400);
        assert_eq!(
            backoff(&policy, 2, 5.0).as_millis(),
            600,
            "jitter is clamped"
        );
    }

    #[test]
    fn failures_are_classified_so_the_policy_can_apply() {
        let http = |status| {
            TurnError::Model(ModelError::Http {
                status,
                body: String::new(),
                target: "m".into(),
            })
        };
        assert_eq!(classify(&http(503)), Some(ErrorClass::Transient));
        assert_eq!(classify(&http(429)), Some(ErrorClass::RateLimit));
        assert_eq!(classify(&http(408)), Some(ErrorClass::Timeout));
        assert_eq!(classify(&http(401)), Some(ErrorClass::Auth));
        assert_eq!(classify(&http(403)), Some(ErrorClass::Auth));
        assert_eq!(classify(&http(400)), Some(ErrorClass::InvalidInput));
        let blamed = TurnError::Model(ModelError::Http {
            status: 500,
            body: r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]","type":"server_error"}}"#.into(),
            target: "m".into(),
        });
        assert_eq!(
            classify(&blamed),
            Some(ErrorClass::InvalidInput),
            "a 500 that blames the request is not transient"
        );
        assert!(!policy_retries(&blamed));
        assert_eq!(
            classify(&TurnError::TimedOut(Duration::from_secs(1))),
            Some(ErrorClass::Timeout)
        );
        assert_eq!(classify(&TurnError::DeadlinePassed), None);
        assert_eq!(classify(&TurnError::TooManyIterations(3)), None);
        let policy = RetryPolicy::default();
        assert!(policy.retries(classify(&http(429))));
        assert!(!policy.retries(classify(&http(401))));
        assert!(!policy.retries(None));
        let strict = RetryPolicy {
            retry_on: vec![ErrorClass::Transient],
            ..RetryPolicy::default()
        };
        assert!(
            !strict.retries(Some(ErrorClass::RateLimit)),
            "rate_limit is its own class"
        );
    }
}
