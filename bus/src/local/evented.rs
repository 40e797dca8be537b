//! A task store that announces what it records: the bus's own task events come from here.

use super::log::EventLog;
use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::events::TaskEventKind;
use crate::store::{Completion, TaskStore};
use crate::task::{Admission, Outcome, TaskRecord};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Wraps a store: a first admission emits `Queued`, a start `Started`, a progress mark
/// `Progress`, and the recorded outcome the one `Terminal` event.
pub(crate) struct EventedStore {
    inner: Arc<dyn TaskStore>,
    log: Arc<EventLog>,
}

impl EventedStore {
    /// `inner`, its changes told to `log`.
    pub(crate) fn new(inner: Arc<dyn TaskStore>, log: Arc<EventLog>) -> Self {
        Self { inner, log }
    }

    /// True when every outcome `inner` holds came through here, so the log has heard of each (or
    /// will, as soon as its recording returns); false when one was asked of `inner` directly
    /// (past the log, which then never hears of it) or `inner` does not count them. Only when
    /// false may the store hold an outcome the log is still waiting for.
    pub(crate) fn heard_every_outcome(&self) -> bool {
        self.inner.unannounced_outcomes() == Some(0)
    }
}

#[async_trait]
impl TaskStore for EventedStore {
    fn window(&self) -> Duration {
        self.inner.window()
    }

    async fn admit(&self, env: Envelope) -> Result<Admission, BusError> {
        let fresh_id = env.id;
        let admission = self.inner.admit(env).await?;
        if !admission.duplicate {
            if admission.task.task_id != fresh_id {
                // An explicit retry of an ended task: its events start over.
                self.log.forget(admission.task.task_id);
            }
            self.log.append_for(&admission.task, TaskEventKind::Queued);
        }
        Ok(admission)
    }

    async fn attach(&self, env: &Envelope) -> Result<Option<Admission>, BusError> {
        self.inner.attach(env).await
    }

    async fn start(
        &self,
        request_id: &RequestId,
        attempt: u32,
    ) -> Result<Option<TaskRecord>, BusError> {
        let started = self.inner.start(request_id, attempt).await?;
        if let Some(record) = &started {
            self.log
                .append_for(record, TaskEventKind::Started { attempt });
        }
        Ok(started)
    }

    async fn progress(
        &self,
        request_id: &RequestId,
        note: serde_json::Value,
    ) -> Result<Option<TaskRecord>, BusError> {
        let marked = self.inner.progress(request_id, note.clone()).await?;
        if let Some(record) = &marked {
            self.log
                .append_for(record, TaskEventKind::Progress { note });
        }
        Ok(marked)
    }

    async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        // Recorded and announced as one step: a caller that stops waiting in between must not
        // leave an ended task whose terminal event never comes (waiters would wait on).
        let (inner, log, request_id) = (self.inner.clone(), self.log.clone(), request_id.clone());
        crate::backend::run_to_end(async move {
            let forgotten = log.forgotten();
            let done = inner.complete_announced(&request_id, outcome).await?;
            // A repost may have retried the task while this outcome waited for its flush, and
            // started its events over: then the end goes in only if it is still the task's.
            if done.recorded
                && (log.forgotten() == forgotten
                    || inner.lookup(&request_id).await?.as_ref() == Some(&done.task))
            {
                log.append_end(&done.task);
            }
            Ok(done)
        })
        .await
    }

    async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.inner.requeue(request_id).await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.inner.lookup(request_id).await
    }

    async fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        self.inner.by_task_id(task_id).await
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.inner.unfinished().await
    }

    async fn list(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.inner.list().await
    }

    async fn expire(&self) -> Result<usize, BusError> {
        self.inner.expire().await
    }
}
