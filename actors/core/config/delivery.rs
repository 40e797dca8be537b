//! `[delivery]` of `clawbus.toml`: how the delivery actors retry a reply or an announcement
//! that could not be sent (a chat API down, a webhook receiver failing).
//!
//! ```toml
//! [delivery]
//! backoff = "1s"        # the wait before the second try, doubled per try (±20 % jitter)
//! backoff_max = "60s"   # the longest wait between two tries
//! max_attempts = 5      # tries in all; then the delivery is recorded failed on its task
//! ```

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// Default wait before the second try.
pub(super) const DEFAULT_DELIVERY_BACKOFF: Duration = Duration::from_secs(1);
/// Default longest wait between two tries.
pub(super) const DEFAULT_DELIVERY_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Default number of tries.
pub(super) const DEFAULT_DELIVERY_ATTEMPTS: u32 = 5;
/// The most tries `max_attempts` may ask for.
const MAX_DELIVERY_ATTEMPTS: u32 = 20;

/// `[delivery]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeliveryFile {
    pub backoff: Option<Spanned<DurationText>>,
    pub backoff_max: Option<Spanned<DurationText>>,
    pub max_attempts: Option<Spanned<u32>>,
}

/// The validated `[delivery]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryDef {
    /// The wait before the second try; doubled per try.
    pub backoff: Duration,
    /// The longest wait between two tries.
    pub backoff_max: Duration,
    /// Tries in all, the first included.
    pub max_attempts: u32,
}

impl Default for DeliveryDef {
    fn default() -> Self {
        Self {
            backoff: DEFAULT_DELIVERY_BACKOFF,
            backoff_max: DEFAULT_DELIVERY_BACKOFF_MAX,
            max_attempts: DEFAULT_DELIVERY_ATTEMPTS,
        }
    }
}

/// Validates `[delivery]`.
pub(super) fn delivery_def(
    src: &Source,
    f: &DeliveryFile,
    problems: &mut Vec<Problem>,
) -> DeliveryDef {
    let backoff = duration(
        src,
        &f.backoff,
        "delivery.backoff",
        DEFAULT_DELIVERY_BACKOFF,
        problems,
    );
    let backoff_max = duration(
        src,
        &f.backoff_max,
        "delivery.backoff_max",
        DEFAULT_DELIVERY_BACKOFF_MAX.max(backoff),
        problems,
    );
    if backoff_max < backoff {
        problems.push(src.at(
            f.backoff_max.as_ref().map(Spanned::span),
            "delivery.backoff_max",
            "shorter than delivery.backoff (expected at least the first wait)",
        ));
    }
    let max_attempts = match &f.max_attempts {
        None => DEFAULT_DELIVERY_ATTEMPTS,
        Some(n) if (1..=MAX_DELIVERY_ATTEMPTS).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => {
            problems.push(src.at(
                Some(n.span()),
                "delivery.max_attempts",
                format!(
                    "{} is out of range (expected 1 to {MAX_DELIVERY_ATTEMPTS})",
                    n.get_ref()
                ),
            ));
            DEFAULT_DELIVERY_ATTEMPTS
        }
    };
    DeliveryDef {
        backoff,
        backoff_max,
        max_attempts,
    }
}
