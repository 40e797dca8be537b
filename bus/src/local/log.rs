//! The embedded backend's task event log: a bounded in-memory log per task, published on the bus.
//!
//! Appending assigns the next `seq` and publishes the event on `events.task.<task_id>` and
//! `events.<work topic>` while the log is locked, so every subscriber sees a task's events in
//! order. The log answers replays; after a restart (or eviction) replays are synthesised from the
//! task store instead.

use crate::clock::Clock;
use crate::envelope::{Envelope, RequestId};
use crate::events::{TaskEvent, TaskEventKind};
use crate::task::TaskRecord;
use crate::topic::Topic;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;

/// Events kept per task; past it deltas are merged into the last kept delta and other
/// non-terminal events are left out of the log (they are still published). The terminal event
/// is always kept.
pub const MAX_EVENTS_PER_TASK: usize = 4096;
/// Bytes of streamed text (deltas) kept per task for replays; past it deltas are still
/// published live but left out of the log (the final text is in the task's outcome).
pub(super) const MAX_DELTA_BYTES_PER_TASK: usize = 256 * 1024;
/// Bytes of streamed text kept over every log together; past it the logs of ended tasks go,
/// oldest first.
pub(super) const MAX_DELTA_BYTES: usize = 32 * 1024 * 1024;
/// Task logs kept; past it the logs of ended tasks go first (oldest first), then the events of
/// running ones (their sequence counters stay).
pub const MAX_TASK_LOGS: usize = 10_000;

/// Which task an event belongs to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    pub task_id: Uuid,
    pub request_id: RequestId,
    pub topic: Topic,
}

impl Header {
    pub(crate) fn of(record: &TaskRecord) -> Self {
        Self {
            task_id: record.task_id,
            request_id: record.request_id.clone(),
            topic: record.envelope.topic.clone(),
        }
    }

    /// The header of a task delivery (a delivered envelope keeps the task's id).
    pub(crate) fn of_delivery(env: &Envelope) -> Self {
        Self {
            task_id: env.id,
            request_id: env.request_id.clone(),
            topic: env.topic.clone(),
        }
    }
}

struct TaskLog {
    header: Header,
    next_seq: u64,
    events: Vec<TaskEvent>,
    terminal: bool,
    /// Creation order, for eviction.
    born: u64,
    /// Bytes of delta text kept.
    bytes: usize,
}

#[derive(Default)]
struct State {
    logs: HashMap<Uuid, TaskLog>,
    born: u64,
    /// Bytes of delta text kept over every log.
    bytes: usize,
}

/// Where the log publishes each event it appends, in append order (called under the log's lock).
pub(crate) type Sink = Box<dyn Fn(Envelope) + Send + Sync>;

/// Every task's recent events.
pub(crate) struct EventLog {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    sink: Sink,
    max_events: usize,
    max_logs: usize,
}

/// What the log holds for a task.
pub(crate) struct Snapshot {
    pub header: Header,
    pub events: Vec<TaskEvent>,
    pub terminal: bool,
}

impl EventLog {
    pub(crate) fn new(clock: Arc<dyn Clock>, sink: Sink) -> Self {
        Self::with_caps(clock, sink, MAX_EVENTS_PER_TASK, MAX_TASK_LOGS)
    }

    pub(crate) fn with_caps(
        clock: Arc<dyn Clock>,
        sink: Sink,
        max_events: usize,
        max_logs: usize,
    ) -> Self {
        Self {
            state: Mutex::new(State::default()),
            clock,
            sink,
            max_events: max_events.max(2),
            max_logs: max_logs.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half-changed in a harmful way.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends and publishes an event; `None` when the task already had its terminal event.
    /// A task first seen with anything but `Queued` (after a restart) starts with a replayed
    /// `Queued` as seq 1, which is not published again.
    pub(crate) fn append(&self, header: &Header, kind: TaskEventKind) -> Option<TaskEvent> {
        let now = self.clock.now_ms();
        let mut state = self.lock();
        if !state.logs.contains_key(&header.task_id) {
            self.make_room(&mut state);
            state.born += 1;
            let mut log = TaskLog {
                header: header.clone(),
                next_seq: 1,
                events: Vec::new(),
                terminal: false,
                born: state.born,
                bytes: 0,
            };
            if kind != TaskEventKind::Queued {
                log.events
                    .push(event(header, 1, now, TaskEventKind::Queued));
                log.next_seq = 2;
            }
            state.logs.insert(header.task_id, log);
        }
        let log = state.logs.get_mut(&header.task_id)?;
        if log.terminal && !kind.follows_outcome() {
            return None;
        }
        let ev = event(&log.header, log.next_seq, now, kind);
        log.next_seq += 1;
        log.terminal |= ev.is_terminal();
        let kept = keep(log, ev.clone(), self.max_events);
        state.bytes += kept;
        if state.bytes > MAX_DELTA_BYTES {
            shed_bytes(&mut state);
        }
        let lifecycle = matches!(
            ev.event,
            TaskEventKind::Queued | TaskEventKind::Terminal { .. }
        )
        .then(Topic::task_lifecycle);
        let topics = [Topic::task_events(ev.task_id), Topic::events_for(&ev.topic)];
        for topic in topics.into_iter().chain(lifecycle) {
            match ev.to_envelope(topic) {
                Ok(env) => (self.sink)(env),
                Err(e) => tracing::warn!(error = %e, "Task event not published."),
            }
        }
        Some(ev)
    }

    /// Starts the log of an ended task that has none (after a restart or an eviction) from its
    /// synthesised events, so an event that follows the outcome comes after them.
    pub(crate) fn seed(&self, record: &TaskRecord) -> Header {
        let header = Header::of(record);
        let mut state = self.lock();
        if !state.logs.contains_key(&record.task_id) {
            self.make_room(&mut state);
            state.born += 1;
            let events = synthesised(record);
            let log = TaskLog {
                header: header.clone(),
                next_seq: events.last().map_or(1, |e| e.seq + 1),
                terminal: events.iter().any(TaskEvent::is_terminal),
                events,
                born: state.born,
                bytes: 0,
            };
            state.logs.insert(record.task_id, log);
        }
        header
    }

    /// Drops the task's log (an explicit retry starts its events over).
    pub(crate) fn forget(&self, task_id: Uuid) {
        let mut state = self.lock();
        if let Some(gone) = state.logs.remove(&task_id) {
            state.bytes = state.bytes.saturating_sub(gone.bytes);
        }
    }

    /// The task's header, when its log is kept.
    pub(crate) fn header(&self, task_id: Uuid) -> Option<Header> {
        self.lock().logs.get(&task_id).map(|l| l.header.clone())
    }

    /// The task's kept events.
    pub(crate) fn snapshot(&self, task_id: Uuid) -> Option<Snapshot> {
        self.lock().logs.get(&task_id).map(|l| Snapshot {
            header: l.header.clone(),
            events: l.events.clone(),
            terminal: l.terminal,
        })
    }

    /// The kept events with `from <= seq < to`.
    pub(crate) fn range(&self, task_id: Uuid, from: u64, to: u64) -> Vec<TaskEvent> {
        self.lock()
            .logs
            .get(&task_id)
            .map(|l| {
                l.events
                    .iter()
                    .filter(|e| e.seq >= from && e.seq < to)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Evicts before a new log is added: ended tasks first (oldest first) down to 90% of the
    /// cap, then, if that is not enough, the events (not the counters) of the oldest running ones.
    fn make_room(&self, state: &mut State) {
        if state.logs.len() < self.max_logs {
            return;
        }
        let target = self.max_logs - self.max_logs / 10 - 1;
        let mut ended: Vec<(u64, Uuid)> = state
            .logs
            .values()
            .filter(|l| l.terminal)
            .map(|l| (l.born, l.header.task_id))
            .collect();
        ended.sort_unstable();
        let excess = state.logs.len().saturating_sub(target);
        for (_, id) in ended.into_iter().take(excess) {
            if let Some(gone) = state.logs.remove(&id) {
                state.bytes = state.bytes.saturating_sub(gone.bytes);
            }
        }
        if state.logs.len() >= self.max_logs {
            let mut running: Vec<(u64, Uuid)> = state
                .logs
                .values()
                .filter(|l| !l.events.is_empty())
                .map(|l| (l.born, l.header.task_id))
                .collect();
            running.sort_unstable();
            for (_, id) in running.into_iter().take(self.max_logs / 10 + 1) {
                if let Some(l) = state.logs.get_mut(&id) {
                    l.events = Vec::new();
                    state.bytes = state.bytes.saturating_sub(l.bytes);
                    l.bytes = 0;
                }
            }
        }
    }
}

fn event(header: &Header, seq: u64, ts_ms: u64, kind: TaskEventKind) -> TaskEvent {
    TaskEvent {
        task_id: header.task_id,
        request_id: header.request_id.clone(),
        topic: header.topic.clone(),
        seq,
        ts_ms,
        event: kind,
    }
}

/// Drops the logs of ended tasks, oldest first, until the kept text is under 90% of
/// [`MAX_DELTA_BYTES`].
fn shed_bytes(state: &mut State) {
    let mut ended: Vec<(u64, Uuid)> = state
        .logs
        .values()
        .filter(|l| l.terminal && l.bytes > 0)
        .map(|l| (l.born, l.header.task_id))
        .collect();
    ended.sort_unstable();
    for (_, id) in ended {
        if state.bytes <= MAX_DELTA_BYTES / 10 * 9 {
            break;
        }
        if let Some(gone) = state.logs.remove(&id) {
            state.bytes = state.bytes.saturating_sub(gone.bytes);
        }
    }
}

/// Keeps `ev` in the log within `max` events and [`MAX_DELTA_BYTES_PER_TASK`] of text (the
/// terminal event always). Returns the delta bytes it kept.
fn keep(log: &mut TaskLog, ev: TaskEvent, max: usize) -> usize {
    let bytes = match &ev.event {
        TaskEventKind::Delta { text } => text.len(),
        _ => 0,
    };
    if bytes > 0 && log.bytes + bytes > MAX_DELTA_BYTES_PER_TASK {
        return 0;
    }
    if log.events.len() < max || ev.is_terminal() {
        log.events.push(ev);
        log.bytes += bytes;
        return bytes;
    }
    if let TaskEventKind::Delta { text } = &ev.event {
        if let Some(last) = log.events.last_mut() {
            if let TaskEventKind::Delta { text: kept } = &mut last.event {
                kept.push_str(text);
                last.seq = ev.seq;
                last.ts_ms = ev.ts_ms;
                log.bytes += bytes;
                return bytes;
            }
        }
    }
    0
}

/// Replays synthesised from a task record, when no log is kept for it: `Queued`, then the
/// terminal event when the record has an outcome.
pub(crate) fn synthesised(record: &TaskRecord) -> Vec<TaskEvent> {
    let header = Header::of(record);
    let mut out = vec![event(&header, 1, record.created_ms, TaskEventKind::Queued)];
    if let Some(outcome) = record
        .outcome
        .clone()
        .filter(|_| record.state.is_terminal())
    {
        out.push(event(
            &header,
            2,
            record.updated_ms,
            TaskEventKind::Terminal { outcome },
        ));
    }
    out
}
