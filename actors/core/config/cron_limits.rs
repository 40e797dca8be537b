//! `[cron]` of `clawbus.toml`: the limits on the jobs models add through the `cron` tool (jobs
//! added with the CLI, over HTTP or in agent files are not limited).
//!
//! ```toml
//! [cron]
//! min_interval = "1m"    # the shortest interval between two fires of a job a model schedules
//! max_agent_jobs = 10    # the most jobs models may have created for one agent
//! ```

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// Default `min_interval`: one minute.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(60);
/// Default `max_agent_jobs`.
pub const DEFAULT_MAX_AGENT_JOBS: usize = 10;

/// The most jobs `max_agent_jobs` may allow.
const MAX_AGENT_JOBS: usize = 10_000;

/// `[cron]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CronLimitsFile {
    pub min_interval: Option<Spanned<DurationText>>,
    pub max_agent_jobs: Option<Spanned<i64>>,
}

/// The validated `[cron]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronDef {
    /// The shortest interval between two fires of a job a model adds or reschedules.
    pub min_interval: Duration,
    /// The most jobs models may have created for one agent.
    pub max_agent_jobs: usize,
}

impl Default for CronDef {
    fn default() -> Self {
        Self {
            min_interval: DEFAULT_MIN_INTERVAL,
            max_agent_jobs: DEFAULT_MAX_AGENT_JOBS,
        }
    }
}

/// Validates `[cron]`.
pub(super) fn cron_def(src: &Source, f: &CronLimitsFile, problems: &mut Vec<Problem>) -> CronDef {
    let min_interval = duration(
        src,
        &f.min_interval,
        "cron.min_interval",
        DEFAULT_MIN_INTERVAL,
        problems,
    );
    let max_agent_jobs = match &f.max_agent_jobs {
        None => DEFAULT_MAX_AGENT_JOBS,
        Some(n) => match usize::try_from(*n.get_ref()) {
            Ok(n) if n <= MAX_AGENT_JOBS => n,
            _ => {
                problems.push(src.at(
                    Some(n.span()),
                    "cron.max_agent_jobs",
                    format!(
                        "{} is out of range (expected 0 to {MAX_AGENT_JOBS}; 0: models add no jobs)",
                        n.get_ref()
                    ),
                ));
                DEFAULT_MAX_AGENT_JOBS
            }
        },
    };
    CronDef {
        min_interval,
        max_agent_jobs,
    }
}
