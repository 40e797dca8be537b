//! The task store behind a link check: while the server is out of reach every call fails at
//! once, naming it, instead of waiting for a request timeout (and maybe landing late, after the
//! caller was told it failed).

use super::link::Link;
use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::store::{Completion, TaskStore};
use crate::task::{Admission, Outcome, TaskRecord};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// A task store used only while the link is up.
pub(super) struct LinkGuarded {
    pub(super) inner: Arc<dyn TaskStore>,
    pub(super) link: Arc<Link>,
    pub(super) url: String,
}

impl LinkGuarded {
    fn up(&self) -> Result<(), BusError> {
        if self.link.is_connected() {
            return Ok(());
        }
        Err(BusError::transport(
            format!("NATS at {}", self.url),
            "not connected (reconnecting with backoff); try again",
        ))
    }
}

#[async_trait]
impl TaskStore for LinkGuarded {
    fn window(&self) -> Duration {
        self.inner.window()
    }

    async fn admit(&self, env: Envelope) -> Result<Admission, BusError> {
        self.up()?;
        self.inner.admit(env).await
    }

    async fn attach(&self, env: &Envelope) -> Result<Option<Admission>, BusError> {
        self.up()?;
        self.inner.attach(env).await
    }

    async fn start(
        &self,
        request_id: &RequestId,
        attempt: u32,
    ) -> Result<Option<TaskRecord>, BusError> {
        self.up()?;
        self.inner.start(request_id, attempt).await
    }

    async fn progress(
        &self,
        request_id: &RequestId,
        note: serde_json::Value,
    ) -> Result<Option<TaskRecord>, BusError> {
        self.up()?;
        self.inner.progress(request_id, note).await
    }

    async fn complete(
        &self,
        request_id: &RequestId,
        outcome: Outcome,
    ) -> Result<Completion, BusError> {
        self.up()?;
        self.inner.complete(request_id, outcome).await
    }

    async fn requeue(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.up()?;
        self.inner.requeue(request_id).await
    }

    async fn lookup(&self, request_id: &RequestId) -> Result<Option<TaskRecord>, BusError> {
        self.up()?;
        self.inner.lookup(request_id).await
    }

    async fn by_task_id(&self, task_id: Uuid) -> Result<Option<TaskRecord>, BusError> {
        self.up()?;
        self.inner.by_task_id(task_id).await
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.up()?;
        self.inner.unfinished().await
    }

    async fn list(&self) -> Result<Vec<TaskRecord>, BusError> {
        self.up()?;
        self.inner.list().await
    }

    async fn expire(&self) -> Result<usize, BusError> {
        self.up()?;
        self.inner.expire().await
    }
}
