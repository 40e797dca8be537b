//! Admitting a task at ingress: a known request id answers its task as a duplicate only when it
//! is the same work in the same place. The bus compares the target and the payload; the session
//! and the lane travel as headers, which the bus does not compare, so they are compared here.

use super::api::{ApiState, Failure};
use crate::origin::Header;
use axum::http::StatusCode;
use bus::{Admission, Envelope, TaskRecord};

/// The headers that place a task: the same request id with another value in one of them is
/// another task, not a duplicate.
const PLACE: [(Header, &str); 3] = [
    (Header::SessionName, "session"),
    (Header::SessionKey, "session key"),
    (Header::Lane, "lane"),
];

/// Submits `env`; a duplicate whose first submission had another session or lane is refused with
/// 409 `request_id_conflict` naming what differs (like another agent or another text).
pub async fn admit(state: &ApiState, env: Envelope) -> Result<Admission, Failure> {
    let placed: Vec<Option<String>> = PLACE
        .iter()
        .map(|(h, _)| env.headers.get(h.as_str()).cloned())
        .collect();
    let admission = state.bus.submit(env).await.map_err(Failure::bus)?;
    if admission.duplicate {
        elsewhere(&admission.task, &placed)?;
    }
    Ok(admission)
}

/// `Err` (409) when the first submission of `existing`'s request id was placed otherwise than
/// `placed` (the values of [`PLACE`], in order).
fn elsewhere(existing: &TaskRecord, placed: &[Option<String>]) -> Result<(), Failure> {
    for ((header, what), new) in PLACE.iter().zip(placed) {
        let first = existing.envelope.headers.get(header.as_str());
        if first != new.as_ref() {
            let shown = |v: Option<&String>| v.map_or("none".to_string(), |v| format!("{v:?}"));
            return Err(Failure::new(
                StatusCode::CONFLICT,
                "request_id_conflict",
                format!(
                    "request id {} is taken by task {}: it was first submitted with {what} {} (this one has {})",
                    existing.request_id,
                    existing.task_id,
                    shown(first),
                    shown(new.as_ref())
                ),
            ));
        }
    }
    Ok(())
}
