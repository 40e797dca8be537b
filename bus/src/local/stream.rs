//! One task's events for a reader: the replay, then live ones, deduplicated by `seq`.

use super::evented::EventedStore;
use super::log::{EndWatch, EventLog, Header, synthesised};
use crate::backend::{Delivery, Subscription};
use crate::error::BusError;
use crate::events::{TaskEvent, TaskEventKind, TaskEventStream};
use crate::store::TaskStore;
use futures::StreamExt as _;
use std::collections::VecDeque;
use std::sync::Arc;
use uuid::Uuid;

/// The events kept or synthesised for a task, read after `sub` was subscribed to its live ones.
/// A record that ended without the log hearing of it (an outcome recorded on the store directly)
/// gets its terminal event now.
pub(crate) async fn replay(
    log: &EventLog,
    store: &EventedStore,
    task_id: Uuid,
) -> Result<Vec<TaskEvent>, BusError> {
    let Some(snapshot) = log.snapshot(task_id) else {
        let record = store
            .by_task_id(task_id)
            .await?
            .ok_or_else(|| BusError::UnknownTask(task_id.to_string()))?;
        return Ok(synthesised(&record));
    };
    if snapshot.terminal || !catch_up(log, store, &snapshot.header).await? {
        return Ok(snapshot.events);
    }
    Ok(log
        .snapshot(task_id)
        .map(|s| s.events)
        .unwrap_or(snapshot.events))
}

/// Whether the task has ended, asked after a subscription to its live events: the log's word
/// when it has its terminal event, else the store's. An outcome the log never heard of gets its
/// terminal event now, as a replay would give it.
pub(crate) async fn has_ended(
    log: &EventLog,
    store: &EventedStore,
    task_id: Uuid,
) -> Result<bool, BusError> {
    match log.ended(task_id) {
        Some((_, true)) => Ok(true),
        Some((header, false)) => catch_up(log, store, &header).await,
        None => Ok(store
            .by_task_id(task_id)
            .await?
            .ok_or_else(|| BusError::UnknownTask(task_id.to_string()))?
            .state
            .is_terminal()),
    }
}

/// Appends the terminal event of a task the log holds as running when the store has its outcome
/// (recorded on the store directly); true when it did. No read when every outcome the store was
/// asked for came through the log's store (the usual case: then there is none to catch up on).
async fn catch_up(log: &EventLog, store: &EventedStore, header: &Header) -> Result<bool, BusError> {
    if store.heard_every_outcome() {
        return Ok(false);
    }
    // By request id, known from the log: one read (by task id is two).
    let ended = store
        .lookup(&header.request_id)
        .await?
        .filter(|r| r.task_id == header.task_id && r.state.is_terminal())
        .and_then(|r| r.outcome);
    let Some(outcome) = ended else {
        return Ok(false);
    };
    log.append(header, TaskEventKind::Terminal { outcome });
    Ok(true)
}

struct Reader {
    pending: VecDeque<TaskEvent>,
    sub: Subscription,
    log: Arc<EventLog>,
    task_id: Uuid,
    next: u64,
    done: bool,
    /// Resolves once the task's terminal event is in the log; `None` once it has.
    end: Option<EndWatch>,
    /// The task ended but its log no longer held the end when the reader looked (evicted):
    /// the stream ends after what it holds.
    end_gone: bool,
}

/// What the reader waited for.
enum Woken {
    Live(Option<Delivery>),
    Ended,
}

/// The stream: `replayed` first, then what arrives on `sub`; an event already seen (by `seq`)
/// is skipped, and a gap in the live events (a lagging reader) is filled from the log. A reader
/// that lagged when the task ended (its terminal event dropped for it, with nothing after to show
/// the gap) takes the rest from the log once the end is in it.
pub(crate) fn stream(
    replayed: Vec<TaskEvent>,
    sub: Subscription,
    log: Arc<EventLog>,
    task_id: Uuid,
) -> TaskEventStream {
    let end = Some(log.on_end(task_id));
    let reader = Reader {
        pending: replayed.into(),
        sub,
        log,
        task_id,
        next: 1,
        done: false,
        end,
        end_gone: false,
    };
    let events = futures::stream::unfold(reader, |mut r| async move {
        loop {
            // Replayed events after the terminal one (the reply's delivery) are still read out.
            if r.done && r.pending.is_empty() {
                return None;
            }
            if let Some(ev) = r.pending.pop_front() {
                if ev.seq < r.next {
                    continue;
                }
                r.next = ev.seq + 1;
                r.done |= ev.is_terminal();
                return Some((ev, r));
            }
            if r.end_gone {
                return None;
            }
            let woken = match r.end.as_mut() {
                Some(end) => tokio::select! {
                    live = r.sub.next() => Woken::Live(live),
                    _ = end.ended() => Woken::Ended,
                },
                None => Woken::Live(r.sub.next().await),
            };
            let delivery = match woken {
                Woken::Live(live) => live?,
                Woken::Ended => {
                    // What the reader has not seen, the end included, from the log.
                    r.end = None;
                    r.pending.extend(r.log.range(r.task_id, r.next, u64::MAX));
                    r.end_gone = !r.pending.iter().any(TaskEvent::is_terminal);
                    continue;
                }
            };
            let ev = match TaskEvent::from_envelope(delivery.envelope()) {
                Ok(ev) if ev.task_id == r.task_id => ev,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "Unreadable task event skipped.");
                    continue;
                }
            };
            if ev.seq < r.next {
                continue;
            }
            if ev.seq > r.next {
                r.pending.extend(r.log.range(r.task_id, r.next, ev.seq));
            }
            r.pending.push_back(ev);
        }
    });
    TaskEventStream::new(events.boxed())
}
