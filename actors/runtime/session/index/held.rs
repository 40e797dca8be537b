//! Counts of finished runs the cluster's rows could not take (their store unreachable: NATS
//! away), held in order and recorded once it is back. At most [`MAX_HELD`] are held (past it a
//! count is dropped, logged); a task of its own tries the oldest again with a backoff of
//! [`FIRST_RETRY`] doubling to [`MAX_RETRY`], and drops one whose row is gone (the session was
//! deleted meanwhile). Held counts live in memory: a node stopped before the store is back
//! loses them (logged when they were held).

use super::{FinishedRun, IndexRows};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counts held at most.
pub(super) const MAX_HELD: usize = 10_000;
/// The first pause before a held count is tried again.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest pause between two tries.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// The counts held, oldest first, and whether a task is recording them.
#[derive(Default)]
pub(super) struct Held {
    queue: Mutex<(VecDeque<(String, FinishedRun)>, bool)>,
}

impl Held {
    /// Whether counts are held now (a new one must then queue behind them, to keep order).
    pub(super) fn any(&self) -> bool {
        self.queue.lock().map(|q| !q.0.is_empty()).unwrap_or(false)
    }

    /// Holds the count of `key` and makes sure a task records it into `rows`; false when the
    /// bound was reached and it was dropped.
    pub(super) fn hold(
        self: &Arc<Self>,
        rows: &Arc<dyn IndexRows>,
        key: &str,
        run: FinishedRun,
    ) -> bool {
        let Ok(mut q) = self.queue.lock() else {
            return false;
        };
        if q.0.len() >= MAX_HELD {
            return false;
        }
        q.0.push_back((key.to_string(), run));
        if !q.1 {
            q.1 = true;
            tokio::spawn(record(self.clone(), rows.clone()));
        }
        true
    }

    /// The oldest count held; `None` (and the task marked gone) when there is none.
    fn front(&self) -> Option<(String, FinishedRun)> {
        let mut q = self.queue.lock().ok()?;
        let front = q.0.front().cloned();
        if front.is_none() {
            q.1 = false;
        }
        front
    }

    fn pop(&self) {
        if let Ok(mut q) = self.queue.lock() {
            q.0.pop_front();
        }
    }
}

/// Records the held counts in order, waiting out the store's absence.
async fn record(held: Arc<Held>, rows: Arc<dyn IndexRows>) {
    let mut pause = FIRST_RETRY;
    while let Some((key, run)) = held.front() {
        match rows.record_run(&key, run).await {
            Ok(()) => {
                tracing::info!(session = %key, "Held session count recorded.");
                held.pop();
                pause = FIRST_RETRY;
                continue;
            }
            Err(e) => {
                if let Ok(None) = rows.get(&key).await {
                    tracing::warn!(session = %key, "Held session count dropped: the session was deleted meanwhile.");
                    held.pop();
                    continue;
                }
                tracing::debug!(session = %key, error = %e, "Held session count not recorded yet.");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_RETRY);
    }
}
