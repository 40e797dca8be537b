//! The scheduler core: [`Scheduler::tick`] fires every due job once at the clock's now.
//!
//! Everything it decides is kept in the store and changed by compare-and-swap, so any number of
//! schedulers may share one store: the one whose swap lands takes the fire; the fire's request
//! id (`cron:<jobId>:<scheduled ms>`) makes the bus run it at most once even so.

use super::event::CronEvent;
use super::job::{CatchUp, Job};
use super::schedule::Compiled;
use super::settings::Settings;
use super::state::{JobState, Lease};
use super::store::{CronStore, HISTORY_LEN, StoreError};
use bus::{Bus, Clock, RequestId};
use std::sync::Arc;
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinSet;
use uuid::Uuid;

/// A fire submitted by a tick (or `run_now`).
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    /// The job.
    pub job_id: super::JobId,
    /// The scheduled time (Unix ms).
    pub scheduled_ms: u64,
    /// `cron:<jobId>:<scheduled ms>`.
    pub request_id: RequestId,
    /// The task the bus admitted (an existing one when `duplicate`).
    pub task_id: Uuid,
    /// The bus already knew this request id: nothing new was started.
    pub duplicate: bool,
}

/// A missed fire recorded as skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// The scheduled time (Unix ms).
    pub scheduled_ms: u64,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    /// The clock's time the tick ran at.
    pub now_ms: u64,
    /// Fires submitted.
    pub fired: Vec<Fired>,
    /// Missed fires recorded as skipped, per job.
    pub skipped: Vec<(super::JobId, Skipped)>,
    /// Jobs whose expired lease (a scheduler that stopped mid-run) was cleared, or, on start,
    /// whose lease covered a fire that had ended.
    pub reclaimed: Vec<super::JobId>,
    /// On start: jobs whose fire in flight, leased by this node's previous life, this scheduler
    /// took over (it awaits the fire's task and records its outcome).
    pub adopted: Vec<super::JobId>,
    /// What went wrong (the jobs concerned are retried on a later tick).
    pub errors: Vec<String>,
    /// When something next needs doing (a fire, a lease expiring), Unix ms.
    pub next_wake_ms: Option<u64>,
}

/// What the scheduler shares with its fire tasks.
pub(crate) struct Inner {
    pub(crate) store: CronStore,
    pub(crate) bus: Arc<dyn Bus>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) owner: String,
    pub(crate) settings: Settings,
    /// Woken when a job changes or a run ends, so the loop recomputes its sleep.
    pub(crate) wake: Notify,
    /// Held while a model's job is counted against its agent's cap and stored.
    pub(crate) model_adds: Mutex<()>,
}

/// The cron scheduler. Dropping it aborts its runs in flight without releasing their leases
/// (as a crash would): they lapse after the lease TTL.
pub struct Scheduler {
    pub(crate) inner: Arc<Inner>,
    pub(crate) fires: Mutex<JoinSet<()>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("owner", &self.inner.owner)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler over the cron trees of `db`, firing onto `bus` at `clock`'s time. `owner`
    /// names it in leases (unique per process).
    pub fn new(
        db: &sled::Db,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
        owner: impl Into<String>,
        settings: Settings,
    ) -> Result<Self, StoreError> {
        Ok(Self::with_store(
            CronStore::open(db)?,
            bus,
            clock,
            owner,
            settings,
        ))
    }

    /// A scheduler over `store` (shared by every node's scheduler when it is on NATS).
    pub fn with_store(
        store: CronStore,
        bus: Arc<dyn Bus>,
        clock: Arc<dyn Clock>,
        owner: impl Into<String>,
        settings: Settings,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                bus,
                clock,
                owner: owner.into(),
                settings,
                wake: Notify::new(),
                model_adds: Mutex::new(()),
            }),
            fires: Mutex::new(JoinSet::new()),
        }
    }

    /// The store it schedules from.
    pub fn store(&self) -> &CronStore {
        &self.inner.store
    }

    /// Fires every due job once at the clock's now: clears expired leases, records missed fires
    /// as skipped (by each job's [`CatchUp`]), takes each due fire's lease and submits its task.
    /// The runs are awaited in spawned tasks; `Scheduler::wait_idle` (tests) waits for them.
    pub async fn tick(&self) -> TickReport {
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
            if let Err(e) = self.tick_job(job, now, &mut report).await {
                report.errors.push(format!("job {}: {e}", job.id));
            }
        }
        report.next_wake_ms = self.next_wake(&jobs).await;
        report
    }

    /// The earliest instant something needs doing: an enabled job's next fire, or a lease's expiry.
    async fn next_wake(&self, jobs: &[Job]) -> Option<u64> {
        let mut wake: Option<u64> = None;
        for job in jobs {
            let Ok(Some(state)) = self.inner.store.state(&job.id).await else {
                continue;
            };
            let at = match &state.lease {
                Some(lease) => Some(lease.until_ms),
                None if job.enabled => state.next_fire_ms,
                None => None,
            };
            wake = match (wake, at) {
                (Some(w), Some(a)) => Some(w.min(a)),
                (w, a) => w.or(a),
            };
        }
        wake
    }

    async fn tick_job(
        &self,
        job: &Job,
        now: u64,
        report: &mut TickReport,
    ) -> Result<(), super::fire::FireError> {
        let store = &self.inner.store;
        let Some(state) = store.state(&job.id).await? else {
            return Ok(());
        };
        if let Some(lease) = &state.lease {
            if lease.until_ms > now {
                return Ok(());
            }
            self.reclaim(job, lease, now, report).await?;
        }
        let Some(next) = state.next_fire_ms.filter(|&n| n <= now && job.enabled) else {
            return Ok(());
        };
        let compiled = Compiled::new(&job.schedule, job.created_at)?;
        let (mut due, _) = compiled.fires_between(next, now, HISTORY_LEN);
        due.insert(0, next);
        let keep_from = due.len().saturating_sub(HISTORY_LEN);
        let due = due.split_off(keep_from);
        let Some(&latest) = due.last() else {
            return Ok(());
        };
        let missed = latest.saturating_add(self.inner.settings.misfire_grace_ms()) < now;
        let mut run = !missed || job.catch_up == CatchUp::Latest || job.schedule.is_one_shot();
        let skip_reason = if run {
            super::heartbeat::skip_reason(&self.inner.settings, job, latest)
        } else {
            None
        };
        if skip_reason.is_some() {
            run = false;
        }
        let lease = self.inner.lease(now, latest, false);
        let after = compiled.next_after(now);
        let taken = store
            .update_state(&job.id, |s| {
                let free = s.lease.as_ref().is_none_or(|l| l.until_ms <= now);
                if !free || s.next_fire_ms != Some(next) {
                    return None;
                }
                let mut new = s.clone();
                if run {
                    new.next_fire_ms = Some(latest);
                    new.lease = Some(lease.clone());
                } else {
                    new.next_fire_ms = after;
                    new.lease = None;
                }
                Some((new, ()))
            })
            .await?;
        if taken.is_none() {
            return Ok(());
        }
        let skipped = if run { &due[..due.len() - 1] } else { &due[..] };
        for &at in skipped {
            let reason = if at == latest {
                skip_reason.clone()
            } else {
                None
            };
            self.record_skipped(job, at, now, reason).await;
            report
                .skipped
                .push((job.id.clone(), Skipped { scheduled_ms: at }));
        }
        if run {
            let fired = self
                .fire(job, latest, super::fire::FireKind::Scheduled)
                .await?;
            report.fired.push(fired);
        }
        Ok(())
    }

    #[cfg(test)]
    /// Waits (at most `timeout`) until every run in flight has ended; false if time ran out.
    pub(crate) async fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let mut fires = self.fires.lock().await;
        tokio::time::timeout(timeout, async {
            while fires.join_next().await.is_some() {}
        })
        .await
        .is_ok()
    }
}

impl Inner {
    /// A fresh lease of this scheduler, taken at `now`, on the fire scheduled at `scheduled_ms`.
    pub(crate) fn lease(&self, now: u64, scheduled_ms: u64, manual: bool) -> Lease {
        Lease {
            owner: self.owner.clone(),
            node: self.settings.node.clone(),
            until_ms: now.saturating_add(self.settings.lease_ttl_ms()),
            scheduled_ms,
            task_id: None,
            manual,
        }
    }

    /// Publishes a cron event; a failure is logged (events are notifications).
    pub(crate) async fn publish(&self, event: CronEvent) {
        let sent = match event.envelope() {
            Ok(env) => self.bus.publish(env).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            tracing::warn!(job = %event.job_id, error = %e, "cron: event not published");
        }
    }
}

/// The state of a job as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct JobView {
    /// The job.
    pub job: Job,
    /// Its scheduling state.
    pub state: JobState,
}
