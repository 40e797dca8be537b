//! The jobs agent files declare (`[[cron]]` tables, `[heartbeat]`) synced into the store on
//! start: a declared job that is new is added, one whose definition changed is updated, and a
//! job that came from a file but is no longer declared is disabled (kept with its history).
//! Jobs added through the CLI, HTTP or the `cron` tool ([`JobSource::Api`]) are never touched.

use super::admin::CronError;
use super::heartbeat::HeartbeatSpec;
use super::job::{Job, JobId, JobSource};
use super::scheduler::Scheduler;
use super::spec::JobSpec;
use std::collections::BTreeSet;

/// What the agent files declare.
#[derive(Debug, Clone, Default)]
pub struct Declared {
    /// `[[cron]]` jobs, each with its stable id (`<agent>--<id>`) in `id`.
    pub jobs: Vec<JobSpec>,
    /// One heartbeat per agent.
    pub heartbeats: Vec<HeartbeatSpec>,
}

/// What a sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Jobs added.
    pub added: Vec<JobId>,
    /// Jobs whose definition changed.
    pub updated: Vec<JobId>,
    /// File jobs no longer declared, now disabled.
    pub disabled: Vec<JobId>,
    /// Declared jobs that could not be synced, with why.
    pub errors: Vec<String>,
}

/// Whether two definitions are the same (the update time aside).
fn same(a: &Job, b: &Job) -> bool {
    let mut a = a.clone();
    a.updated_at = b.updated_at;
    a == *b
}

impl Scheduler {
    /// Syncs the declared jobs into the store (see the module docs).
    pub(crate) async fn sync_declared(&self, declared: &Declared) -> SyncReport {
        let mut report = SyncReport::default();
        let mut seen: BTreeSet<JobId> = BTreeSet::new();
        for spec in &declared.jobs {
            let Some(id) = spec.id.as_deref() else {
                report.errors.push("a declared job has no id".into());
                continue;
            };
            match self.sync_file_job(id, spec, &mut report).await {
                Ok(id) => {
                    seen.insert(id);
                }
                Err(e) => report.errors.push(format!("cron job {id}: {e}")),
            }
        }
        for hb in &declared.heartbeats {
            match self.sync_heartbeat(hb, &mut report).await {
                Ok(id) => {
                    seen.insert(id);
                }
                Err(e) => report
                    .errors
                    .push(format!("heartbeat of {}: {e}", hb.agent)),
            }
        }
        match self.inner.store.jobs().await {
            Ok(jobs) => {
                for job in jobs {
                    let ours = matches!(job.source, JobSource::File | JobSource::Heartbeat);
                    if !ours || !job.enabled || seen.contains(&job.id) {
                        continue;
                    }
                    match self.set_enabled(&job.id, false).await {
                        Ok(_) => report.disabled.push(job.id),
                        Err(e) => report.errors.push(format!("cron job {}: {e}", job.id)),
                    }
                }
            }
            Err(e) => report.errors.push(e.to_string()),
        }
        report
    }

    async fn sync_file_job(
        &self,
        id: &str,
        spec: &JobSpec,
        report: &mut SyncReport,
    ) -> Result<JobId, CronError> {
        let id = JobId::parse(id).map_err(super::SpecError::InvalidId)?;
        match self.inner.store.job(&id).await? {
            None => {
                let mut job = spec.validate(&self.context(), None)?;
                job.source = JobSource::File;
                self.insert_job(job).await?;
                report.added.push(id.clone());
            }
            Some(old) if old.source != JobSource::File => {
                return Err(CronError::Store(super::StoreError::Exists(id)));
            }
            Some(old) => {
                let job = spec.validate(&self.context(), Some(&old))?;
                if !same(&job, &old) {
                    self.replace_job(job).await?;
                    report.updated.push(id.clone());
                }
            }
        }
        Ok(id)
    }

    async fn sync_heartbeat(
        &self,
        hb: &HeartbeatSpec,
        report: &mut SyncReport,
    ) -> Result<JobId, CronError> {
        let now = self.inner.clock.now_ms();
        let invalid = |reason| CronError::Spec(super::SpecError::InvalidId(reason));
        let id = super::heartbeat::job_id(&hb.agent).map_err(invalid)?;
        match self.inner.store.job(&id).await? {
            None => {
                self.insert_job(hb.job(now, None).map_err(invalid)?).await?;
                report.added.push(id.clone());
            }
            Some(old) if old.source != JobSource::Heartbeat => {
                return Err(CronError::Store(super::StoreError::Exists(id)));
            }
            Some(old) => {
                let mut job = hb.job(now, Some(&old)).map_err(invalid)?;
                if !same(&job, &old) {
                    job.updated_at = now;
                    self.replace_job(job).await?;
                    report.updated.push(id.clone());
                }
            }
        }
        Ok(id)
    }
}
