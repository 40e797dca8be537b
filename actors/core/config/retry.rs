//! `[retry]` of an agent file: which failures a task is tried again after, how often, and how
//! long it waits in between. It refines the agent's `[limits]` retry settings.
//!
//! ```toml
//! [retry]
//! max_attempts = 4
//! base_ms = 500
//! max_ms = 8000
//! retry_on = ["timeout", "rate_limit", "transient"]
//! abort_on = ["auth", "invalid_input"]
//! ```

use super::span::Source;
use super::{Limits, Problem};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// The most attempts a task may get: the bus gives up on a task after 5 deliveries.
pub const MAX_ATTEMPTS: u32 = 5;

/// What kind of failure ended an attempt, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorClass {
    /// The turn or one model call ran out of time (HTTP 408 too).
    Timeout,
    /// The provider asked to slow down (HTTP 429).
    RateLimit,
    /// Overload, a 5xx, a broken connection or stream: it may well pass.
    Transient,
    /// The provider refused the credentials (HTTP 401, 403).
    Auth,
    /// The provider refused the request itself (HTTP 400, 404, 422, other 4xx).
    InvalidInput,
}

impl ErrorClass {
    /// Every class, in the order the docs list them.
    pub const ALL: [Self; 5] = [
        Self::Timeout,
        Self::RateLimit,
        Self::Transient,
        Self::Auth,
        Self::InvalidInput,
    ];

    /// The name in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::RateLimit => "rate_limit",
            Self::Transient => "transient",
            Self::Auth => "auth",
            Self::InvalidInput => "invalid_input",
        }
    }

    /// The class a config name means (`"rate_limit"`), `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// When a failed attempt is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1..=5, default 3).
    pub max_attempts: u32,
    /// The wait before the second attempt; it doubles per attempt (default 500 ms).
    pub base: Duration,
    /// The longest wait between two attempts (default 8 s).
    pub max: Duration,
    /// Classes tried again (default timeout, rate_limit, transient).
    pub retry_on: Vec<ErrorClass>,
    /// Classes that end the task at once, whatever `retry_on` says (default auth, invalid_input).
    pub abort_on: Vec<ErrorClass>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::from_limits(&Limits::default())
    }
}

impl RetryPolicy {
    /// The policy the agent's `[limits]` describe, with the default classes.
    pub(crate) fn from_limits(limits: &Limits) -> Self {
        Self {
            max_attempts: limits.max_attempts,
            base: limits.retry_backoff,
            max: limits.retry_backoff_max,
            retry_on: vec![
                ErrorClass::Timeout,
                ErrorClass::RateLimit,
                ErrorClass::Transient,
            ],
            abort_on: vec![ErrorClass::Auth, ErrorClass::InvalidInput],
        }
    }

    /// True when a failure of `class` may be tried again (a failure with no class never is).
    pub fn retries(&self, class: Option<ErrorClass>) -> bool {
        class.is_some_and(|c| self.retry_on.contains(&c) && !self.abort_on.contains(&c))
    }
}

/// `[retry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryFile {
    pub max_attempts: Option<Spanned<u32>>,
    pub base_ms: Option<Spanned<u64>>,
    pub max_ms: Option<Spanned<u64>>,
    pub retry_on: Option<Vec<Spanned<String>>>,
    pub abort_on: Option<Vec<Spanned<String>>>,
}

/// Checks `[retry]` over the policy of `[limits]`; problems go to `problems`.
pub(super) fn retry_policy(
    src: &Source,
    f: &RetryFile,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> RetryPolicy {
    let mut policy = RetryPolicy::from_limits(limits);
    if let Some(n) = &f.max_attempts {
        if (1..=MAX_ATTEMPTS).contains(n.get_ref()) {
            policy.max_attempts = *n.get_ref();
        } else {
            let message = format!(
                "{} is out of range (expected 1 to {MAX_ATTEMPTS})",
                n.get_ref()
            );
            problems.push(src.at(Some(n.span()), "retry.max_attempts", message));
        }
    }
    for (field, value, slot) in [
        ("retry.base_ms", &f.base_ms, &mut policy.base),
        ("retry.max_ms", &f.max_ms, &mut policy.max),
    ] {
        if let Some(ms) = value {
            if (1..=3_600_000).contains(ms.get_ref()) {
                *slot = Duration::from_millis(*ms.get_ref());
            } else {
                let message = format!(
                    "{} is out of range (expected 1 to 3600000 ms)",
                    ms.get_ref()
                );
                problems.push(src.at(Some(ms.span()), field, message));
            }
        }
    }
    if policy.max < policy.base {
        let at = f.max_ms.as_ref().or(f.base_ms.as_ref()).map(|m| m.span());
        let message = format!(
            "{} ms is shorter than the base wait ({} ms) (expected at least as long)",
            policy.max.as_millis(),
            policy.base.as_millis()
        );
        problems.push(src.at(at, "retry.max_ms", message));
    }
    if let Some(list) = &f.retry_on {
        policy.retry_on = classes(src, list, "retry.retry_on", problems);
    }
    if let Some(list) = &f.abort_on {
        policy.abort_on = classes(src, list, "retry.abort_on", problems);
    }
    if let (Some(retry), Some(abort)) = (&f.retry_on, &f.abort_on) {
        for name in abort {
            if let Some(entry) = retry.iter().find(|r| r.get_ref() == name.get_ref()) {
                let message = format!(
                    "\"{}\" is in both retry_on and abort_on (expected it in one of them)",
                    entry.get_ref()
                );
                problems.push(src.at(Some(name.span()), "retry.abort_on", message));
            }
        }
    }
    policy
}

fn classes(
    src: &Source,
    list: &[Spanned<String>],
    field: &str,
    problems: &mut Vec<Problem>,
) -> Vec<ErrorClass> {
    let mut out = Vec::new();
    for name in list {
        match ErrorClass::parse(name.get_ref()) {
            Some(c) if out.contains(&c) => {}
            Some(c) => out.push(c),
            None => {
                let expected: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
                let message = format!(
                    "unknown error class \"{}\" (expected: {})",
                    name.get_ref(),
                    expected.join(", ")
                );
                problems.push(src.at(Some(name.span()), field, message));
            }
        }
    }
    out
}
