//! What a scheduler does on start with the leases it finds, so a job never waits out a lease
//! whose holder is gone (a `kill -9`, a power cut):
//!
//! - a lease of this node's previous life (same [`Settings::node`], another owner) whose fire was
//!   submitted is taken over at once: the scheduler awaits that task (the bus runs it again after
//!   the restart, or it has already ended), records its outcome and lets the lease go, so the
//!   job's next fire follows at once;
//! - a lease of this node's previous life whose fire was never submitted is released: the fire
//!   is still due and runs under the same request id;
//! - a lease of another node whose fire has ended is released, its run recorded as the bus knows
//!   it; one whose fire is still running is left to its holder (or its expiry).
//!
//! [`Settings::node`]: super::Settings::node

use super::fire::{FireKind, Run};
use super::job::Job;
use super::scheduler::{Scheduler, TickReport};
use super::state::Lease;
use uuid::Uuid;

/// What to do with a lease found on start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Ours, or another node's fire still running: leave it.
    Keep,
    /// Take over the fire in flight of our previous life.
    Adopt(Uuid),
    /// Let it go now (recording the fire as the bus knows it, when it was submitted).
    Release,
}

/// The rule: what a scheduler that is `owner` on `node` does on start with `lease`, whose fire's
/// task has ended (`ended`) or not.
pub(crate) fn decide(owner: &str, node: Option<&str>, lease: &Lease, ended: bool) -> Found {
    if lease.owner == owner {
        return Found::Keep;
    }
    let previous_life = node.is_some() && lease.node.as_deref() == node;
    match (previous_life, lease.task_id) {
        (true, Some(task)) => Found::Adopt(task),
        (true, None) => Found::Release,
        (false, Some(_)) if ended => Found::Release,
        (false, _) => Found::Keep,
    }
}

impl Scheduler {
    /// Deals with the leases found on start by the rules of the module docs. The loop calls it
    /// once before its first tick; the runs it takes over are awaited like a tick's.
    pub async fn recover(&self) -> TickReport {
        let now = self.inner.clock.now_ms();
        let mut report = TickReport {
            now_ms: now,
            ..TickReport::default()
        };
        let jobs = match self.inner.store.jobs().await {
            Ok(jobs) => jobs,
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        };
        for job in &jobs {
            if let Err(e) = self.recover_job(job, now, &mut report).await {
                report.errors.push(format!("job {}: {e}", job.id));
            }
        }
        report
    }

    async fn recover_job(
        &self,
        job: &Job,
        now: u64,
        report: &mut TickReport,
    ) -> Result<(), super::fire::FireError> {
        let state = self.inner.store.state(&job.id).await?;
        let Some(lease) = state.and_then(|s| s.lease) else {
            return Ok(());
        };
        let record = match lease.task_id {
            Some(id) => self.inner.bus.task(id).await?,
            None => None,
        };
        let ended = record.as_ref().is_some_and(|r| r.outcome.is_some());
        let node = self.inner.settings.node.as_deref();
        match decide(&self.inner.owner, node, &lease, ended) {
            Found::Keep => Ok(()),
            Found::Release => Ok(self.reclaim(job, &lease, now, report).await?),
            Found::Adopt(task_id) => {
                let request_id = match record {
                    Some(r) => r.request_id,
                    None => super::fire::request_id(job, lease.scheduled_ms)?,
                };
                self.adopt(job, &lease, now, task_id, request_id, report)
                    .await
            }
        }
    }

    /// Takes `lease` over (if it is still the job's) and awaits its fire's task.
    async fn adopt(
        &self,
        job: &Job,
        lease: &Lease,
        now: u64,
        task_id: Uuid,
        request_id: bus::RequestId,
        report: &mut TickReport,
    ) -> Result<(), super::fire::FireError> {
        let mut ours = self.inner.lease(now, lease.scheduled_ms, lease.manual);
        ours.task_id = Some(task_id);
        let taken = self
            .inner
            .store
            .update_state(&job.id, |s| {
                (s.lease.as_ref() == Some(lease)).then(|| {
                    let mut new = s.clone();
                    new.lease = Some(ours.clone());
                    (new, ())
                })
            })
            .await?;
        if taken.is_none() {
            return Ok(());
        }
        report.adopted.push(job.id.clone());
        let run = Run {
            inner: self.inner.clone(),
            job: job.clone(),
            scheduled_ms: lease.scheduled_ms,
            kind: if lease.manual {
                FireKind::Manual
            } else {
                FireKind::Scheduled
            },
            request_id,
            task_id,
            started: lease.scheduled_ms,
        };
        self.fires.lock().await.spawn(run.await_outcome());
        Ok(())
    }
}
