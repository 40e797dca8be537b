//! The events the scheduler publishes on `events.cron.<jobId>`.

use super::job::JobId;
use super::state::RunOutcome;
use bus::{BusError, Envelope, Topic};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What happened to a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CronEventKind {
    /// The task was submitted to the agent.
    Fired,
    /// The run ended (see `outcome`).
    Finished,
    /// The fire was missed and not run.
    Skipped,
}

/// The payload of an event on `events.cron.<jobId>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CronEvent {
    /// The job.
    pub job_id: JobId,
    /// What happened.
    pub kind: CronEventKind,
    /// The fire's scheduled time (Unix ms).
    pub scheduled_ms: u64,
    /// The task, once submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// How the run ended (`finished`, `skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    /// The run's final text (`finished`), delivered or not; why a fire was skipped (`skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The topic of a job's events: `events.cron.<jobId>`.
pub(crate) fn topic(job: &JobId) -> Result<Topic, BusError> {
    Topic::parse(&format!("events.cron.{job}")).map_err(|e| BusError::Invalid(e.to_string()))
}

impl CronEvent {
    /// The event as an envelope on its job's topic.
    pub fn envelope(&self) -> Result<Envelope, BusError> {
        let payload = serde_json::to_value(self).map_err(|e| BusError::Invalid(e.to_string()))?;
        Ok(Envelope::event(topic(&self.job_id)?, payload).from("cron"))
    }
}
