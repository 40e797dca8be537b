//! How long a delivery waits before its next try: exponential, capped, with jitter.

use clawbus_core::config::DeliveryDef;
use std::time::Duration;

/// The retry schedule of a delivery actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The wait after the first failed try.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
    /// Tries in all, the first included.
    pub attempts: u32,
}

impl Backoff {
    /// The schedule `[delivery]` configures.
    pub(crate) fn from_def(def: &DeliveryDef) -> Self {
        Self {
            first: def.backoff,
            max: def.backoff_max,
            attempts: def.max_attempts,
        }
    }

    /// The wait after try `failed` (from 1) failed: `first` doubled per earlier failure, capped
    /// at `max`, scaled by `jitter` (clamped to 0.8..=1.2); at least `at_least` (a server's
    /// `retry_after`).
    pub(crate) fn delay(&self, failed: u32, jitter: f64, at_least: Option<Duration>) -> Duration {
        let doublings = failed.saturating_sub(1).min(20);
        let base = self.first.saturating_mul(1u32 << doublings).min(self.max);
        let jittered = base.mul_f64(jitter.clamp(0.8, 1.2));
        at_least.map_or(jittered, |min| jittered.max(min))
    }

    /// Whether try `tried` (from 1) was the last one allowed.
    pub(crate) fn exhausted(&self, tried: u32) -> bool {
        tried >= self.attempts
    }
}

/// A jitter factor in 0.8..=1.2, so the retries of many deliveries do not arrive together.
pub(crate) fn jitter() -> f64 {
    clawbus_runtime::turn::retry::jitter()
}
