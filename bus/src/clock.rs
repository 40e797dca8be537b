//! Injected time, so TTL and timeout logic is testable without sleeping.
//!
//! A [`Clock`] gives both kinds of time the runtime uses: wall time ([`Clock::now_ms`], Unix
//! milliseconds: what is stored and shown) and monotonic time ([`Clock::now`], a
//! [`tokio::time::Instant`]: what waits, idle times and deadlines inside the process are measured
//! on), plus a timer on that monotonic time ([`Clock::sleep_until`]). [`SystemClock`] is the real
//! one (its monotonic time is tokio's, so tokio's paused time drives it in tests);
//! [`ManualClock`] moves only when a test says so, both readings together, and wakes the timers
//! that come due.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;
use tokio::time::Instant;

/// A clock's timer: completes once the clock's monotonic time reaches the instant it was made for.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of wall-clock time in Unix milliseconds and of monotonic time, with a timer.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// Monotonic time: never goes back; what waits, idle times and in-process deadlines use.
    fn now(&self) -> Instant;

    /// Completes once [`Clock::now`] has reached `at` (at once when it already has).
    fn sleep_until(&self, at: Instant) -> Sleep;

    /// Completes once `by` has passed on this clock.
    fn sleep(&self, by: Duration) -> Sleep {
        self.sleep_until(self.now() + by)
    }

    /// The monotonic time since `earlier` (zero when `earlier` is later).
    fn since(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }
}

/// An instant of a [`Clock`]'s monotonic time after which something is no longer wanted (a lane
/// wait's bound). Made from the clock, so a [`ManualClock`] drives it like every other wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// `limit` from now on `clock`.
    pub fn after(clock: &dyn Clock, limit: Duration) -> Self {
        Self(clock.now() + limit)
    }

    /// The deadline at `at`, an instant of a clock's monotonic time (from [`Clock::now`]).
    pub fn at(at: Instant) -> Self {
        Self(at)
    }

    /// Its instant on the clock's monotonic time.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Whether `clock` has reached it.
    pub fn has_passed(self, clock: &dyn Clock) -> bool {
        self.0 <= clock.now()
    }
}

/// The real clock: the system's wall time and tokio's monotonic time and timers (so a test on
/// tokio's paused time moves it with `tokio::time::advance`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one clock: the real wall time behind every stored and shown time"
    )]
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "the one clock: the real monotonic time behind every wait and deadline"
    )]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, at: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(at))
    }
}

/// A clock that only moves when told to; for tests. [`ManualClock::advance`] moves its wall and
/// its monotonic time together and wakes every timer that comes due; nothing else moves it.
#[derive(Debug)]
pub struct ManualClock {
    state: Arc<ManualState>,
}

#[derive(Debug)]
struct ManualState {
    wall_ms: AtomicU64,
    /// Monotonic time since `base`, in nanoseconds.
    offset_ns: AtomicU64,
    /// The monotonic reading at offset zero (tokio's now when the clock was made).
    base: Instant,
    /// Notified on every advance.
    advanced: Notify,
    /// Notified whenever a timer ends (fired or dropped).
    timer_ended: Notify,
    /// Live timers by id, with the instant each waits for.
    timers: Mutex<BTreeMap<u64, Instant>>,
    next_timer: AtomicU64,
}

impl ManualState {
    fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.offset_ns.load(Ordering::SeqCst))
    }

    fn timers(&self) -> MutexGuard<'_, BTreeMap<u64, Instant>> {
        self.timers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A live timer of a [`ManualClock`]; leaves the clock's list when dropped.
struct TimerEntry {
    state: Arc<ManualState>,
    id: u64,
}

impl Drop for TimerEntry {
    fn drop(&mut self) {
        self.state.timers().remove(&self.id);
        self.state.timer_ended.notify_waiters();
    }
}

impl ManualClock {
    /// A manual clock whose wall time starts at `start_ms`.
    #[allow(
        clippy::disallowed_methods,
        reason = "the manual clock's monotonic base: its readings are offsets from it, moved only by the test"
    )]
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Arc::new(ManualState {
                wall_ms: AtomicU64::new(start_ms),
                offset_ns: AtomicU64::new(0),
                base: Instant::now(),
                advanced: Notify::new(),
                timer_ended: Notify::new(),
                timers: Mutex::new(BTreeMap::new()),
                next_timer: AtomicU64::new(0),
            }),
        })
    }

    /// Moves the clock forward (wall and monotonic time alike) and wakes the timers now due.
    pub fn advance(&self, by: Duration) {
        self.state
            .wall_ms
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
        self.state
            .offset_ns
            .fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
        self.state.advanced.notify_waiters();
    }

    /// How many timers made by [`Clock::sleep_until`] are due and have not yet ended: zero once
    /// every task woken by the last [`ManualClock::advance`] has run past its timer.
    pub fn due_timers(&self) -> usize {
        let now = self.state.now();
        self.state
            .timers()
            .values()
            .filter(|at| **at <= now)
            .count()
    }

    /// How many timers are live (due or not).
    pub fn live_timers(&self) -> usize {
        self.state.timers().len()
    }

    /// Waits until no timer is due ([`ManualClock::due_timers`] is zero): every task a timer woke
    /// has run on to its next await. A test bounds this wait itself.
    pub async fn settle(&self) {
        loop {
            let ended = self.state.timer_ended.notified();
            if self.due_timers() == 0 {
                return;
            }
            ended.await;
        }
    }

    /// Waits until at least `n` timers are live (a task has reached its timed wait). A test
    /// bounds this wait itself.
    pub async fn timers_at_least(&self, n: usize) {
        loop {
            let made = self.state.advanced.notified();
            if self.live_timers() >= n {
                return;
            }
            // New timers notify `advanced` too (see `sleep_until`).
            made.await;
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.state.wall_ms.load(Ordering::SeqCst)
    }

    fn now(&self) -> Instant {
        self.state.now()
    }

    /// The timer is registered at once (not when first polled), so [`ManualClock::settle`] and
    /// [`ManualClock::timers_at_least`] see it from the moment it is made.
    fn sleep_until(&self, at: Instant) -> Sleep {
        let state = Arc::clone(&self.state);
        let id = state.next_timer.fetch_add(1, Ordering::SeqCst);
        state.timers().insert(id, at);
        state.advanced.notify_waiters();
        let entry = TimerEntry { state, id };
        Box::pin(async move {
            loop {
                // Made before the check, so an advance between the two still wakes it.
                let advanced = entry.state.advanced.notified();
                if entry.state.now() >= at {
                    break;
                }
                advanced.await;
            }
            drop(entry);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_timer_fires_only_once_the_clock_reaches_it() {
        let clock = ManualClock::new(1_000);
        let start = clock.now();
        let mut timer = clock.sleep(Duration::from_secs(10));
        assert_eq!(clock.live_timers(), 1, "registered when made");
        assert!(futures::poll!(&mut timer).is_pending());
        clock.advance(Duration::from_secs(9));
        assert!(futures::poll!(&mut timer).is_pending());
        assert_eq!(clock.due_timers(), 0);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.due_timers(), 1, "due until it has run");
        assert!(futures::poll!(&mut timer).is_ready());
        assert_eq!(clock.live_timers(), 0);
        assert_eq!(clock.now_ms(), 11_000, "wall time moved with it");
        assert_eq!(clock.since(start), Duration::from_secs(10));
        clock.settle().await;
    }

    #[tokio::test]
    async fn a_dropped_manual_timer_leaves_the_list() {
        let clock = ManualClock::new(0);
        let timer = clock.sleep(Duration::from_secs(1));
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.due_timers(), 1);
        drop(timer);
        assert_eq!(clock.due_timers(), 0);
        clock.settle().await;
    }
}
