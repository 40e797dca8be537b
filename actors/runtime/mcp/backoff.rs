//! When a dead or failed server may be started again: at once after it ran well, then after
//! [`FIRST_DELAY`], doubling with each failed start up to [`MAX_DELAY`] (bounded exponential).
//! The delay runs on the process's [`bus::Clock`], so tests drive it with a manual clock.

use std::time::Duration;
use tokio::time::Instant;

/// The wait after the first failed start.
pub(crate) const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between two starts.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(60);

/// The failed starts in a row of one server, and when the next may be tried.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
    not_before: Option<Instant>,
}

impl Backoff {
    /// The wait after `failures` failed starts in a row: none after none, then 1 s, 2 s, 4 s …
    /// up to [`MAX_DELAY`].
    pub(crate) fn delay_after(failures: u32) -> Duration {
        match failures {
            0 => Duration::ZERO,
            n => FIRST_DELAY
                .saturating_mul(1u32 << (n - 1).min(16))
                .min(MAX_DELAY),
        }
    }

    /// A start failed at `now`: the next waits longer.
    pub(crate) fn failed(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let delay = Self::delay_after(self.failures);
        self.not_before = Some(now + delay);
        delay
    }

    /// A start succeeded: the next after a death is tried at once.
    pub(crate) fn succeeded(&mut self) {
        self.failures = 0;
        self.not_before = None;
    }

    /// When the next start may be tried (`None`: now).
    pub(crate) fn not_before(&self) -> Option<Instant> {
        self.not_before
    }

    /// How long is left to wait at `now` before the next start, if any.
    pub(crate) fn wait_left(&self, now: Instant) -> Option<Duration> {
        self.not_before
            .filter(|t| *t > now)
            .map(|t| t.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_delay_doubles_from_one_second_up_to_a_minute_and_resets_on_success() {
        let delays: Vec<u64> = (0..10).map(|n| Backoff::delay_after(n).as_secs()).collect();
        assert_eq!(delays, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(Backoff::delay_after(u32::MAX), MAX_DELAY);
        let clock = bus::ManualClock::new(0);
        let now = bus::Clock::now(&*clock);
        let mut b = Backoff::default();
        assert_eq!(b.wait_left(now), None);
        assert_eq!(b.failed(now), Duration::from_secs(1));
        assert_eq!(b.failed(now), Duration::from_secs(2));
        assert_eq!(b.wait_left(now), Some(Duration::from_secs(2)));
        assert_eq!(b.wait_left(now + Duration::from_secs(2)), None);
        b.succeeded();
        assert_eq!(b.not_before(), None);
        assert_eq!(b.failed(now), Duration::from_secs(1));
    }
}
