//! A run's own task events (model calls, streamed text, retries, tool calls) forwarded to the bus
//! in order, off the turn's hot path.

use crate::model::{ModelError, ModelObserver, ToolCall};
use crate::turn::TurnEvents;
use bus::events::TaskEventKind;
use bus::{Bus, Delivery};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// The turn's observer: queues each event for the forwarder, which emits them on the bus in the
/// order they happened. The queue holds at most one turn's events (bounded by its iterations and
/// the model's response size); consecutive text deltas are merged before they are emitted.
///
/// Text deltas stream as they come; when text already streamed turns out not to be the answer
/// (its step ended in tool calls, its model call is tried again or moves to a fallback, the
/// attempt failed) a `reset` event withdraws it.
pub(super) struct RunEvents {
    tx: mpsc::UnboundedSender<TaskEventKind>,
    /// Text was streamed since the last reset.
    dirty: AtomicBool,
    /// The last model call's iteration: the turn's model calls so far.
    iterations: AtomicU32,
}

/// The forwarder of a run's events; [`Forwarder::finish`] returns once every event is on the bus.
pub(super) struct Forwarder {
    task: tokio::task::JoinHandle<()>,
}

impl RunEvents {
    /// Starts the forwarder for the task of `delivery`. After each tool call the task is marked
    /// alive in the store ([`Delivery::progress`]), so a long turn shows progress between its
    /// model calls.
    pub(super) fn start(bus: Arc<dyn Bus>, delivery: Delivery) -> (Self, Forwarder) {
        let task_id = delivery.envelope().id;
        let (tx, mut rx) = mpsc::unbounded_channel::<TaskEventKind>();
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut pending = Some(first);
                while let Some(event) = pending.take() {
                    let event = match event {
                        TaskEventKind::Delta { mut text } => {
                            // Merge the deltas already queued behind this one.
                            loop {
                                match rx.try_recv() {
                                    Ok(TaskEventKind::Delta { text: more }) => text.push_str(&more),
                                    Ok(other) => {
                                        pending = Some(other);
                                        break;
                                    }
                                    Err(_) => break,
                                }
                            }
                            TaskEventKind::Delta { text }
                        }
                        other => other,
                    };
                    let progress = match &event {
                        TaskEventKind::ToolEnd { name, ok, .. } => {
                            Some(serde_json::json!({ "tool": name, "ok": ok }))
                        }
                        _ => None,
                    };
                    if let Err(e) = bus.emit(task_id, event).await {
                        tracing::debug!(task_id = %task_id, error = %e, "Task event not published.");
                    }
                    if let Some(note) = progress {
                        if let Err(e) = delivery.progress(note).await {
                            tracing::debug!(task_id = %task_id, error = %e, "Progress not recorded.");
                        }
                    }
                }
            }
        });
        let events = Self {
            tx,
            dirty: AtomicBool::new(false),
            iterations: AtomicU32::new(0),
        };
        (events, Forwarder { task })
    }

    fn send(&self, event: TaskEventKind) {
        // The forwarder only stops when this sender is gone.
        let _ = self.tx.send(event);
    }

    /// Model calls the turn made, as its `model_call` events numbered them (a resumed turn
    /// counts on from its journal); 0 when it made none.
    pub(super) fn iterations(&self) -> u32 {
        self.iterations.load(Ordering::SeqCst)
    }

    /// Withdraws the text streamed since the last reset, if any, saying why.
    fn withdraw(&self, reason: &str) {
        if self.dirty.swap(false, Ordering::SeqCst) {
            self.send(TaskEventKind::Reset {
                reason: reason.to_string(),
            });
        }
    }
}

impl Forwarder {
    /// Waits until every event sent before the observer was dropped is on the bus.
    pub(super) async fn finish(self, events: RunEvents) {
        drop(events);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "Task event forwarder ended abnormally.");
        }
    }
}

impl ModelObserver for RunEvents {
    fn text(&self, delta: &str) {
        self.dirty.store(true, Ordering::SeqCst);
        self.send(TaskEventKind::Delta {
            text: delta.to_string(),
        });
    }

    fn fell_over(&self, event: &crate::model::Fallover<'_>) {
        self.withdraw("fell_over");
        let reason = event.reason.to_string();
        // Which model answers, and why the turn moved, is on the task's events.
        self.send(TaskEventKind::Progress {
            note: serde_json::json!({
                "fell_over": { "from": event.from, "to": event.to, "reason": reason }
            }),
        });
    }

    fn retry(&self, attempt: u32, delay: Duration, error: &ModelError) {
        self.withdraw("retry");
        self.send(TaskEventKind::Retry {
            attempt,
            delay_ms: delay.as_millis() as u64,
            reason: error.to_string(),
        });
    }
}

impl TurnEvents for RunEvents {
    fn model_call(&self, iteration: u32) {
        self.iterations.fetch_max(iteration, Ordering::SeqCst);
        self.send(TaskEventKind::ModelCall { iteration });
    }

    fn answered_by(&self, iteration: u32, model: &str) {
        self.send(TaskEventKind::Progress {
            note: serde_json::json!({
                "answered_by": { "iteration": iteration, "model": model }
            }),
        });
    }

    fn reset(&self, reason: &str) {
        self.withdraw(reason);
    }

    fn tool_start(&self, call: &ToolCall) {
        self.send(TaskEventKind::tool_start(
            &call.id,
            &call.name,
            &call.arguments,
        ));
    }

    fn tool_end(&self, call: &ToolCall, ok: bool) {
        self.send(TaskEventKind::ToolEnd {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
        });
    }
}
