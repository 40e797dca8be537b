//! `[retry]` of agent files: the policy over `[limits]`, and its problems in place.

use super::Fixture;
use crate::config::load;
use crate::config::retry::ErrorClass;
use std::time::Duration;

#[test]
fn retry_refines_the_limits_policy() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[limits]\nmax_attempts = 2\nretry_backoff = \"1s\"\n[retry]\nmax_ms = 4000\nretry_on = [\"transient\"]\n",
    );
    fx.write("agents.d/b.toml", "");
    let config = load(&fx.opts()).unwrap();
    let a = &config.agent("a").unwrap().retry;
    assert_eq!(a.max_attempts, 2);
    assert_eq!(
        (a.base, a.max),
        (Duration::from_secs(1), Duration::from_secs(4))
    );
    assert_eq!(a.retry_on, [ErrorClass::Transient]);
    assert_eq!(a.abort_on, [ErrorClass::Auth, ErrorClass::InvalidInput]);
    let b = &config.agent("b").unwrap().retry;
    assert_eq!(b.max_attempts, 3);
    assert_eq!(
        b.retry_on,
        [
            ErrorClass::Timeout,
            ErrorClass::RateLimit,
            ErrorClass::Transient
        ]
    );
}

#[test]
fn unknown_classes_and_bad_numbers_are_named_in_place() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[retry]\nmax_attempts = 9\nbase_ms = 500\nmax_ms = 100\nretry_on = [\"timeout\", \"ratelimit\"]\nabort_on = [\"auth\", \"timeout\"]\n",
    );
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines[0].contains("agents.d/a.toml:2:16: field \"retry.max_attempts\": 9 is out of range (expected 1 to 5)"),
        "{lines:#?}"
    );
    assert!(
        lines[1].contains("agents.d/a.toml:4:10: field \"retry.max_ms\": 100 ms is shorter"),
        "{lines:#?}"
    );
    assert!(
        lines[2].contains("agents.d/a.toml:5:24: field \"retry.retry_on\": unknown error class \"ratelimit\" (expected: timeout, rate_limit, transient, auth, invalid_input)"),
        "{lines:#?}"
    );
    assert!(
        lines[3].contains("agents.d/a.toml:6:21: field \"retry.abort_on\": \"timeout\" is in both"),
        "{lines:#?}"
    );
}
