//! The embedded backend's task event log: a bounded in-memory log per task, published on the bus.
//!
//! Appending assigns the next `seq` and publishes the event on `events.task.<task_id>` and
//! `events.<work topic>` while the log is locked, so every subscriber sees a task's events in
//! order. The log answers replays; after a restart (or eviction) replays are synthesised from the
//! task store instead.

use crate::clock::Clock;
use crate::envelope::{Envelope, RequestId};
use crate::events::{TaskEvent, TaskEventKind};
use crate::fast_map::FastMap;
use crate::local::listeners::Listeners;
use crate::task::{Outcome, TaskRecord};
use crate::topic::Topic;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;
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
/// Bytes the logs of every task may hold together by default (`[store] replay_log`): their
/// structures, headers and events, text and results included. Past it the logs of ended tasks
/// go first (oldest first, down to 90 %), then the events of running ones (their sequence
/// counters stay). Replays of a task whose log went are synthesised from the task store (its
/// terminal event, with the final text, is still there; its streamed deltas are not).
/// 1 MiB keeps the whole event history of about the last 1,500 short turns, or of about 45 turns
/// that streamed 200 short deltas each: what a watcher reconnecting within minutes needs. With
/// 4 MiB the daemon held 5–6 MiB more under load (`benches/memory.py --replay-log`).
pub const DEFAULT_REPLAY_BYTES: usize = 1024 * 1024;

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

/// An event as a log keeps it: the task's header is the log's, not copied into each event.
#[derive(Clone)]
struct Kept {
    seq: u64,
    ts_ms: u64,
    kind: TaskEventKind,
}

impl Kept {
    fn event(&self, header: &Header) -> TaskEvent {
        event(header, self.seq, self.ts_ms, self.kind.clone())
    }
}

struct TaskLog {
    header: Header,
    next_seq: u64,
    events: Vec<Kept>,
    terminal: bool,
    /// Creation order, for eviction.
    born: u64,
    /// Bytes of delta text kept.
    bytes: usize,
    /// What the log takes in memory, about (see [`log_weight`] and [`kind_weight`]).
    weight: usize,
}

#[derive(Default)]
struct State {
    logs: FastMap<Uuid, TaskLog>,
    /// Who waits for a task's terminal event ([`EventLog::on_end`]), by task.
    ends: FastMap<Uuid, Vec<oneshot::Sender<Ended>>>,
    born: u64,
    /// The logs holding their terminal event, by creation order (`born`): eviction takes the
    /// oldest first without sorting every log.
    ended: BTreeMap<u64, Uuid>,
    /// Bytes of delta text kept over every log.
    bytes: usize,
    /// The weight of every log together.
    weight: usize,
}

/// A wait for a task's terminal event ([`EventLog::on_end`]); dropped before it, it takes
/// itself out of the log (a task whose end was learnt from the store, or that never ends,
/// keeps no waiter).
pub(crate) struct EndWatch {
    rx: oneshot::Receiver<Ended>,
    log: Arc<EventLog>,
    task_id: Uuid,
}

impl EndWatch {
    /// Resolves once the terminal event is appended, with the ended record when the one who
    /// recorded the outcome handed it over ([`EventLog::append_end`]); an error when the log
    /// went first.
    pub(crate) async fn ended(&mut self) -> Result<Ended, oneshot::error::RecvError> {
        (&mut self.rx).await
    }
}

impl Drop for EndWatch {
    fn drop(&mut self) {
        self.rx.close();
        self.log.forget_gone_waiters(self.task_id);
    }
}

/// What a waiter for a task's end is told: the ended record, when the one who recorded the
/// outcome had it at hand (a waiter then needs no read of the store), else `None`.
pub(crate) type Ended = Option<TaskRecord>;

/// Tells the waiters of `task_id` it ended, each with its copy of `record` when there is one.
fn tell_ended(state: &mut State, task_id: Uuid, record: Option<&TaskRecord>) {
    for waiter in state.ends.remove(&task_id).into_iter().flatten() {
        // A waiter that gave up is fine to skip.
        let _ = waiter.send(record.cloned());
    }
}

/// Where the log publishes each event it appends, in append order (called under the log's lock).
pub(crate) type Sink = Box<dyn Fn(Envelope) + Send + Sync>;

/// Every task's recent events, within a budget of bytes.
pub(crate) struct EventLog {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    sink: Sink,
    /// Who listens on the broker the sink feeds; `None`: publish everything (the sink goes
    /// further than this process).
    listeners: Option<Arc<Listeners>>,
    max_events: usize,
    max_bytes: usize,
    /// How many logs [`EventLog::forget`] dropped (explicit retries), ever.
    forgotten: std::sync::atomic::AtomicU64,
}

/// What the log holds for a task.
pub(crate) struct Snapshot {
    pub header: Header,
    pub events: Vec<TaskEvent>,
    pub terminal: bool,
}

impl EventLog {
    pub(crate) fn new(clock: Arc<dyn Clock>, sink: Sink) -> Self {
        Self::with_caps(clock, sink, MAX_EVENTS_PER_TASK, DEFAULT_REPLAY_BYTES)
    }

    /// A log keeping at most `max_events` per task and about `max_bytes` over every task.
    pub(crate) fn with_caps(
        clock: Arc<dyn Clock>,
        sink: Sink,
        max_events: usize,
        max_bytes: usize,
    ) -> Self {
        Self {
            state: Mutex::new(State::default()),
            clock,
            sink,
            listeners: None,
            max_events: max_events.max(2),
            max_bytes: max_bytes.max(1),
            forgotten: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Publishes an event only on the topics some subscription of `listeners` would receive.
    pub(crate) fn only_for(mut self, listeners: Arc<Listeners>) -> Self {
        self.listeners = Some(listeners);
        self
    }

    /// Whether an event published on `topic` would reach anyone.
    fn wanted(&self, topic: &Topic) -> bool {
        self.listeners.as_ref().is_none_or(|l| l.wants(topic))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half-changed in a harmful way.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends and publishes an event, answering its `seq`; `None` when the task already had its
    /// terminal event.
    /// A task first seen with anything but `Queued` (after a restart) starts with a replayed
    /// `Queued` as seq 1, which is not published again.
    pub(crate) fn append(&self, header: &Header, kind: TaskEventKind) -> Option<u64> {
        self.append_with(header.task_id, || header.clone(), kind, None)
    }

    /// As [`EventLog::append`], for the task of `record` (whose header is made only when the
    /// log has none for it yet).
    pub(crate) fn append_for(&self, record: &TaskRecord, kind: TaskEventKind) -> Option<u64> {
        self.append_with(record.task_id, || Header::of(record), kind, None)
    }

    /// Appends the terminal event of `record`, ended with its outcome (none: nothing to append),
    /// handing the record to those who wait for the end ([`EventLog::on_end`]).
    pub(crate) fn append_end(&self, record: &TaskRecord) -> Option<u64> {
        let outcome = record.outcome.clone()?;
        let kind = TaskEventKind::Terminal { outcome };
        self.append_with(record.task_id, || Header::of(record), kind, Some(record))
    }

    fn append_with(
        &self,
        task_id: Uuid,
        header: impl FnOnce() -> Header,
        kind: TaskEventKind,
        ended: Option<&TaskRecord>,
    ) -> Option<u64> {
        let now = self.clock.now_ms();
        let mut guard = self.lock();
        let state = &mut *guard;
        if !state.logs.contains_key(&task_id) {
            state.born += 1;
            let header = header();
            let weight = log_weight(&header);
            let mut log = TaskLog {
                header,
                next_seq: 1,
                events: Vec::new(),
                terminal: false,
                born: state.born,
                bytes: 0,
                weight,
            };
            if kind != TaskEventKind::Queued {
                let queued = TaskEventKind::Queued;
                log.weight += kind_weight(&queued);
                log.events.push(Kept {
                    seq: 1,
                    ts_ms: now,
                    kind: queued,
                });
                log.next_seq = 2;
            }
            state.weight += log.weight;
            state.logs.insert(task_id, log);
        }
        let log = state.logs.get_mut(&task_id)?;
        if log.terminal && !kind.follows_outcome() {
            return None;
        }
        let seq = log.next_seq;
        log.next_seq += 1;
        let ends = kind.is_terminal();
        if ends && !log.terminal {
            log.terminal = true;
            state.ended.insert(log.born, task_id);
        }
        // Published first (under the lock all the same, so no reader sees one without the
        // other), then kept: the log takes the event's kind back, not a copy. With nobody
        // listening no event is made at all.
        let kind = if self.listeners.as_ref().is_some_and(|l| l.none()) {
            kind
        } else {
            let ev = event(&log.header, seq, now, kind);
            self.publish(&ev);
            ev.event
        };
        let kept = Kept {
            seq,
            ts_ms: now,
            kind,
        };
        let (text, weight) = keep(log, kept, self.max_events);
        state.bytes += text;
        state.weight += weight;
        if ends {
            tell_ended(state, task_id, ended);
        }
        if state.bytes > MAX_DELTA_BYTES {
            shed_bytes(state);
        }
        if state.weight > self.max_bytes {
            self.make_room(state, task_id);
        }
        Some(seq)
    }

    /// Hands `ev` to the sink on each of its topics that someone listens on, encoded once (not
    /// at all when nobody listens).
    fn publish(&self, ev: &TaskEvent) {
        let lifecycle = matches!(
            ev.event,
            TaskEventKind::Queued | TaskEventKind::Terminal { .. }
        )
        .then(Topic::task_lifecycle);
        // In this order, as before: the task's topic, its work topic's, then the lifecycle.
        let mut topics = [
            Some(Topic::task_events(ev.task_id)),
            Some(Topic::events_for(&ev.topic)),
            lifecycle,
        ]
        .into_iter()
        .flatten()
        .filter(|t| self.wanted(t))
        .collect::<Vec<_>>()
        .into_iter();
        let Some(last) = topics.next_back() else {
            return;
        };
        match ev.payload() {
            Ok(payload) => {
                for topic in topics {
                    (self.sink)(ev.envelope_with(topic, payload.clone()));
                }
                (self.sink)(ev.envelope_with(last, payload));
            }
            Err(e) => tracing::warn!(error = %e, "Task event not published."),
        }
    }

    /// Starts the log of an ended task that has none (after a restart or an eviction) from its
    /// synthesised events, so an event that follows the outcome comes after them.
    pub(crate) fn seed(&self, record: &TaskRecord) -> Header {
        let header = Header::of(record);
        let mut state = self.lock();
        if !state.logs.contains_key(&record.task_id) {
            state.born += 1;
            let events: Vec<Kept> = synthesised(record)
                .into_iter()
                .map(|e| Kept {
                    seq: e.seq,
                    ts_ms: e.ts_ms,
                    kind: e.event,
                })
                .collect();
            let weight =
                log_weight(&header) + events.iter().map(|e| kind_weight(&e.kind)).sum::<usize>();
            let log = TaskLog {
                header: header.clone(),
                next_seq: events.last().map_or(1, |e| e.seq + 1),
                terminal: events.iter().any(|e| e.kind.is_terminal()),
                events,
                born: state.born,
                bytes: 0,
                weight,
            };
            let ends = log.terminal;
            if ends {
                state.ended.insert(log.born, record.task_id);
            }
            state.weight += weight;
            state.logs.insert(record.task_id, log);
            if ends {
                tell_ended(&mut state, record.task_id, Some(record));
            }
            if state.weight > self.max_bytes {
                self.make_room(&mut state, record.task_id);
            }
        }
        header
    }

    /// Resolves once the task's terminal event is appended (at once when the log holds it),
    /// without a subscription: a waiter needs the end, not the events before it. It does not
    /// resolve for a task that ended before and whose log went: ask the store too
    /// (`stream::has_ended`), after this call.
    pub(crate) fn on_end(self: &Arc<Self>, task_id: Uuid) -> EndWatch {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        if state.logs.get(&task_id).is_some_and(|l| l.terminal) {
            let _ = tx.send(None);
        } else {
            state.ends.entry(task_id).or_default().push(tx);
        }
        EndWatch {
            rx,
            log: self.clone(),
            task_id,
        }
    }

    /// Forgets the waiters of `task_id` that gave up.
    fn forget_gone_waiters(&self, task_id: Uuid) {
        let mut state = self.lock();
        if let Some(waiting) = state.ends.get_mut(&task_id) {
            waiting.retain(|w| !w.is_closed());
            if waiting.is_empty() {
                state.ends.remove(&task_id);
            }
        }
    }

    /// Drops the task's log (an explicit retry starts its events over).
    pub(crate) fn forget(&self, task_id: Uuid) {
        let mut state = self.lock();
        self.forgotten
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop_log(&mut state, task_id);
    }

    /// How many logs [`EventLog::forget`] has dropped so far: an outcome recorded while this
    /// changed may belong to a run that a retry has replaced.
    pub(crate) fn forgotten(&self) -> u64 {
        self.forgotten.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The task's header, when its log is kept.
    pub(crate) fn header(&self, task_id: Uuid) -> Option<Header> {
        self.lock().logs.get(&task_id).map(|l| l.header.clone())
    }

    /// The task's header and whether its terminal event is in, when its log is kept (without
    /// copying its events).
    pub(crate) fn ended(&self, task_id: Uuid) -> Option<(Header, bool)> {
        self.lock()
            .logs
            .get(&task_id)
            .map(|l| (l.header.clone(), l.terminal))
    }

    /// The task's kept events.
    pub(crate) fn snapshot(&self, task_id: Uuid) -> Option<Snapshot> {
        self.lock().logs.get(&task_id).map(|l| Snapshot {
            header: l.header.clone(),
            events: l.events.iter().map(|e| e.event(&l.header)).collect(),
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
                    .map(|e| e.event(&l.header))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What every log takes together, about (for the memory figures and tests).
    #[cfg(test)]
    pub(crate) fn weight(&self) -> usize {
        self.lock().weight
    }

    /// Brings the logs under 90 % of the budget: the logs of ended tasks first (oldest first),
    /// then, if that is not enough, the events (not the counters) of the oldest running ones.
    /// `current`'s log (the one just written) stays.
    fn make_room(&self, state: &mut State, current: Uuid) {
        let target = self.max_bytes / 10 * 9;
        let mut spared = None;
        while state.weight > target {
            let Some((born, id)) = state.ended.pop_first() else {
                break;
            };
            if id == current {
                spared = Some((born, id));
                continue;
            }
            drop_log(state, id);
        }
        if let Some((born, id)) = spared {
            state.ended.insert(born, id);
        }
        if state.weight <= target {
            return;
        }
        let mut running: Vec<(u64, Uuid)> = state
            .logs
            .values()
            .filter(|l| !l.events.is_empty() && l.header.task_id != current)
            .map(|l| (l.born, l.header.task_id))
            .collect();
        running.sort_unstable();
        for (_, id) in running {
            if state.weight <= target {
                return;
            }
            if let Some(l) = state.logs.get_mut(&id) {
                let events: usize = l.events.iter().map(|e| kind_weight(&e.kind)).sum();
                l.events = Vec::new();
                state.bytes = state.bytes.saturating_sub(l.bytes);
                l.bytes = 0;
                l.weight = l.weight.saturating_sub(events);
                state.weight = state.weight.saturating_sub(events);
            }
        }
    }
}

/// What a log takes before its events: its map entry and its header's text.
fn log_weight(header: &Header) -> usize {
    // The map's control byte and spare capacity, about.
    const ENTRY_SLACK: usize = 16;
    std::mem::size_of::<(Uuid, TaskLog)>()
        + ENTRY_SLACK
        + header.request_id.as_str().len()
        + header.topic.as_str().len()
}

/// What a kept event takes: its slot and the text and values it holds.
fn kind_weight(kind: &TaskEventKind) -> usize {
    let heap = match kind {
        TaskEventKind::Queued | TaskEventKind::Started { .. } | TaskEventKind::ModelCall { .. } => {
            0
        }
        TaskEventKind::Delta { text } => text.len(),
        TaskEventKind::Reset { reason } => reason.len(),
        TaskEventKind::ToolStart {
            call_id,
            name,
            arguments,
        } => call_id.len() + name.len() + arguments.as_ref().map_or(0, String::len),
        TaskEventKind::ToolEnd { call_id, name, .. } => call_id.len() + name.len(),
        TaskEventKind::Retry { reason, .. } => reason.len(),
        TaskEventKind::Progress { note } => value_weight(note),
        TaskEventKind::Terminal { outcome } => match outcome {
            Outcome::Succeeded { result } => value_weight(result),
            Outcome::Failed { error }
            | Outcome::TimedOut { error }
            | Outcome::DeadLettered { error } => error.len(),
            Outcome::Cancelled { reason } => reason.len(),
        },
        TaskEventKind::Delivered { target, .. } => target.len(),
        TaskEventKind::DeliveryFailed { target, reason, .. } => target.len() + reason.len(),
    };
    std::mem::size_of::<Kept>() + heap
}

/// What a JSON value holds beyond its own slot, about: text, and the slots and keys of its
/// arrays and maps (with a map node's share of overhead per entry).
fn value_weight(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    const SLOT: usize = std::mem::size_of::<Value>();
    const MAP_ENTRY_SLACK: usize = 3 * std::mem::size_of::<usize>();
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(|v| SLOT + value_weight(v)).sum(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                std::mem::size_of::<String>() + k.len() + SLOT + MAP_ENTRY_SLACK + value_weight(v)
            })
            .sum(),
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
    let with_text: Vec<Uuid> = state
        .ended
        .values()
        .filter(|id| state.logs.get(id).is_some_and(|l| l.bytes > 0))
        .copied()
        .collect();
    for id in with_text {
        if state.bytes <= MAX_DELTA_BYTES / 10 * 9 {
            break;
        }
        drop_log(state, id);
    }
}

/// Drops the log of `task_id` and what it counted for.
fn drop_log(state: &mut State, task_id: Uuid) {
    if let Some(gone) = state.logs.remove(&task_id) {
        if gone.terminal {
            state.ended.remove(&gone.born);
        }
        state.bytes = state.bytes.saturating_sub(gone.bytes);
        state.weight = state.weight.saturating_sub(gone.weight);
    }
}

/// Keeps `ev` (taken, not copied) in the log within `max` events and [`MAX_DELTA_BYTES_PER_TASK`]
/// of text (the terminal event always). Returns the delta bytes and the weight it added.
fn keep(log: &mut TaskLog, ev: Kept, max: usize) -> (usize, usize) {
    let bytes = match &ev.kind {
        TaskEventKind::Delta { text } => text.len(),
        _ => 0,
    };
    if bytes > 0 && log.bytes + bytes > MAX_DELTA_BYTES_PER_TASK {
        return (0, 0);
    }
    if log.events.len() < max || ev.kind.is_terminal() {
        let weight = kind_weight(&ev.kind);
        log.events.push(ev);
        log.bytes += bytes;
        log.weight += weight;
        return (bytes, weight);
    }
    if let TaskEventKind::Delta { text } = &ev.kind {
        if let Some(last) = log.events.last_mut() {
            if let TaskEventKind::Delta { text: kept } = &mut last.kind {
                kept.push_str(text);
                last.seq = ev.seq;
                last.ts_ms = ev.ts_ms;
                log.bytes += bytes;
                log.weight += bytes;
                return (bytes, bytes);
            }
        }
    }
    (0, 0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn header(n: u32) -> Header {
        Header {
            task_id: Uuid::from_u128(u128::from(n) + 1),
            request_id: RequestId::random(),
            topic: Topic::agent("a"),
        }
    }

    fn log(max_bytes: usize) -> (Arc<EventLog>, Arc<AtomicUsize>) {
        let published = Arc::new(AtomicUsize::new(0));
        let count = published.clone();
        let sink: Sink = Box::new(move |_| {
            count.fetch_add(1, Ordering::SeqCst);
        });
        let log = EventLog::with_caps(ManualClock::new(1), sink, MAX_EVENTS_PER_TASK, max_bytes);
        (Arc::new(log), published)
    }

    fn run_to_end(log: &EventLog, h: &Header, text: &str) {
        log.append(h, TaskEventKind::Queued);
        log.append(h, TaskEventKind::Started { attempt: 1 });
        log.append(
            h,
            TaskEventKind::Terminal {
                outcome: Outcome::Succeeded {
                    result: serde_json::json!({ "text": text }),
                },
            },
        );
    }

    #[test]
    fn a_waiter_is_told_of_the_terminal_event_once_and_only_of_it() {
        let (log, _) = log(DEFAULT_REPLAY_BYTES);
        let h = header(1);
        log.append(&h, TaskEventKind::Queued);
        let mut early = log.on_end(h.task_id);
        let gave_up = log.on_end(h.task_id);
        drop(gave_up);
        let mut again = log.on_end(h.task_id);
        assert_eq!(
            log.lock().ends[&h.task_id].len(),
            2,
            "the waiter that gave up went"
        );
        log.append(&h, TaskEventKind::Started { attempt: 1 });
        assert!(early.rx.try_recv().is_err(), "not ended yet");
        run_to_end(&log, &h, "done");
        assert_eq!(early.rx.try_recv(), Ok(None));
        assert_eq!(again.rx.try_recv(), Ok(None));
        assert!(log.lock().ends.is_empty());
        let mut late = log.on_end(h.task_id);
        assert_eq!(
            late.rx.try_recv(),
            Ok(None),
            "an ended task answers at once"
        );
        drop((early, again, late));
        // A wait for a task the log does not hold (its end is in the store) leaves nothing.
        drop(log.on_end(header(2).task_id));
        assert!(log.lock().ends.is_empty());
    }

    #[test]
    fn an_event_is_published_only_on_the_topics_someone_listens_on_and_kept_all_the_same() {
        let topics = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = topics.clone();
        let sink: Sink = Box::new(move |env| {
            seen.lock().unwrap().push(env.topic.to_string());
        });
        let listeners = Arc::new(Listeners::default());
        let log = EventLog::new(ManualClock::new(1), sink).only_for(listeners.clone());
        let h = header(1);
        log.append(&h, TaskEventKind::Queued);
        assert!(topics.lock().unwrap().is_empty(), "nobody listens yet");
        listeners.add(&Topic::task_events(h.task_id));
        listeners.add(&Topic::task_lifecycle());
        log.append(&h, TaskEventKind::Started { attempt: 1 });
        log.append(
            &h,
            TaskEventKind::Terminal {
                outcome: Outcome::Succeeded {
                    result: serde_json::json!("done"),
                },
            },
        );
        let task = Topic::task_events(h.task_id).to_string();
        assert_eq!(
            *topics.lock().unwrap(),
            [task.clone(), task, Topic::task_lifecycle().to_string()],
            "the work topic's events (no listener) are skipped, the others go in order"
        );
        let kept = log.snapshot(h.task_id).unwrap();
        assert_eq!(kept.events.len(), 3, "every event is kept for replay");
    }

    #[test]
    fn the_logs_stay_within_their_byte_budget_the_oldest_ended_going_first() {
        let budget = 64 * 1024;
        let (log, published) = log(budget);
        let text = "x".repeat(200);
        for n in 0..2_000 {
            run_to_end(&log, &header(n), &text);
            assert!(
                log.weight() <= budget,
                "{} > {budget} after {n}",
                log.weight()
            );
        }
        // Every event was published, kept or not: as many as with no budget at all.
        let (unbounded, all) = self::log(usize::MAX);
        for n in 0..2_000 {
            run_to_end(&unbounded, &header(n), &text);
        }
        assert_eq!(published.load(Ordering::SeqCst), all.load(Ordering::SeqCst));
        let newest = header(1_999);
        assert!(
            log.snapshot(newest.task_id).is_some(),
            "the newest log is kept"
        );
        assert!(
            log.snapshot(header(0).task_id).is_none(),
            "the oldest ended log went"
        );
        // A weight that counts what is kept: about what 2,000 tasks would take, over the budget.
        let kept = log.lock().logs.len();
        assert!(kept > 50 && kept < 2_000, "{kept} logs kept");
    }

    /// The index of ended logs names exactly the kept logs that hold their terminal event.
    fn assert_ended_index_in_step(log: &EventLog) {
        let state = log.lock();
        let mut terminal: Vec<(u64, Uuid)> = state
            .logs
            .values()
            .filter(|l| l.terminal)
            .map(|l| (l.born, l.header.task_id))
            .collect();
        terminal.sort_unstable();
        let indexed: Vec<(u64, Uuid)> = state.ended.iter().map(|(b, id)| (*b, *id)).collect();
        assert_eq!(indexed, terminal);
    }

    #[test]
    fn eviction_takes_ended_logs_in_creation_order_whatever_order_they_ended_in() {
        let (log, _) = log(16 * 1024);
        // Two tasks start; the later one ends first: the earlier-created one still goes first.
        let (early, late) = (header(100_000), header(100_001));
        log.append(&early, TaskEventKind::Queued);
        log.append(&late, TaskEventKind::Queued);
        run_to_end(&log, &late, "late");
        run_to_end(&log, &early, "early");
        // A retried task's log is forgotten; a seeded one (after a restart) is indexed too.
        let retried = header(100_002);
        run_to_end(&log, &retried, "retried");
        log.forget(retried.task_id);
        let seeded = TaskRecord {
            task_id: Uuid::from_u128(200_000),
            request_id: RequestId::random(),
            state: crate::task::TaskState::Succeeded,
            attempts: 1,
            fingerprint: None,
            envelope: Arc::new(Envelope::task(
                Topic::agent("a"),
                RequestId::random(),
                serde_json::json!(1),
            )),
            outcome: Some(Outcome::Succeeded {
                result: serde_json::json!("seeded"),
            }),
            created_ms: 1,
            updated_ms: 1,
            seq: 1,
            progress: None,
        };
        log.seed(&seeded);
        assert_ended_index_in_step(&log);
        let mut n = 0;
        while log.snapshot(early.task_id).is_some() {
            assert!(
                log.snapshot(late.task_id).is_some(),
                "the later-created log went first"
            );
            run_to_end(&log, &header(n), &"z".repeat(100));
            assert_ended_index_in_step(&log);
            n += 1;
        }
        for _ in 0..500 {
            run_to_end(&log, &header(n), &"z".repeat(100));
            n += 1;
        }
        assert_ended_index_in_step(&log);
        assert!(log.snapshot(late.task_id).is_none());
        assert!(
            log.snapshot(seeded.task_id).is_none(),
            "the seeded log went too"
        );
    }

    #[test]
    fn streamed_text_past_its_cap_sheds_the_oldest_ended_logs_that_hold_text() {
        let (log, _) = log(usize::MAX);
        let quiet = header(300_000);
        run_to_end(&log, &quiet, "no deltas");
        let chunk = "d".repeat(200 * 1024);
        let tasks = MAX_DELTA_BYTES / chunk.len() + 10;
        for n in 0..tasks as u32 {
            let h = header(n);
            log.append(&h, TaskEventKind::Queued);
            log.append(
                &h,
                TaskEventKind::Delta {
                    text: chunk.clone(),
                },
            );
            run_to_end(&log, &h, "done");
            assert!(log.lock().bytes <= MAX_DELTA_BYTES, "after {n}");
        }
        assert_ended_index_in_step(&log);
        assert!(
            log.snapshot(header(0).task_id).is_none(),
            "the oldest with text went"
        );
        assert!(log.snapshot(header(tasks as u32 - 1).task_id).is_some());
        assert!(
            log.snapshot(quiet.task_id).is_some(),
            "a log without text is not shed for text"
        );
    }

    #[test]
    fn the_recorded_end_hands_its_record_to_each_waiter_and_other_ends_hand_none() {
        let (log, _) = log(DEFAULT_REPLAY_BYTES);
        let env = Envelope::task(Topic::agent("a"), RequestId::random(), serde_json::json!(1));
        let mut record = TaskRecord {
            task_id: env.id,
            request_id: env.request_id.clone(),
            state: crate::task::TaskState::Running,
            attempts: 1,
            fingerprint: None,
            envelope: Arc::new(env),
            outcome: None,
            created_ms: 1,
            updated_ms: 1,
            seq: 1,
            progress: None,
        };
        let h = Header::of(&record);
        log.append(&h, TaskEventKind::Queued);
        assert_eq!(
            log.append_end(&record),
            None,
            "no outcome: nothing appended"
        );
        let (mut one, mut two) = (log.on_end(h.task_id), log.on_end(h.task_id));
        record.state = crate::task::TaskState::Succeeded;
        record.outcome = Some(Outcome::Succeeded {
            result: serde_json::json!("done"),
        });
        assert_eq!(log.append_end(&record), Some(2));
        assert_eq!(one.rx.try_recv(), Ok(Some(record.clone())));
        assert_eq!(two.rx.try_recv(), Ok(Some(record.clone())));
        let snapshot = log.snapshot(h.task_id).unwrap();
        assert!(snapshot.terminal);
        assert!(matches!(
            &snapshot.events[1].event,
            TaskEventKind::Terminal { outcome } if Some(outcome) == record.outcome.as_ref()
        ));
        // An end appended without its record (learnt from the store) hands none.
        let other = header(7);
        log.append(&other, TaskEventKind::Queued);
        let mut three = log.on_end(other.task_id);
        run_to_end(&log, &other, "x");
        assert_eq!(three.rx.try_recv(), Ok(None));
    }

    #[test]
    fn a_running_task_keeps_its_counter_when_its_events_go() {
        let (log, _) = log(4 * 1024);
        let running = header(10_000);
        log.append(&running, TaskEventKind::Queued);
        log.append(&running, TaskEventKind::Started { attempt: 1 });
        for n in 0..200 {
            run_to_end(&log, &header(n), &"y".repeat(100));
        }
        let seq = log
            .append(&running, TaskEventKind::ModelCall { iteration: 1 })
            .unwrap();
        assert_eq!(seq, 3, "the sequence goes on without a gap");
        assert!(log.weight() <= 4 * 1024);
    }

    #[test]
    fn a_kept_event_is_replayed_with_its_header() {
        let (log, _) = log(DEFAULT_REPLAY_BYTES);
        let h = header(1);
        run_to_end(&log, &h, "done");
        let snap = log.snapshot(h.task_id).unwrap();
        assert!(snap.terminal);
        assert_eq!(snap.events.len(), 3);
        assert!(
            snap.events
                .iter()
                .all(|e| e.request_id == h.request_id && e.topic == h.topic)
        );
        assert_eq!(
            log.range(h.task_id, 2, 4)
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>(),
            vec![2, 3]
        );
    }
}
