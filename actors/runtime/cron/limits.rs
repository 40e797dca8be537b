//! What a model may schedule through the `cron` tool: no job that fires more often than
//! [`Settings::min_interval`], at most [`Settings::max_agent_jobs`] jobs created by models per
//! agent, each marked [`Job::created_by`] `agent:<id>`. Jobs people add (CLI, HTTP, agent files)
//! are not limited.
//!
//! [`Settings::min_interval`]: super::Settings::min_interval
//! [`Settings::max_agent_jobs`]: super::Settings::max_agent_jobs

use super::admin::CronError;
use super::job::{Job, JobId, created_by_agent};
use super::schedule::Compiled;
use super::scheduler::Scheduler;
use super::spec::JobSpec;

/// How many upcoming fires of a cron expression are looked at for its shortest interval.
const GAP_SAMPLES: usize = 500;

impl Scheduler {
    /// Adds a job for the model of `agent`: checked like [`Scheduler::add`], then held to the
    /// minimum interval and the per-agent cap, and marked as the model's.
    pub(crate) async fn add_from_model(
        &self,
        spec: &JobSpec,
        agent: &str,
    ) -> Result<Job, CronError> {
        let mut job = spec.validate(&self.context(), None)?;
        self.check_interval(&job)?;
        let by = created_by_agent(agent);
        job.created_by = Some(by.clone());
        let _counting = self.inner.model_adds.lock().await;
        let max = self.inner.settings.max_agent_jobs;
        let made = self
            .inner
            .store
            .jobs()
            .await?
            .iter()
            .filter(|j| j.agent == agent && j.created_by.as_deref() == Some(by.as_str()))
            .count();
        if made >= max {
            return Err(CronError::TooManyJobs {
                agent: agent.to_string(),
                max,
            });
        }
        self.insert_job(job).await
    }

    /// Changes job `id` for a model: checked like [`Scheduler::update`]; a new schedule is held
    /// to the minimum interval.
    pub(crate) async fn update_from_model(
        &self,
        id: &JobId,
        spec: &JobSpec,
    ) -> Result<Job, CronError> {
        let old = self
            .inner
            .store
            .job(id)
            .await?
            .ok_or_else(|| CronError::Store(super::StoreError::UnknownJob(id.clone())))?;
        let job = spec.validate(&self.context(), Some(&old))?;
        if job.schedule != old.schedule {
            self.check_interval(&job)?;
        }
        self.replace_job(job).await
    }

    /// [`CronError::TooFrequent`] when `job` fires more often than the minimum interval.
    fn check_interval(&self, job: &Job) -> Result<(), CronError> {
        let min_ms =
            u64::try_from(self.inner.settings.min_interval.as_millis()).unwrap_or(u64::MAX);
        let compiled =
            Compiled::new(&job.schedule, job.created_at).map_err(|reason| CronError::Fire {
                job: job.id.clone(),
                reason: reason.into(),
            })?;
        let now = self.inner.clock.now_ms();
        match compiled.shortest_gap_ms(now, GAP_SAMPLES) {
            Some(every_ms) if every_ms < min_ms => Err(CronError::TooFrequent { every_ms, min_ms }),
            _ => Ok(()),
        }
    }
}
