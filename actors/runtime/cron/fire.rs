//! One fire: the task submitted on the `cron` lane, its lease renewed while it runs, its
//! outcome recorded (history, backoff, one-shot end, announce, events).

use super::event::{CronEvent, CronEventKind};
use super::job::{Job, PayloadKind, SessionTarget};
use super::schedule::Compiled;
use super::scheduler::{Fired, Inner, Scheduler};
use super::state::RunOutcome;
use crate::ingress::{Duplicates, Ingress, Request, Target};
use crate::origin::Origin;
use bus::{BusError, Outcome, RequestId, TaskRecord};
use clawbus_core::config::CRON_LANE;
use clawbus_core::ids::AgentId;
use clawbus_core::ids::SessionKey;
use clawbus_core::task::TaskResult;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub(crate) use clawbus_core::jobs::heartbeat::NO_REPLY;

/// Why a job fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FireKind {
    /// Its schedule came due: the run moves the schedule on, counts for backoff and ends a
    /// one-shot job.
    Scheduled,
    /// `run_now`: out of schedule, leaves the schedule as it was.
    Manual,
}

/// Why a fire (or the bookkeeping around one: a tick, a reclaim, a recovery) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FireError {
    /// The fire's request id is not one (a job id or agent id too long for it).
    #[error(transparent)]
    RequestId(#[from] bus::RequestIdError),
    /// A heartbeat whose file is missing or empty.
    #[error(
        "{} of agent {agent} is missing or has no content",
        super::heartbeat::HEARTBEAT_FILE
    )]
    NoHeartbeat {
        /// The agent.
        agent: String,
    },
    /// The ingress pipeline did not take the task.
    #[error(transparent)]
    Submit(#[from] crate::ingress::IngressError),
    /// The job's stored schedule does not compile.
    #[error(transparent)]
    Schedule(#[from] clawbus_core::jobs::ScheduleError),
    /// The cron store failed.
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
    /// The bus failed reading a fire's task.
    #[error(transparent)]
    Bus(#[from] BusError),
}

/// The request id of a fire: `cron:<jobId>:<scheduled ms>`.
/// A heartbeat's is `heartbeat:<agent>:<scheduled ms>`.
pub(crate) fn request_id(job: &Job, scheduled_ms: u64) -> Result<RequestId, bus::RequestIdError> {
    match job.payload.kind {
        PayloadKind::Heartbeat => {
            RequestId::parse(&format!("heartbeat:{}:{scheduled_ms}", job.agent))
        }
        _ => RequestId::parse(&format!("cron:{}:{scheduled_ms}", job.id)),
    }
}

/// The origin of a fire's task: channel and lane `cron`, the session the job targets.
pub(crate) fn origin(job: &Job, scheduled_ms: u64) -> Origin {
    let agent = AgentId::new(job.agent.clone());
    let session_key = match job.session {
        SessionTarget::Main => SessionKey::main(&agent),
        SessionTarget::Isolated => {
            SessionKey::peer(&agent, "cron", job.id.as_str(), &scheduled_ms.to_string())
        }
    };
    Origin {
        channel: clawbus_core::ids::Channel::Cron,
        chat_type: "job".into(),
        peer: job.id.to_string(),
        session_name: None,
        session_key: Some(session_key),
        lane: CRON_LANE.into(),
        parent_task: None,
        call_chain: Vec::new(),
        notify_session: None,
        depth: 0,
        members: None,
        max_attempts: None,
        deliver_to: None,
    }
}

/// A bus outcome as a run outcome, with its error text.
pub(crate) fn outcome_of(o: &Outcome) -> (RunOutcome, Option<String>) {
    match o {
        Outcome::Succeeded { .. } => (RunOutcome::Succeeded, None),
        Outcome::Failed { error } => (RunOutcome::Failed, Some(error.clone())),
        Outcome::TimedOut { error } => (RunOutcome::TimedOut, Some(error.clone())),
        Outcome::Cancelled { reason } => (RunOutcome::Cancelled, Some(reason.clone())),
        // Failed on every attempt its agent allows: a failure, as far as backoff goes.
        Outcome::DeadLettered { error } => (RunOutcome::Failed, Some(error.clone())),
        _ => (RunOutcome::Failed, Some("unknown outcome".into())),
    }
}

impl Scheduler {
    /// Submits the fire whose lease this scheduler holds, then awaits its run in a spawned task.
    /// On a submit failure the lease is let go (the fire stays due).
    pub(crate) async fn fire(
        &self,
        job: &Job,
        scheduled_ms: u64,
        kind: FireKind,
    ) -> Result<Fired, FireError> {
        let inner = &self.inner;
        let submitted = submit(inner, job, scheduled_ms).await;
        let (request_id, record, duplicate) = match submitted {
            Ok(ok) => ok,
            Err(e) => {
                let _ = release(inner, job, scheduled_ms).await;
                return Err(e);
            }
        };
        let task_id = record.task_id;
        let next = match kind {
            FireKind::Scheduled => {
                Compiled::new(&job.schedule, job.created_at)?.next_after(inner.clock.now_ms())
            }
            FireKind::Manual => None,
        };
        let owner = inner.owner.clone();
        inner
            .store
            .update_state(&job.id, |s| {
                let lease = s.lease.as_ref()?;
                if lease.owner != owner || lease.scheduled_ms != scheduled_ms {
                    return None;
                }
                let mut new = s.clone();
                if let Some(l) = new.lease.as_mut() {
                    l.task_id = Some(task_id);
                }
                if kind == FireKind::Scheduled {
                    new.next_fire_ms = next;
                }
                Some((new, ()))
            })
            .await?;
        inner
            .publish(CronEvent {
                job_id: job.id.clone(),
                kind: CronEventKind::Fired,
                scheduled_ms,
                task_id: Some(task_id),
                outcome: None,
                text: None,
            })
            .await;
        let started = inner.clock.now_ms();
        let run = Run {
            inner: inner.clone(),
            job: job.clone(),
            scheduled_ms,
            kind,
            request_id: request_id.clone(),
            task_id,
            started,
        };
        self.fires.lock().await.spawn(run.await_outcome());
        Ok(Fired {
            job_id: job.id.clone(),
            scheduled_ms,
            request_id,
            task_id,
            duplicate,
        })
    }
}

async fn submit(
    inner: &Inner,
    job: &Job,
    scheduled_ms: u64,
) -> Result<(RequestId, TaskRecord, bool), FireError> {
    let request_id = request_id(job, scheduled_ms)?;
    let text = match job.payload.kind {
        PayloadKind::Heartbeat => match super::heartbeat::read(&inner.settings, &job.agent) {
            Some(content) => super::heartbeat::message(&content),
            None => {
                return Err(FireError::NoHeartbeat {
                    agent: job.agent.clone(),
                });
            }
        },
        _ => job.payload.task_text(),
    };
    // The request id already ran other work (the job changed between two schedulers' fires):
    // the fire happened; await that task.
    // A flow payload goes to the flow engine, which starts the run under this request id.
    let target = match job.payload.kind {
        PayloadKind::Flow => Target::Topic(bus::Topic::flow_starts()),
        _ => Target::Agent(AgentId::new(job.agent.clone())),
    };
    let req = Request {
        duplicates: Duplicates::Join,
        ..Request::new(
            target,
            request_id.clone(),
            text,
            "cron",
            origin(job, scheduled_ms),
        )
    };
    let s = Ingress::new(inner.bus.clone()).submit(req).await?;
    Ok((request_id, s.task, s.duplicate))
}

/// Lets go of this scheduler's lease on a fire.
async fn release(
    inner: &Inner,
    job: &Job,
    scheduled_ms: u64,
) -> Result<Option<()>, super::store::StoreError> {
    let owner = inner.owner.clone();
    inner
        .store
        .update_state(&job.id, |s| {
            let l = s.lease.as_ref()?;
            (l.owner == owner && l.scheduled_ms == scheduled_ms).then(|| {
                let mut new = s.clone();
                new.lease = None;
                (new, ())
            })
        })
        .await
}

/// A submitted fire being awaited.
pub(crate) struct Run {
    pub(crate) inner: Arc<Inner>,
    pub(crate) job: Job,
    pub(crate) scheduled_ms: u64,
    pub(crate) kind: FireKind,
    pub(crate) request_id: RequestId,
    pub(crate) task_id: Uuid,
    pub(crate) started: u64,
}

impl Run {
    /// Awaits the task (renewing the lease meanwhile), then records how it ended.
    pub(crate) async fn await_outcome(self) {
        let timeout = self.inner.settings.run_timeout;
        let waited = tokio::select! {
            r = self.inner.bus.wait(&self.request_id, timeout) => r,
            () = self.renew() => return,
        };
        let (outcome, error, text) = match waited {
            Ok(rec) => match &rec.outcome {
                Some(o) => {
                    let (outcome, error) = outcome_of(o);
                    let text = rec.result().and_then(TaskResult::text_of);
                    (outcome, error, text.map(str::to_string))
                }
                None => (RunOutcome::Failed, Some("no outcome recorded".into()), None),
            },
            Err(BusError::TimedOut { after }) => {
                let reason = format!("cron run timed out after {after:?}");
                let _ = self.inner.bus.cancel(&self.request_id, &reason).await;
                (RunOutcome::TimedOut, Some(reason), None)
            }
            Err(e) => (RunOutcome::Failed, Some(e.to_string()), None),
        };
        self.finish(outcome, error, text).await;
        self.inner.wake.notify_one();
    }

    /// Renews the lease every third of its TTL; returns when it is no longer ours.
    async fn renew(&self) {
        let every = (self.inner.settings.lease_ttl / 3).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            let until = self
                .inner
                .clock
                .now_ms()
                .saturating_add(self.inner.settings.lease_ttl_ms());
            let owner = self.inner.owner.clone();
            let renewed = self
                .inner
                .store
                .update_state(&self.job.id, |s| {
                    let l = s.lease.as_ref()?;
                    (l.owner == owner && l.scheduled_ms == self.scheduled_ms).then(|| {
                        let mut new = s.clone();
                        if let Some(l) = new.lease.as_mut() {
                            l.until_ms = until;
                        }
                        (new, ())
                    })
                })
                .await;
            if !matches!(renewed, Ok(Some(()))) {
                // Lost (or the job is gone): keep waiting for the outcome without a lease.
                std::future::pending::<()>().await;
            }
        }
    }
}
