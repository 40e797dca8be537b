//! Per-job scheduling state (next fire, lease, failures) and run history records.

use super::job::JobId;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The failure backoff of recurring jobs: 30 s → 1 m → 5 m → 15 m → 60 m (then 60 m).
pub(crate) const BACKOFF_MS: [u64; 5] = [30_000, 60_000, 300_000, 900_000, 3_600_000];

/// The backoff after `failures` consecutive failures (≥ 1); 0 for none.
pub(crate) fn backoff_ms(failures: u32) -> u64 {
    match failures {
        0 => 0,
        n => {
            let i = usize::try_from(n - 1).unwrap_or(usize::MAX);
            BACKOFF_MS
                .get(i)
                .or(BACKOFF_MS.last())
                .copied()
                .unwrap_or(0)
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The turn finished.
    Succeeded,
    /// The turn failed (or its scheduler stopped before knowing).
    Failed,
    /// The turn ran out of time.
    TimedOut,
    /// The turn was cancelled.
    Cancelled,
    /// The fire was missed and not run (catch-up policy, coalesced fires).
    Skipped,
}

impl RunOutcome {
    /// True for outcomes that count as failures for the backoff.
    pub(crate) fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::TimedOut)
    }
}

/// The claim of one scheduler on one fire of a job. It expires: a scheduler that dies mid-run
/// leaves a lease that lapses, never a "running" flag. A scheduler that starts again on the same
/// node takes over the leases of its previous life at once (see [`crate::cron::Scheduler::recover`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The scheduler holding it (unique per process life).
    pub owner: String,
    /// The node of that scheduler (stable across its restarts), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Unix ms after which it is void (renewed while the run is alive).
    pub until_ms: u64,
    /// The fire it is for.
    pub scheduled_ms: u64,
    /// The task, once submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// A `run_now` fire (out of schedule), not a scheduled one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub manual: bool,
}

/// A job's scheduling state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobState {
    /// The next scheduled fire (Unix ms); `None`: none (disabled, or a one-shot that ran).
    pub next_fire_ms: Option<u64>,
    /// The current run's lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Consecutive failed runs.
    #[serde(default)]
    pub failures: u32,
    /// No fire before this instant (failure backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_until_ms: Option<u64>,
    /// How the last run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_outcome: Option<RunOutcome>,
}

impl JobState {
    /// True while a lease that has not expired at `now_ms` is held.
    pub(crate) fn is_running(&self, now_ms: u64) -> bool {
        self.lease.as_ref().is_some_and(|l| l.until_ms > now_ms)
    }
}

/// One entry of a job's run history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The job.
    pub job_id: JobId,
    /// The fire's scheduled time (Unix ms).
    pub scheduled_ms: u64,
    /// When it started (Unix ms; the record time for skipped fires).
    pub started_ms: u64,
    /// When it ended (Unix ms).
    pub ended_ms: u64,
    /// How.
    pub outcome: RunOutcome,
    /// The task that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_climbs_then_stays_at_an_hour() {
        let seq: Vec<u64> = (0..=7).map(backoff_ms).collect();
        assert_eq!(
            seq,
            [
                0, 30_000, 60_000, 300_000, 900_000, 3_600_000, 3_600_000, 3_600_000
            ]
        );
    }
}
