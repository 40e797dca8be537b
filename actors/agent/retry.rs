//! When a failed turn is tried again: which failures pass, and how long to wait.

use super::TurnError;
use crate::config::Limits;
use std::time::Duration;

/// Why a turn failed, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// Rate limit, overload, 5xx, a lost connection: the same turn may well succeed later.
    Transient,
    /// The turn ran past its time limit.
    Timeout,
    /// Anything else (a bad request, auth, a turn guard, a deadline that passed): trying again
    /// would fail the same way.
    Final,
}

/// Classifies a failed turn.
pub fn classify(error: &TurnError) -> FailureClass {
    match error {
        TurnError::Model(e) if e.falls_over() => FailureClass::Transient,
        TurnError::TimedOut(_) => FailureClass::Timeout,
        _ => FailureClass::Final,
    }
}

/// The wait before attempt `next` (2 for the first retry): `retry_backoff` doubled per attempt,
/// capped at `retry_backoff_max`, scaled by `jitter` (expected in 0.8..=1.2).
pub fn backoff(limits: &Limits, next: u32, jitter: f64) -> Duration {
    let doublings = next.saturating_sub(2).min(20);
    let base = limits
        .retry_backoff
        .saturating_mul(1u32 << doublings)
        .min(limits.retry_backoff_max);
    base.mul_f64(jitter.clamp(0.8, 1.2))
}

/// A jitter factor in 0.8..=1.2, so retries of many tasks do not arrive together.
pub fn jitter() -> f64 {
    0.8 + rand::random::<f64>() * 0.4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let limits = Limits::default();
        let waits: Vec<u128> = (2..=8)
            .map(|n| backoff(&limits, n, 1.0).as_millis())
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(backoff(&limits, 2, 0.8).as_millis(), 400);
        assert_eq!(
            backoff(&limits, 2, 5.0).as_millis(),
            600,
            "jitter is clamped"
        );
    }

    #[test]
    fn passing_failures_are_told_apart_from_final_ones() {
        use crate::model::ModelError;
        let http = |status| {
            TurnError::Model(ModelError::Http {
                status,
                body: String::new(),
                target: "m".into(),
            })
        };
        assert_eq!(classify(&http(503)), FailureClass::Transient);
        assert_eq!(classify(&http(429)), FailureClass::Transient);
        assert_eq!(classify(&http(401)), FailureClass::Final);
        assert_eq!(classify(&http(400)), FailureClass::Final);
        assert_eq!(
            classify(&TurnError::TimedOut(Duration::from_secs(1))),
            FailureClass::Timeout
        );
        assert_eq!(classify(&TurnError::DeadlinePassed), FailureClass::Final);
        assert_eq!(
            classify(&TurnError::TooManyIterations(3)),
            FailureClass::Final
        );
    }
}
