//! Managing jobs: add, update, remove, enable/disable, run now, list, history.

use super::fire::FireKind;
use super::job::{CatchUp, Job, JobId};
use super::schedule::Compiled;
use super::scheduler::{Fired, JobView, Scheduler};
use super::spec::{JobSpec, SpecContext, SpecError};
use super::state::{JobState, RunRecord};
use super::store::StoreError;

/// Why a cron operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    /// The spec was refused; nothing was stored.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The store failed, or the job is unknown or taken.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `run_now` of a job that is running.
    #[error("cron job \"{0}\" is running")]
    Running(JobId),
    /// A job a model schedules through the `cron` tool would fire more often than
    /// `[cron] min_interval` allows; nothing was stored.
    #[error(
        "schedule: it fires every {} but jobs you schedule may fire at most every {} ([cron] min_interval)",
        super::job::human_ms(*every_ms),
        super::job::human_ms(*min_ms)
    )]
    TooFrequent {
        /// The shortest interval between two of its fires (ms).
        every_ms: u64,
        /// The minimum (ms).
        min_ms: u64,
    },
    /// Models already created `[cron] max_agent_jobs` jobs for this agent; nothing was stored.
    #[error(
        "agent {agent:?} already has {max} jobs its model created, the most allowed ([cron] max_agent_jobs)"
    )]
    TooManyJobs {
        /// The agent.
        agent: String,
        /// The cap.
        max: usize,
    },
    /// The fire could not be submitted.
    #[error("cron job \"{job}\" could not fire: {reason}")]
    Fire {
        /// The job.
        job: JobId,
        /// Why.
        #[source]
        reason: super::fire::FireError,
    },
}

impl Scheduler {
    pub(super) fn context(&self) -> SpecContext<'_> {
        SpecContext {
            agents: &self.inner.settings.agents,
            default_tz: self.inner.settings.default_tz,
            now_ms: self.inner.clock.now_ms(),
        }
    }

    pub(super) fn next_fire(&self, job: &Job) -> Result<Option<u64>, CronError> {
        if !job.enabled {
            return Ok(None);
        }
        let compiled =
            Compiled::new(&job.schedule, job.created_at).map_err(|reason| CronError::Fire {
                job: job.id.clone(),
                reason: reason.into(),
            })?;
        let now = self.inner.clock.now_ms();
        // An `every` job anchored at its creation fires first one period later.
        Ok(compiled.next_after(now))
    }

    async fn existing(&self, id: &JobId) -> Result<Job, CronError> {
        self.inner
            .store
            .job(id)
            .await?
            .ok_or_else(|| CronError::Store(StoreError::UnknownJob(id.clone())))
    }

    /// Checks and stores a new job; nothing is stored on error.
    pub async fn add(&self, spec: &JobSpec) -> Result<Job, CronError> {
        let job = spec.validate(&self.context(), None)?;
        self.insert_job(job).await
    }

    /// Stores a checked new job with its first fire.
    pub(super) async fn insert_job(&self, job: Job) -> Result<Job, CronError> {
        let state = JobState {
            next_fire_ms: self.next_fire(&job)?,
            ..JobState::default()
        };
        self.inner.store.insert(&job, &state).await?;
        self.inner.wake.notify_one();
        Ok(job)
    }

    /// Replaces a job's definition (its id, creation time, history and running lease stay);
    /// the next fire is recomputed. Nothing is stored on error.
    pub async fn update(&self, id: &JobId, spec: &JobSpec) -> Result<Job, CronError> {
        let old = self.existing(id).await?;
        let job = spec.validate(&self.context(), Some(&old))?;
        self.replace_job(job).await
    }

    /// Replaces a stored job's definition and recomputes its next fire.
    pub(super) async fn replace_job(&self, job: Job) -> Result<Job, CronError> {
        let id = &job.id;
        let next = self.next_fire(&job)?;
        self.inner.store.put_job(&job).await?;
        self.inner
            .store
            .update_state(id, |s| {
                let mut new = s.clone();
                new.next_fire_ms = next;
                Some((new, ()))
            })
            .await?;
        self.inner.wake.notify_one();
        Ok(job)
    }

    /// Removes a job and its history.
    pub async fn remove(&self, id: &JobId) -> Result<(), CronError> {
        if !self.inner.store.remove(id).await? {
            return Err(StoreError::UnknownJob(id.clone()).into());
        }
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Enables or disables a job. Enabling schedules from now: fires missed while disabled
    /// are not caught up.
    pub async fn set_enabled(&self, id: &JobId, enabled: bool) -> Result<Job, CronError> {
        let mut job = self.existing(id).await?;
        job.enabled = enabled;
        job.updated_at = self.inner.clock.now_ms();
        let next = self.next_fire(&job)?;
        self.inner.store.put_job(&job).await?;
        self.inner
            .store
            .update_state(id, |s| {
                let mut new = s.clone();
                new.next_fire_ms = next;
                Some((new, ()))
            })
            .await?;
        self.inner.wake.notify_one();
        Ok(job)
    }

    /// Fires a job now, out of schedule, on the cron lane (`request_id` `cron:<jobId>:<now>`);
    /// its schedule, failures and backoff are left as they were. [`CronError::Running`] while a
    /// run of it holds a lease.
    pub async fn run_now(&self, id: &JobId) -> Result<Fired, CronError> {
        let job = self.existing(id).await?;
        let now = self.inner.clock.now_ms();
        let lease = self.inner.lease(now, now, true);
        let taken = self
            .inner
            .store
            .update_state(id, |s| {
                if s.is_running(now) {
                    return None;
                }
                let mut new = s.clone();
                new.lease = Some(lease.clone());
                Some((new, ()))
            })
            .await?;
        if taken.is_none() {
            return Err(CronError::Running(id.clone()));
        }
        self.fire(&job, now, FireKind::Manual)
            .await
            .map_err(|reason| CronError::Fire {
                job: id.clone(),
                reason,
            })
    }

    /// Every job with its state, by id. The `next_fire_ms` shown is never in the past: a fire
    /// that is due and free to run shows now (the loop runs it at once); one that waits on a
    /// running fire, or that its catch-up policy skips, shows the next scheduled time after now.
    pub async fn list(&self) -> Result<Vec<JobView>, CronError> {
        let store = &self.inner.store;
        let now = self.inner.clock.now_ms();
        let mut views = Vec::new();
        for job in store.jobs().await? {
            let mut state = store.state(&job.id).await?.unwrap_or_default();
            state.next_fire_ms = self.shown_next(&job, &state, now);
            views.push(JobView { job, state });
        }
        Ok(views)
    }

    /// The next fire of `job` as people see it at `now` (see [`Scheduler::list`]).
    fn shown_next(&self, job: &Job, state: &JobState, now: u64) -> Option<u64> {
        let next = state.next_fire_ms?;
        if next >= now {
            return Some(next);
        }
        let compiled = Compiled::new(&job.schedule, job.created_at).ok()?;
        // Missed: no fire (the due one included) within the grace before now.
        let grace_start = now.saturating_sub(self.inner.settings.misfire_grace_ms());
        let missed = next < grace_start
            && compiled
                .next_after(grace_start.saturating_sub(1))
                .is_none_or(|f| f > now);
        let runs = !missed || job.catch_up == CatchUp::Latest || job.schedule.is_one_shot();
        if runs && job.enabled && !state.is_running(now) {
            Some(now)
        } else {
            compiled.next_after(now)
        }
    }

    /// A job's run history (the last 50), oldest first.
    pub async fn runs(&self, id: &JobId) -> Result<Vec<RunRecord>, CronError> {
        self.existing(id).await?;
        Ok(self.inner.store.runs(id).await?)
    }
}
