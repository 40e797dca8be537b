//! The running scheduler: a tokio task that ticks, then sleeps until the next wake, and the
//! handle that manages its jobs and stops it.
//!
//! A task owned by a handle rather than an actix actor: every decision lives in the store
//! (changed by compare-and-swap, so several schedulers can share it), the loop holds no state a
//! mailbox would need to serialise, and `tick` is one async function over the bus, which an actor
//! would have to wrap in futures and guard against re-entry.

use super::admin::CronError;
use super::job::{Job, JobId};
use super::scheduler::{Fired, JobView, Scheduler};
use super::settings::Settings;
use super::spec::JobSpec;
use super::state::RunRecord;
use bus::{Bus, Clock};
use futures::StreamExt as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The least the loop sleeps after a tick that hit errors (so a failing store or bus is not
/// retried in a busy loop).
const ERROR_PAUSE: Duration = Duration::from_secs(1);

/// A running scheduler. Dropping it stops the loop as [`SchedulerHandle::stop`] does, without
/// waiting.
#[derive(Debug)]
pub struct SchedulerHandle {
    scheduler: Arc<Scheduler>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Scheduler {
    /// Starts a scheduler loop over the cron trees of `db` (inside a tokio runtime).
    pub fn start(
        db: &sled::Db,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
        owner: impl Into<String>,
        settings: Settings,
    ) -> Result<SchedulerHandle, CronError> {
        let scheduler = Arc::new(Scheduler::new(db, bus, clock, owner, settings)?);
        Ok(SchedulerHandle::spawn(scheduler))
    }
}

async fn run_loop(scheduler: Arc<Scheduler>, mut stopped: watch::Receiver<bool>) {
    let inner = scheduler.inner.clone();
    let recovered = scheduler.recover().await;
    for e in &recovered.errors {
        tracing::warn!(error = %e, "cron: a lease found on start was not recovered");
    }
    if !recovered.adopted.is_empty() || !recovered.reclaimed.is_empty() {
        tracing::info!(
            adopted = recovered.adopted.len(),
            released = recovered.reclaimed.len(),
            "cron: leases left by a stopped scheduler taken over or released"
        );
    }
    // Jobs changed by another node's scheduler (a shared store) wake this one too.
    let watcher = scheduler.inner.store.watch().await.map(|mut changes| {
        let inner = inner.clone();
        tokio::spawn(async move {
            while changes.next().await.is_some() {
                inner.wake.notify_one();
            }
        })
    });
    let _watcher = watcher.map(AbortOnDrop);
    loop {
        let report = scheduler.tick().await;
        for e in &report.errors {
            tracing::warn!(error = %e, "cron tick");
        }
        let now = inner.clock.now_ms();
        // With no job due ever, nothing but a change (a wake, the store's watch) can make one
        // due: the loop sleeps until then instead of waking the idle daemon every `max_sleep`.
        let mut sleep = report
            .next_wake_ms
            .map(|w| Duration::from_millis(w.saturating_sub(now)).min(inner.settings.max_sleep));
        if !report.errors.is_empty() {
            sleep = Some(sleep.map_or(ERROR_PAUSE, |s| s.max(ERROR_PAUSE)));
        }
        let due = async {
            match sleep {
                Some(sleep) => inner.clock.sleep(sleep).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = due => {}
            () = inner.wake.notified() => {}
            _ = stopped.changed() => return,
        }
        if *stopped.borrow() {
            return;
        }
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SchedulerHandle {
    /// Starts the loop of a scheduler built with [`Scheduler::new`] (inside a tokio runtime),
    /// e.g. after syncing its declared jobs.
    pub fn spawn(scheduler: Arc<Scheduler>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run_loop(scheduler.clone(), stopped));
        Self {
            scheduler,
            stop,
            task: Some(task),
        }
    }

    /// The scheduler (for [`Scheduler::tick`] and `Scheduler::wait_idle` (tests)).
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// Checks and stores a new job; nothing is stored on error.
    pub async fn add(&self, spec: &JobSpec) -> Result<Job, CronError> {
        self.scheduler.add(spec).await
    }

    /// Replaces a job's definition.
    pub async fn update(&self, id: &JobId, spec: &JobSpec) -> Result<Job, CronError> {
        self.scheduler.update(id, spec).await
    }

    /// Removes a job and its history.
    pub async fn remove(&self, id: &JobId) -> Result<(), CronError> {
        self.scheduler.remove(id).await
    }

    /// Enables a job (scheduled from now).
    pub async fn enable(&self, id: &JobId) -> Result<Job, CronError> {
        self.scheduler.set_enabled(id, true).await
    }

    /// Disables a job.
    pub async fn disable(&self, id: &JobId) -> Result<Job, CronError> {
        self.scheduler.set_enabled(id, false).await
    }

    /// Fires a job now, out of schedule, on the cron lane.
    pub async fn run_now(&self, id: &JobId) -> Result<Fired, CronError> {
        self.scheduler.run_now(id).await
    }

    /// Every job with its state.
    pub async fn list(&self) -> Result<Vec<JobView>, CronError> {
        self.scheduler.list().await
    }

    /// A job's last 50 runs, oldest first.
    pub async fn runs(&self, id: &JobId) -> Result<Vec<RunRecord>, CronError> {
        self.scheduler.runs(id).await
    }

    /// Stops the loop and waits for it; runs in flight are then stopped without releasing their
    /// leases (their tasks stay in the bus store; the leases lapse after their TTL).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.scheduler.fires.lock().await.abort_all();
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
