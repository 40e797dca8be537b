//! Task events: what happens to a task, in order, on `events.task.<task_id>` and `events.<topic>`.

use crate::envelope::{Envelope, RequestId};
use crate::error::BusError;
use crate::task::Outcome;
use crate::topic::Topic;
use futures::stream::{BoxStream, Stream, StreamExt as _};
use serde::{Deserialize, Serialize};
use std::pin::Pin;
use std::task::{Context, Poll};
use uuid::Uuid;

/// One event in a task's life. Serde-only data: it travels as the payload of an event envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskEvent {
    /// The task.
    pub task_id: Uuid,
    /// The task's request id.
    pub request_id: RequestId,
    /// The work topic the task was submitted to.
    pub topic: Topic,
    /// Position in the task's events: from 1, without gaps, in the order they happened.
    pub seq: u64,
    /// Unix ms when it happened.
    pub ts_ms: u64,
    /// What happened.
    pub event: TaskEventKind,
}

/// What happened to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskEventKind {
    /// Admitted and journaled, waiting for a consumer.
    Queued,
    /// A consumer started delivery `attempt`.
    Started {
        /// The delivery attempt, from 1.
        attempt: u32,
    },
    /// The runtime called the model.
    ModelCall {
        /// The agent loop's iteration, from 1.
        iteration: u32,
    },
    /// Streamed output text.
    Delta {
        /// The text added.
        text: String,
    },
    /// The text deltas since the attempt started or the last reset are withdrawn: they are not
    /// part of the answer (their step ended in tool calls, or their model call or attempt failed
    /// and is tried again). A client that shows the answer drops them.
    Reset {
        /// Why: `tool_calls`, `retry`, `fell_over` or `failed`.
        reason: String,
    },
    /// A tool call began.
    ToolStart {
        /// The model's id for the call.
        call_id: String,
        /// The tool.
        name: String,
        /// The call's arguments as the model sent them (raw JSON text), cut to
        /// [`TOOL_ARGUMENTS_KEPT`] bytes with `…` when longer; absent from older events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<String>,
    },
    /// A tool call ended.
    ToolEnd {
        /// The model's id for the call.
        call_id: String,
        /// The tool.
        name: String,
        /// Whether it succeeded.
        ok: bool,
    },
    /// The attempt ended without an outcome; the task is delivered again.
    Retry {
        /// The attempt that comes next.
        attempt: u32,
        /// How long until it is delivered.
        delay_ms: u64,
        /// Why the last attempt ended.
        reason: String,
    },
    /// A liveness or progress mark of the running attempt.
    Progress {
        /// Free-form progress data.
        note: serde_json::Value,
    },
    /// The task ended: exactly once, and the last event of a task but for the delivery events
    /// of its reply, which come after it.
    Terminal {
        /// How it ended.
        outcome: Outcome,
    },
    /// The task's reply reached its target (a chat, a URL) after `attempts` tries; after the
    /// terminal event.
    Delivered {
        /// Where it went (`<channel>:<to>`).
        target: String,
        /// Tries it took, from 1.
        attempts: u32,
    },
    /// The task's reply could not be delivered, after `attempts` tries; after the terminal event.
    DeliveryFailed {
        /// Where it should have gone (`<channel>:<to>`).
        target: String,
        /// Tries made.
        attempts: u32,
        /// The last error.
        reason: String,
    },
}

/// How much of a tool call's arguments a `tool_start` event keeps, in bytes.
pub const TOOL_ARGUMENTS_KEPT: usize = 1024;

impl TaskEventKind {
    /// A `tool_start` event for the call `call_id` of `name` with its raw `arguments`, cut to
    /// [`TOOL_ARGUMENTS_KEPT`] bytes (on a character boundary, `…` added) when longer.
    pub fn tool_start(call_id: &str, name: &str, arguments: &str) -> Self {
        let arguments = if arguments.len() <= TOOL_ARGUMENTS_KEPT {
            arguments.to_string()
        } else {
            let mut end = TOOL_ARGUMENTS_KEPT;
            while !arguments.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &arguments[..end])
        };
        Self::ToolStart {
            call_id: call_id.to_string(),
            name: name.to_string(),
            arguments: Some(arguments),
        }
    }

    /// True for the task's last event.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Terminal { .. })
    }

    /// True for the events that follow the terminal one (what became of the task's reply).
    pub fn follows_outcome(&self) -> bool {
        matches!(self, Self::Delivered { .. } | Self::DeliveryFailed { .. })
    }
}

impl TaskEvent {
    /// True for the task's last event.
    pub fn is_terminal(&self) -> bool {
        self.event.is_terminal()
    }

    /// The event as an event envelope on `topic`, with the task's request id.
    pub fn to_envelope(&self, topic: Topic) -> Result<Envelope, BusError> {
        Ok(self.envelope_with(topic, self.payload()?))
    }

    /// The event as the payload of its envelopes.
    pub(crate) fn payload(&self) -> Result<serde_json::Value, BusError> {
        serde_json::to_value(self).map_err(|e| BusError::Invalid(format!("encode task event: {e}")))
    }

    /// The event envelope on `topic` with `payload` (from [`TaskEvent::payload`]): one encoding
    /// serves every topic the event goes to.
    pub(crate) fn envelope_with(&self, topic: Topic, payload: serde_json::Value) -> Envelope {
        Envelope::event_for(topic, self.request_id.clone(), payload)
    }

    /// Reads an event back from an envelope published by [`TaskEvent::to_envelope`].
    pub fn from_envelope(env: &Envelope) -> Result<Self, BusError> {
        Self::deserialize(&env.payload)
            .map_err(|e| BusError::Invalid(format!("not a task event on {}: {e}", env.topic)))
    }
}

/// The events of one task: those already emitted, then live ones; it ends after the terminal one.
pub struct TaskEventStream {
    inner: BoxStream<'static, TaskEvent>,
}

impl TaskEventStream {
    /// Wraps a stream of one task's events.
    pub fn new(inner: BoxStream<'static, TaskEvent>) -> Self {
        Self { inner }
    }

    /// The next event; `None` after the terminal event (or when the bus closed).
    pub async fn next(&mut self) -> Option<TaskEvent> {
        self.inner.next().await
    }
}

impl Stream for TaskEventStream {
    type Item = TaskEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl std::fmt::Debug for TaskEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskEventStream")
    }
}

#[cfg(test)]
mod tool_start_tests {
    use super::{TOOL_ARGUMENTS_KEPT, TaskEventKind};

    fn kept(arguments: &str) -> String {
        match TaskEventKind::tool_start("c", "t", arguments) {
            TaskEventKind::ToolStart { arguments, .. } => arguments.unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_start_keeps_short_arguments_whole_and_cuts_long_ones_on_a_character() {
        assert_eq!(kept(r#"{"a":1}"#), r#"{"a":1}"#);
        // 'é' is two bytes: the cut at 1024 would split the last one.
        let long = format!("x{}", "é".repeat(TOOL_ARGUMENTS_KEPT));
        let cut = kept(&long);
        assert!(cut.ends_with('…'), "{cut}");
        assert_eq!(cut.len(), TOOL_ARGUMENTS_KEPT - 1 + '…'.len_utf8());
        assert!(long.starts_with(cut.trim_end_matches('…')));
    }
}
