//! `[providers.x] breaker_failures`, `breaker_cooldown`, `breaker_max_cooldown`: the provider's
//! circuit breaker ([`BreakerPolicy`]), checked for range.

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use std::time::Duration;
use toml::Spanned;

/// When a breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failures that open a closed breaker (default 5).
    pub failures: u32,
    /// First cool-down (default 30 s).
    pub cooldown: Duration,
    /// Longest cool-down, reached by doubling while half-open calls keep failing (default 5 m).
    pub max_cooldown: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failures: 5,
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
        }
    }
}

/// The most consecutive failures a breaker may wait for.
const MAX_FAILURES: i64 = 1000;

/// The breaker settings of a provider section, as written.
pub(super) struct BreakerFields<'a> {
    pub failures: &'a Option<Spanned<i64>>,
    pub cooldown: &'a Option<Spanned<DurationText>>,
    pub max_cooldown: &'a Option<Spanned<DurationText>>,
}

/// The provider's breaker policy: the defaults (5 failures, 30 s doubling up to 5 m) with what
/// the section sets. `field` names a key of the section (`providers.<name>.<key>`).
pub(super) fn breaker_policy(
    src: &Source,
    f: BreakerFields<'_>,
    field: impl Fn(&str) -> String,
    problems: &mut Vec<Problem>,
) -> BreakerPolicy {
    let defaults = BreakerPolicy::default();
    let failures = match f.failures {
        None => defaults.failures,
        Some(v) => match u32::try_from(*v.get_ref()) {
            Ok(n) if (1..=MAX_FAILURES).contains(v.get_ref()) => n,
            _ => {
                problems.push(src.at(
                    Some(v.span()),
                    field("breaker_failures"),
                    format!(
                        "{} is out of range (expected consecutive failures from 1 to {MAX_FAILURES}, default 5)",
                        v.get_ref()
                    ),
                ));
                defaults.failures
            }
        },
    };
    let cooldown = duration(
        src,
        f.cooldown,
        &field("breaker_cooldown"),
        defaults.cooldown,
        problems,
    );
    let max_cooldown = duration(
        src,
        f.max_cooldown,
        &field("breaker_max_cooldown"),
        defaults.max_cooldown.max(cooldown),
        problems,
    );
    if let Some(v) = f.max_cooldown.as_ref().filter(|_| max_cooldown < cooldown) {
        problems.push(src.at(
            Some(v.span()),
            field("breaker_max_cooldown"),
            format!(
                "{} is shorter than breaker_cooldown ({}s) (expected at least the first cool-down)",
                v.get_ref().0,
                cooldown.as_secs()
            ),
        ));
    }
    BreakerPolicy {
        failures,
        cooldown,
        max_cooldown: max_cooldown.max(cooldown),
    }
}
