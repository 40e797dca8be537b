//! `GET /v1/tasks/{id}/events`: a task's events as server-sent events — what already happened,
//! then live, ending after the terminal event.

use super::api::{ApiState, bus_error, error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::time::Duration;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(super) async fn task_events(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    let Ok(task_id) = uuid::Uuid::parse_str(&id) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_task_id",
            format!("{id:?} is not a task id (a UUID)"),
        );
    };
    match state.bus.task(task_id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_task",
                format!("no task {id}"),
            );
        }
        Err(e) => return bus_error(e),
    }
    let events = match state.bus.task_events(task_id).await {
        Ok(s) => s,
        Err(e) => return bus_error(e),
    };
    let stream = futures::stream::unfold(events, |mut events| async move {
        let event = events.next().await?;
        let sse = Event::default()
            .id(event.seq.to_string())
            .event(event_name(&event.event))
            .json_data(&event)
            .unwrap_or_else(|e| Event::default().comment(format!("unencodable event: {e}")));
        Some((Ok::<_, Infallible>(sse), events))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The SSE event name: the event's `type` (`queued`, `started`, `delta`, …).
fn event_name(kind: &bus::events::TaskEventKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
        .unwrap_or_else(|| "event".into())
}
