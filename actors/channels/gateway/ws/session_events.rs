//! `session.message` events, as OpenClaw sends them: each message a run commits to its
//! session's transcript, in transcript order, once per connection. The user's message goes out
//! when the run first calls the model (it is in the transcript by then), the rest (tool calls
//! and results, the answer) when the run ends, before its `chat` `final`. A client that sent the
//! message sees its own input confirmed (its `idempotencyKey`) above the answer.
//!
//! Every connection sends the same events, so the transcript is read once per task event for
//! all of them ([`SharedReads`]), not once per connection.

use super::frames::EventName;
use super::openclaw::sessions::{numbered, row, session_message};
use super::outbox::{Closed, Outbox};
use crate::gateway::api::ApiState;
use crate::gateway::sessions;
use bus::events::TaskEvent;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::OnceCell;
use uuid::Uuid;

/// Task events whose transcript read is remembered; past it the oldest is forgotten (a
/// connection that lags that far behind reads again).
const SHARED_READS: usize = 64;

/// Where a read was made for: the session, the task and the event's `seq`.
type ReadAt = (String, Uuid, u64);

/// One read of a session's transcript (`None`: it could not be read).
type Read = Arc<OnceCell<Option<Arc<Value>>>>;

/// The transcript reads of the latest task events, shared by the connections: the first
/// connection to handle an event reads, the others wait for that read and take it. Any read made
/// after the event holds every message the event stands for.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedReads(Arc<Mutex<VecDeque<(ReadAt, Read)>>>);

impl SharedReads {
    /// The read made for `at`, made now by `read` if no connection made it yet.
    async fn get_or_read<F>(&self, at: ReadAt, read: F) -> Option<Arc<Value>>
    where
        F: Future<Output = Option<Value>>,
    {
        let cell = {
            let mut reads = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            match reads.iter().find(|(k, _)| *k == at) {
                Some((_, cell)) => cell.clone(),
                None => {
                    if reads.len() >= SHARED_READS {
                        reads.pop_front();
                    }
                    let cell = Read::default();
                    reads.push_back((at, cell.clone()));
                    cell
                }
            }
        };
        cell.get_or_init(|| async { read.await.map(Arc::new) })
            .await
            .clone()
    }
}

/// What the feed knows of the run an event belongs to.
pub(super) struct RunSession<'a> {
    /// The run's session key.
    pub(super) key: &'a str,
    /// Its agent.
    pub(super) agent: &'a str,
    /// Whether the run is still going (no terminal event yet).
    pub(super) active: bool,
}

/// Sends the messages of `e`'s request that the transcript holds beyond position `*sent`, and
/// moves `*sent` on. A transcript that cannot be read sends nothing (logged at debug).
pub(super) async fn publish(
    state: &ApiState,
    out: &Outbox,
    e: &TaskEvent,
    run: &RunSession<'_>,
    sent: &mut u64,
) -> Result<(), Closed> {
    let at = (run.key.to_string(), e.task_id, e.seq);
    let read = async {
        match sessions::transcript(state, run.key).await {
            Ok(shown) => Some(shown),
            Err(f) => {
                tracing::debug!(session = run.key, error = %f.message, "No transcript for session.message.");
                None
            }
        }
    };
    let Some(shown) = state.ws.reads().get_or_read(at, read).await else {
        return Ok(());
    };
    let entries = shown["entries"].as_array().map_or(&[][..], Vec::as_slice);
    let fresh: Vec<_> = numbered(entries)
        .into_iter()
        .filter(|m| m.seq > *sent && m.request_id.as_deref() == Some(e.request_id.as_str()))
        .collect();
    if fresh.is_empty() {
        return Ok(());
    }
    let found = sessions::row(state, run.key)
        .await
        .ok()
        .flatten()
        .map(|r| row(&r));
    let run_id = e.task_id.to_string();
    for m in &fresh {
        *sent = m.seq;
        let payload = session_message(run.key, run.agent, &run_id, m, found.clone(), run.active);
        out.event(EventName::SessionMessage, payload)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn one_read_per_event_is_shared_and_the_oldest_is_forgotten_past_the_bound() {
        let reads = SharedReads::default();
        let made = AtomicUsize::new(0);
        let task = Uuid::now_v7();
        let read = |n: u64| {
            let made = &made;
            async move {
                made.fetch_add(1, Ordering::SeqCst);
                Some(serde_json::json!({ "read": n }))
            }
        };
        let at = |seq| ("agent:a:main".to_string(), task, seq);
        let first = reads.get_or_read(at(1), read(1)).await;
        let again = reads.get_or_read(at(1), read(2)).await;
        assert_eq!(
            made.load(Ordering::SeqCst),
            1,
            "the second connection takes the first read"
        );
        assert_eq!(first, again);
        reads.get_or_read(at(2), read(3)).await;
        assert_eq!(made.load(Ordering::SeqCst), 2, "another event is read anew");
        for seq in 3..=(SHARED_READS as u64 + 1) {
            reads.get_or_read(at(seq), read(seq)).await;
        }
        let made_before = made.load(Ordering::SeqCst);
        reads.get_or_read(at(1), read(99)).await;
        assert_eq!(
            made.load(Ordering::SeqCst),
            made_before + 1,
            "a read past the bound is forgotten and made again"
        );
    }
}
