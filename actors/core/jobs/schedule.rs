//! The next fire of a schedule: `at`, `every` (from its anchor) and `cron` in an IANA timezone.
//!
//! # Daylight saving time
//!
//! A cron expression names wall-clock times in its timezone; they are mapped to instants so:
//! - **Spring forward (a wall time that does not exist)**: the fire is **shifted to the next valid
//!   instant**, the first instant after the gap. `30 2 * * *` in `America/New_York` on the
//!   spring-forward day fires once, at 03:00 EDT. (The `cron` crate on its own skips such times, so
//!   a daily job would silently not run that day.) Several wall times inside one gap map to the
//!   same instant and fire once.
//! - **Fall back (a wall time that occurs twice)**: the fire happens **once, at the first
//!   occurrence** (EDT). (The `cron` crate on its own yields both occurrences.)
//!
//! Wall times are enumerated with the crate over naive local time (evaluated as UTC, which has no
//! transitions), and each is mapped to an instant with `chrono-tz` by the rules above; the mapping
//! never goes backwards, so the first wall time after the local time of `after` whose instant is
//! later than `after` is the next fire.

use super::expr::CronExpr;
use super::job::Schedule;
use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// How many matching wall times are looked at before giving up (an expression that matches
/// nothing, like `0 0 30 2 *`, ends the crate's search on its own after its year range).
const MAX_CANDIDATES: usize = 100_000;

/// A schedule ready to evaluate (the cron expression parsed, the timezone resolved).
#[derive(Debug, Clone)]
pub enum Compiled {
    /// Once at `at_ms`.
    At {
        /// Unix ms.
        at_ms: u64,
    },
    /// Every `every_ms` from `anchor_ms`.
    Every {
        /// The period.
        every_ms: u64,
        /// The origin of the periods.
        anchor_ms: u64,
    },
    /// A cron expression in a timezone.
    Cron {
        /// The expression.
        expr: Box<CronExpr>,
        /// The timezone.
        tz: Tz,
    },
}

/// A stored schedule that does not compile ([`Compiled::new`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// An `at` before the Unix epoch.
    #[error("at: before 1970")]
    BeforeEpoch,
    /// The cron expression does not parse.
    #[error(transparent)]
    Expr(#[from] super::expr::CronExprError),
    /// The timezone is not one of the tz database.
    #[error("unknown timezone {tz:?}")]
    Timezone {
        /// The name given.
        tz: String,
    },
}

impl Compiled {
    /// Compiles a stored schedule; `created_at` is the default anchor of `every`.
    /// The error names what is wrong (stored jobs were checked when added, so it means corruption).
    pub fn new(schedule: &Schedule, created_at: u64) -> Result<Self, ScheduleError> {
        Ok(match schedule {
            Schedule::At { at } => Self::At {
                at_ms: u64::try_from(at.timestamp_millis())
                    .map_err(|_| ScheduleError::BeforeEpoch)?,
            },
            Schedule::Every {
                every_ms,
                anchor_ms,
            } => Self::Every {
                every_ms: *every_ms,
                anchor_ms: anchor_ms.unwrap_or(created_at),
            },
            Schedule::Cron { expr, tz } => Self::Cron {
                expr: Box::new(CronExpr::parse(expr)?),
                tz: tz
                    .parse::<Tz>()
                    .map_err(|_| ScheduleError::Timezone { tz: tz.to_string() })?,
            },
        })
    }

    /// The first fire strictly after `after_ms` (Unix ms), or `None` when there is none
    /// (an `at` in the past, a `cron` that never matches again).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match self {
            Self::At { at_ms } => (*at_ms > after_ms).then_some(*at_ms),
            Self::Every {
                every_ms,
                anchor_ms,
            } => {
                if *every_ms == 0 {
                    return None;
                }
                if after_ms < *anchor_ms {
                    return Some(*anchor_ms);
                }
                let k = (after_ms - anchor_ms) / every_ms + 1;
                k.checked_mul(*every_ms)?.checked_add(*anchor_ms)
            }
            Self::Cron { expr, tz } => next_cron(expr.schedule(), *tz, after_ms),
        }
    }

    /// The fires in `(after_ms, until_ms]`, oldest first, at most `limit` of the most recent
    /// ones, with the total count.
    pub fn fires_between(&self, after_ms: u64, until_ms: u64, limit: usize) -> (Vec<u64>, usize) {
        let mut recent = std::collections::VecDeque::new();
        let mut count = 0;
        let mut cursor = after_ms;
        while let Some(next) = self.next_after(cursor) {
            if next > until_ms || count >= MAX_CANDIDATES {
                break;
            }
            count += 1;
            recent.push_back(next);
            if recent.len() > limit {
                recent.pop_front();
            }
            cursor = next;
        }
        (recent.into(), count)
    }
}

impl Compiled {
    /// The shortest time between two consecutive fires among the first `samples` fires after
    /// `after_ms`; `None` for a schedule that fires at most once from there.
    pub fn shortest_gap_ms(&self, after_ms: u64, samples: usize) -> Option<u64> {
        match self {
            Self::At { .. } => None,
            Self::Every { every_ms, .. } => Some(*every_ms),
            Self::Cron { .. } => {
                let mut shortest: Option<u64> = None;
                let mut prev = self.next_after(after_ms)?;
                for _ in 1..samples {
                    let Some(next) = self.next_after(prev) else {
                        break;
                    };
                    let gap = next - prev;
                    shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
                    prev = next;
                }
                shortest
            }
        }
    }
}

/// The next fire of a cron schedule in `tz` strictly after `after_ms`, by the DST rules above.
fn next_cron(schedule: &cron::Schedule, tz: Tz, after_ms: u64) -> Option<u64> {
    let after = i64::try_from(after_ms).ok()?;
    let instant = DateTime::<Utc>::from_timestamp_millis(after)?;
    let wall = instant.with_timezone(&tz).naive_local();
    // Naive wall time as if UTC: the crate steps through wall times with no transition to trip on.
    let start = Utc.from_utc_datetime(&wall);
    schedule
        .after(&start)
        .take(MAX_CANDIDATES)
        .filter_map(|w| to_instant(tz, w.naive_utc()))
        .find(|&ms| ms > after_ms)
}

/// The instant of a wall time in `tz`: the first occurrence when it is ambiguous, the first
/// instant after the gap when it does not exist.
fn to_instant(tz: Tz, wall: NaiveDateTime) -> Option<u64> {
    let ms = match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => t.timestamp_millis(),
        LocalResult::Ambiguous(first, _) => first.timestamp_millis(),
        LocalResult::None => gap_end(tz, wall)?,
    };
    u64::try_from(ms).ok()
}

/// The first instant after the DST gap that swallows `wall`: transitions move clocks by at most
/// a few hours, so the first valid wall minute after it, mapped back, is the transition instant.
fn gap_end(tz: Tz, wall: NaiveDateTime) -> Option<i64> {
    let mut probe = wall;
    for _ in 0..(4 * 60) {
        probe += chrono::Duration::minutes(1);
        if let Some(t) = tz.from_local_datetime(&probe).earliest() {
            // The instant the gap ends: the valid wall time's offset applied to the gap's start
            // reaches back to the transition; binary-search the exact instant between.
            let mut lo = t.timestamp_millis() - 60_000;
            let mut hi = t.timestamp_millis();
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                let m = DateTime::<Utc>::from_timestamp_millis(mid)?.with_timezone(&tz);
                if m.naive_local() >= wall {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return Some(hi);
        }
    }
    None
}
