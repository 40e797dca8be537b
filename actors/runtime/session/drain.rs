//! The graceful drain: on shutdown no run starts any more, running turns get a grace period to
//! finish, and what is still running then is stopped and left for the next start.

use bus::Delivery;
use dashmap::DashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// Shared by every session: which runs are in flight, and whether the daemon is draining.
#[derive(Clone, Default)]
pub struct Drain {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    draining: AtomicBool,
    runs: DashMap<Uuid, InFlight>,
    changed: Notify,
}

struct InFlight {
    delivery: Delivery,
    abort: tokio::task::AbortHandle,
}

/// What a drain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Runs that finished inside the grace period.
    pub finished: usize,
    /// Runs stopped when the grace period ran out; their tasks run again on the next start.
    pub stopped: usize,
}

impl Drain {
    /// True once a shutdown began: runs that have not started leave their task for the next start.
    pub(crate) fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Records a run that a session spawned.
    pub(crate) fn track(&self, delivery: &Delivery, abort: tokio::task::AbortHandle) {
        self.inner.runs.insert(
            delivery.envelope().id,
            InFlight {
                delivery: delivery.clone(),
                abort,
            },
        );
    }

    /// The run of `task_id` has left its session.
    pub(crate) fn untrack(&self, task_id: Uuid) {
        if self.inner.runs.remove(&task_id).is_some() {
            self.inner.changed.notify_waiters();
        }
    }

    /// Runs in flight now.
    pub fn in_flight(&self) -> usize {
        self.inner.runs.len()
    }

    /// Starts draining, waits up to `grace` for the runs in flight to end, then stops the rest:
    /// their deliveries are released unsettled (the store keeps them for the next start) before
    /// their tasks are aborted, so nothing records an outcome for them.
    pub async fn drain(&self, grace: Duration) -> DrainReport {
        self.inner.draining.store(true, Ordering::SeqCst);
        let before = self.in_flight();
        #[allow(
            clippy::disallowed_methods,
            reason = "the shutdown grace is real time: the process stops after it whatever the clock says"
        )]
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let changed = self.inner.changed.notified();
            if self.inner.runs.is_empty() {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        let mut stopped = 0;
        let ids: Vec<Uuid> = self.inner.runs.iter().map(|e| *e.key()).collect();
        for id in ids {
            if let Some((_, run)) = self.inner.runs.remove(&id) {
                run.delivery.release();
                run.abort.abort();
                stopped += 1;
            }
        }
        DrainReport {
            finished: before.saturating_sub(stopped),
            stopped,
        }
    }
}
