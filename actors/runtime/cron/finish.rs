//! The end of a run: state (lease, failures, backoff), history, one-shot end, announce, event.

use super::event::{CronEvent, CronEventKind};
use super::fire::{FireKind, NO_REPLY, Run};
use super::job::{DeliveryMode, Job, PayloadKind};
use super::schedule::Compiled;
use super::state::{RunOutcome, RunRecord, backoff_ms};
use bus::{Envelope, Topic};
use serde_json::json;

impl Run {
    /// Records how the run ended and lets go of its lease.
    pub(crate) async fn finish(
        &self,
        outcome: RunOutcome,
        error: Option<String>,
        text: Option<String>,
    ) {
        let inner = &self.inner;
        let ended = inner.clock.now_ms();
        let job = &self.job;
        let scheduled = self.kind == FireKind::Scheduled;
        let recurring = !job.schedule.is_one_shot();
        let compiled = Compiled::new(&job.schedule, job.created_at).ok();
        let owner = inner.owner.clone();
        let updated = inner
            .store
            .update_state(&job.id, |s| {
                let l = s.lease.as_ref()?;
                if l.owner != owner || l.scheduled_ms != self.scheduled_ms {
                    return None;
                }
                let mut new = s.clone();
                new.lease = None;
                new.last_outcome = Some(outcome);
                if scheduled && recurring {
                    if outcome == RunOutcome::Succeeded {
                        new.failures = 0;
                        new.backoff_until_ms = None;
                    } else if outcome.is_failure() {
                        new.failures = new.failures.saturating_add(1);
                        let until = ended.saturating_add(backoff_ms(new.failures));
                        new.backoff_until_ms = Some(until);
                        if new.next_fire_ms.is_some_and(|n| n < until) {
                            new.next_fire_ms = compiled
                                .as_ref()
                                .and_then(|c| c.next_after(until.saturating_sub(1)));
                        }
                    }
                }
                Some((new, ()))
            })
            .await;
        if let Err(e) = updated {
            tracing::warn!(job = %job.id, error = %e, "cron: run state not updated");
        }
        let run = RunRecord {
            job_id: job.id.clone(),
            scheduled_ms: self.scheduled_ms,
            started_ms: self.started,
            ended_ms: ended,
            outcome,
            task_id: Some(self.task_id),
            error,
        };
        if let Err(e) = inner.store.push_run(&run).await {
            tracing::warn!(job = %job.id, error = %e, "cron: run not recorded");
        }
        if scheduled && !recurring {
            self.end_one_shot().await;
        }
        if outcome == RunOutcome::Succeeded {
            if let Some(text) = &text {
                self.announce(job, text).await;
            }
        }
        inner
            .publish(CronEvent {
                job_id: job.id.clone(),
                kind: CronEventKind::Finished,
                scheduled_ms: self.scheduled_ms,
                task_id: Some(self.task_id),
                outcome: Some(outcome),
                text,
            })
            .await;
    }

    /// A one-shot job that ran is disabled (kept for its history), or deleted.
    async fn end_one_shot(&self) {
        let store = &self.inner.store;
        let id = &self.job.id;
        let done = if self.job.delete_after_run {
            store.remove(id).await.map(|_| ())
        } else {
            match store.job(id).await {
                Ok(Some(mut job)) => {
                    job.enabled = false;
                    job.updated_at = self.inner.clock.now_ms();
                    store.put_job(&job).await
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = done {
            tracing::warn!(job = %id, error = %e, "cron: one-shot job not ended");
        }
    }

    /// Publishes the final text to `channel.<channel>.out`, unless it is `NO_REPLY`.
    async fn announce(&self, job: &Job, text: &str) {
        if job.delivery.mode != DeliveryMode::Announce || text.trim() == NO_REPLY {
            return;
        }
        if job.payload.kind == PayloadKind::Heartbeat && super::heartbeat::is_ack(text) {
            return;
        }
        let Some(channel) = &job.delivery.channel else {
            return;
        };
        if let Some(outbox) = &self.inner.settings.outbox {
            let msg = crate::outbox::OutboundMessage {
                to: job.delivery.to.clone(),
                text: text.to_string(),
                task_id: Some(self.task_id),
                job: Some(job.id.to_string()),
            };
            outbox
                .hand_over(self.inner.bus.as_ref(), &self.inner.clock, channel, msg)
                .await;
            return;
        }
        let topic = match Topic::parse(&format!("channel.{channel}.out")) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "cron: announce topic");
                return;
            }
        };
        // The shape of `crate::outbox::OutboundMessage`; the task's events record the delivery.
        let payload =
            json!({ "to": job.delivery.to, "text": text, "job": job.id, "task_id": self.task_id });
        if let Err(e) = self
            .inner
            .bus
            .publish(Envelope::event(topic, payload).from("cron"))
            .await
        {
            tracing::warn!(job = %job.id, error = %e, "cron: announce not published");
        }
    }
}
