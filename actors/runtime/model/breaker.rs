//! Circuit breakers, one per model provider, shared by every agent that calls it.
//!
//! A [`Breaker`] counts the consecutive calls to its provider that failed in a way that falls over
//! ([`super::ModelError::falls_over`]). After [`BreakerPolicy::failures`] of them it opens for
//! [`BreakerPolicy::cooldown`]: calls skip the provider and go straight to the next model. When
//! the cool-down is over it is half-open: calls go through again; a success closes it, a failure
//! opens it again for twice the previous cool-down, up to [`BreakerPolicy::max_cooldown`].
//! Time comes from an injected [`bus::Clock`], so tests move it by hand.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bus::Clock;
use tracing::{info, warn};

use crate::metrics::{Gauge, Metrics};

/// Name of the breaker-state gauge, labelled by `provider`.
pub const BREAKER_GAUGE: &str = "clawbus_model_breaker_state";

pub use clawbus_core::config::BreakerPolicy;

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through; failures are being counted.
    Closed,
    /// The cool-down is over: calls go through, and the next outcome closes or reopens it.
    HalfOpen,
    /// Calls skip the provider until the cool-down is over.
    Open,
}

impl BreakerState {
    /// The value of the [`BREAKER_GAUGE`]: 0 closed, 1 half-open, 2 open.
    pub(crate) fn gauge_value(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::HalfOpen => 1,
            Self::Open => 2,
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "closed",
            Self::HalfOpen => "half-open",
            Self::Open => "open",
        })
    }
}

/// One breaker as `clawbus status` would show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerStatus {
    /// The provider name (`[providers.<name>]`).
    pub provider: String,
    /// Its state now.
    pub state: BreakerState,
    /// Consecutive failures counted.
    pub failures: u32,
    /// While open: how long until calls go through again.
    pub retry_in: Option<Duration>,
}

/// What a breaker remembers.
#[derive(Debug)]
struct Inner {
    /// Consecutive failures since the last success.
    failures: u32,
    /// While open: when the cool-down ends, in clock milliseconds.
    open_until_ms: Option<u64>,
    /// The cool-down the breaker opened (or will next open) for.
    cooldown: Duration,
    /// The cool-down is over and no outcome has been seen since.
    half_open: bool,
}

/// The circuit breaker of one provider.
pub struct Breaker {
    provider: String,
    policy: BreakerPolicy,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    gauge: OnceLock<Gauge>,
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("provider", &self.provider)
            .field("inner", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl Breaker {
    /// A closed breaker for `provider`.
    pub fn new(provider: impl Into<String>, policy: BreakerPolicy, clock: Arc<dyn Clock>) -> Self {
        Self {
            provider: provider.into(),
            policy,
            clock,
            inner: Mutex::new(Inner {
                failures: 0,
                open_until_ms: None,
                cooldown: policy.cooldown,
                half_open: false,
            }),
            gauge: OnceLock::new(),
        }
    }

    /// The provider this breaker guards.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Poisoning only means a panic elsewhere while holding it; the counts are still sound.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a call may go to the provider now: `Err(time left)` while open. The first check
    /// after the cool-down makes the breaker half-open.
    pub fn check(&self) -> Result<(), Duration> {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let Some(until) = inner.open_until_ms else {
            return Ok(());
        };
        if now < until {
            return Err(Duration::from_millis(until - now));
        }
        inner.open_until_ms = None;
        inner.half_open = true;
        drop(inner);
        info!(provider = %self.provider, "Circuit breaker half-open: the cool-down is over, trying the provider again.");
        self.publish(BreakerState::HalfOpen);
        Ok(())
    }

    /// A call succeeded: the breaker closes and forgets the failures.
    pub(crate) fn record_success(&self) {
        let mut inner = self.lock();
        let was_open = inner.half_open || inner.open_until_ms.is_some();
        inner.failures = 0;
        inner.half_open = false;
        inner.open_until_ms = None;
        inner.cooldown = self.policy.cooldown;
        drop(inner);
        if was_open {
            info!(provider = %self.provider, "Circuit breaker closed: the provider answered.");
        }
        self.publish(BreakerState::Closed);
    }

    /// A call failed in a way that falls over: counted; the breaker opens at the threshold, and
    /// a half-open one opens again for twice as long.
    pub(crate) fn record_failure(&self) {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        inner.failures = inner.failures.saturating_add(1);
        if inner.open_until_ms.is_some() {
            return; // A call that started before it opened.
        }
        if inner.half_open {
            inner.cooldown = inner
                .cooldown
                .saturating_mul(2)
                .min(self.policy.max_cooldown);
        } else if inner.failures < self.policy.failures {
            return;
        }
        inner.half_open = false;
        let ms = u64::try_from(inner.cooldown.as_millis()).unwrap_or(u64::MAX);
        inner.open_until_ms = Some(now.saturating_add(ms));
        let (failures, cooldown) = (inner.failures, inner.cooldown);
        drop(inner);
        warn!(
            provider = %self.provider, failures, cooldown_s = cooldown.as_secs(),
            "Circuit breaker open: calls skip this provider until the cool-down is over."
        );
        self.publish(BreakerState::Open);
    }

    /// The state now (an open breaker whose cool-down is over reads half-open).
    pub fn state(&self) -> BreakerState {
        self.status().state
    }

    /// State, failures and time left, now.
    pub fn status(&self) -> BreakerStatus {
        let now = self.clock.now_ms();
        let inner = self.lock();
        let (state, retry_in) = match inner.open_until_ms {
            Some(until) if now < until => {
                (BreakerState::Open, Some(Duration::from_millis(until - now)))
            }
            Some(_) => (BreakerState::HalfOpen, None),
            None if inner.half_open => (BreakerState::HalfOpen, None),
            None => (BreakerState::Closed, None),
        };
        BreakerStatus {
            provider: self.provider.clone(),
            state,
            failures: inner.failures,
            retry_in,
        }
    }

    fn publish(&self, state: BreakerState) {
        if let Some(gauge) = self.gauge.get() {
            gauge.set(state.gauge_value());
        }
    }

    fn attach(&self, metrics: &Metrics) {
        let gauge = metrics.gauge(
            BREAKER_GAUGE,
            "Circuit breaker of each model provider: 0 closed, 1 half-open, 2 open.",
            &[("provider", &self.provider)],
        );
        gauge.set(self.state().gauge_value());
        let _ = self.gauge.set(gauge);
    }
}

/// The breakers of every provider, created on first use; one registry per process so that all
/// agents calling a provider share its breaker.
pub struct Breakers {
    policy: BreakerPolicy,
    clock: Arc<dyn Clock>,
    map: Mutex<BTreeMap<String, Arc<Breaker>>>,
    metrics: OnceLock<Metrics>,
}

impl fmt::Debug for Breakers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breakers")
            .field("policy", &self.policy)
            .field("providers", &self.lock().keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Breakers {
    /// An empty registry whose breakers follow `policy` on `clock`.
    pub fn new(policy: BreakerPolicy, clock: Arc<dyn Clock>) -> Self {
        Self {
            policy,
            clock,
            map: Mutex::new(BTreeMap::new()),
            metrics: OnceLock::new(),
        }
    }

    /// A registry for code that has no process to take one from (a model built alone by
    /// [`crate::agent::build_model`], in tests and tools): default policy, system clock, one per
    /// process. A running system owns its own registry, on its clock, and passes it to
    /// `build_model_with`.
    pub fn global() -> &'static Breakers {
        static GLOBAL: OnceLock<Breakers> = OnceLock::new();
        GLOBAL.get_or_init(|| Breakers::new(BreakerPolicy::default(), Arc::new(bus::SystemClock)))
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Breaker>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    /// The breaker of `provider`, created closed on first use with the registry's policy.
    pub(crate) fn for_provider(&self, provider: &str) -> Arc<Breaker> {
        self.for_provider_with(provider, self.policy)
    }

    /// The breaker of `provider`, created closed on first use with `policy` (the provider's
    /// `[providers.x] breaker_*`); a breaker already created keeps its policy.
    pub(crate) fn for_provider_with(&self, provider: &str, policy: BreakerPolicy) -> Arc<Breaker> {
        let mut map = self.lock();
        if let Some(b) = map.get(provider) {
            return Arc::clone(b);
        }
        let breaker = Arc::new(Breaker::new(provider, policy, Arc::clone(&self.clock)));
        if let Some(metrics) = self.metrics.get() {
            breaker.attach(metrics);
        }
        map.insert(provider.to_owned(), Arc::clone(&breaker));
        breaker
    }

    /// Publishes every breaker's state, now and later, as the gauge
    /// `clawbus_model_breaker_state{provider}` (0 closed, 1 half-open, 2 open). Only the first
    /// registry attached counts.
    pub(crate) fn attach_metrics(&self, metrics: &Metrics) {
        if self.metrics.set(metrics.clone()).is_err() {
            return;
        }
        for breaker in self.lock().values() {
            breaker.attach(metrics);
        }
    }

    /// Every breaker created so far, by provider name.
    pub fn statuses(&self) -> Vec<BreakerStatus> {
        self.lock().values().map(|b| b.status()).collect()
    }
}
