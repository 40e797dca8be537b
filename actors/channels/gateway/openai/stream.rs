//! `stream: true`: the task's answer as `chat.completion.chunk` server-sent events — a first
//! chunk with the role, the answer's text, a last chunk with `finish_reason` (`"stop"`, or
//! `"length"` when the output-token limit cut the answer off), then `data: [DONE]`. A task that
//! ends without a result sends `data: {"error": …}` (the SDKs raise it) before `[DONE]`.
//!
//! The text is sent once the task has its answer, not as the model streams it: a model call's
//! text may turn out not to be the answer (its step ends in tool calls, or the call fails and is
//! tried again), and what a client was sent cannot be taken back. So the content of the chunks
//! always adds up to the stored answer. Keep-alive comments hold the connection meanwhile.

use super::super::api::ApiState;
use super::{completion_id, error};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bus::events::{TaskEventKind, TaskEventStream};
use bus::{Outcome, TaskRecord};
use clawbus_core::task::TaskResult;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What every chunk of one completion repeats.
struct Ids {
    id: String,
    model: String,
    created: u64,
}

impl Ids {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Event {
        data(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null }],
        }))
    }
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

/// The stream's state: the task's events in, SSE events out.
struct Feed {
    events: TaskEventStream,
    ids: Ids,
    pending: VecDeque<Event>,
    done: bool,
}

impl Feed {
    fn finish(&mut self, outcome: Option<Outcome>) {
        match outcome {
            Some(Outcome::Succeeded { result }) => {
                let text = TaskResult::text_of(&result).unwrap_or_default();
                if !text.is_empty() {
                    let chunk = self.ids.chunk(json!({ "content": text }), None);
                    self.pending.push_back(chunk);
                }
                let last = self
                    .ids
                    .chunk(json!({}), Some(super::finish_reason(&result)));
                self.pending.push_back(last);
            }
            other => {
                let (code, message) = match &other {
                    Some(Outcome::Failed { error }) => ("task_failed", error.clone()),
                    Some(Outcome::TimedOut { error }) => ("task_timed_out", error.clone()),
                    Some(Outcome::Cancelled { reason }) => ("task_cancelled", reason.clone()),
                    _ => (
                        "stream_ended",
                        "the event stream ended before the task's outcome".to_string(),
                    ),
                };
                self.pending.push_back(data(&json!({ "error": {
                    "message": message, "type": error::ErrorType::Server.as_str(), "param": null, "code": code,
                } })));
            }
        }
        self.pending.push_back(Event::default().data("[DONE]"));
        self.done = true;
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            // Deltas are not forwarded (see the module's doc): the answer comes with the outcome.
            match self.events.next().await.map(|e| e.event) {
                Some(TaskEventKind::Terminal { outcome }) => self.finish(Some(outcome)),
                Some(_) => {}
                None => self.finish(None),
            }
        }
    }
}

/// Streams the completion of `task` (just submitted, or a duplicate) as SSE.
pub(super) async fn respond(
    state: &ApiState,
    task: &TaskRecord,
    model: String,
    created: u64,
) -> Response {
    let events = match state.bus.task_events(task.task_id).await {
        Ok(s) => s,
        Err(e) => return error::bus(e),
    };
    let ids = Ids {
        id: completion_id(task),
        model,
        created,
    };
    let first = ids.chunk(json!({ "role": "assistant", "content": "" }), None);
    let feed = Feed {
        events,
        ids,
        pending: VecDeque::from([first]),
        done: false,
    };
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok::<_, Infallible>(event), feed))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}
