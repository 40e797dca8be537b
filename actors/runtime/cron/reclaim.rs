//! What the scheduler records about fires that did not run here: expired leases (a scheduler
//! that stopped mid-run) and missed fires.

use super::event::{CronEvent, CronEventKind};
use super::job::Job;
use super::scheduler::{Scheduler, TickReport};
use super::state::{Lease, RunOutcome, RunRecord};

impl Scheduler {
    /// Clears an expired lease and records the run it covered, as the bus knows it.
    pub(super) async fn reclaim(
        &self,
        job: &Job,
        lease: &Lease,
        now: u64,
        report: &mut TickReport,
    ) -> Result<(), super::store::StoreError> {
        let cleared = self
            .inner
            .store
            .update_state(&job.id, |s| {
                (s.lease.as_ref() == Some(lease)).then(|| {
                    let mut new = s.clone();
                    new.lease = None;
                    (new, ())
                })
            })
            .await?;
        if cleared.is_none() {
            return Ok(());
        }
        report.reclaimed.push(job.id.clone());
        let Some(task_id) = lease.task_id else {
            // Never submitted: the fire is still due and runs again under the same request id.
            return Ok(());
        };
        let record = self.inner.bus.task(task_id).await.ok().flatten();
        let (outcome, error) = match record.as_ref().and_then(|r| r.outcome.as_ref()) {
            Some(o) => super::fire::outcome_of(o),
            None => (
                RunOutcome::Failed,
                Some("abandoned: the scheduler running it stopped and its lease expired".into()),
            ),
        };
        let run = RunRecord {
            job_id: job.id.clone(),
            scheduled_ms: lease.scheduled_ms,
            started_ms: lease.scheduled_ms,
            ended_ms: now,
            outcome,
            task_id: Some(task_id),
            error,
        };
        self.inner.store.push_run(&run).await?;
        self.inner
            .publish(CronEvent {
                job_id: job.id.clone(),
                kind: CronEventKind::Finished,
                scheduled_ms: lease.scheduled_ms,
                task_id: Some(task_id),
                outcome: Some(outcome),
                text: None,
            })
            .await;
        Ok(())
    }

    pub(super) async fn record_skipped(
        &self,
        job: &Job,
        at: u64,
        now: u64,
        reason: Option<String>,
    ) {
        let run = RunRecord {
            job_id: job.id.clone(),
            scheduled_ms: at,
            started_ms: now,
            ended_ms: now,
            outcome: RunOutcome::Skipped,
            task_id: None,
            error: reason.clone(),
        };
        if let Err(e) = self.inner.store.push_run(&run).await {
            tracing::warn!(job = %job.id, error = %e, "cron: could not record a skipped fire");
        }
        self.inner
            .publish(CronEvent {
                job_id: job.id.clone(),
                kind: CronEventKind::Skipped,
                scheduled_ms: at,
                task_id: None,
                outcome: Some(RunOutcome::Skipped),
                text: reason,
            })
            .await;
    }
}
