//! Admitting a task: the bus answers a known request id with its task when the target and the
//! payload match; the [`Duplicates`] rule of the request says what else a duplicate must match,
//! or whether a conflicting one is joined.

use super::IngressError;
use crate::origin::Header;
use bus::{Admission, Bus, BusError, Envelope, TaskRecord};

/// What a request id that is already known answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicates {
    /// Its task, when it is the same work in the same place: the same agent and text (the bus
    /// compares them) and the same session name, session key and lane (compared here, as the bus
    /// does not read headers); otherwise [`IngressError::Conflict`]. The rule of every client
    /// ingress (HTTP, channel inbound, WebSocket, OpenAI, webhooks).
    SamePlace,
    /// Its task, when it is the same work (the bus's comparison of agent and text); where it
    /// runs is not compared. The tools (a call joined by its request id from another caller's
    /// session) and Telegram (an update id is one message).
    SameWork,
    /// Its task whatever it was: a request id that already ran other work is that work. A cron
    /// fire (the job changed between two schedulers' fires: the fire happened).
    Join,
}

/// The headers that place a task: the same request id with another value in one of them is
/// another task, not a duplicate.
const PLACE: [(Header, &str); 3] = [
    (Header::SessionName, "session"),
    (Header::SessionKey, "session key"),
    (Header::Lane, "lane"),
];

/// Submits `env` under the `rule` for duplicates.
pub(super) async fn admit(
    bus: &dyn Bus,
    env: Envelope,
    rule: Duplicates,
) -> Result<Admission, IngressError> {
    let placed: Vec<Option<String>> = PLACE
        .iter()
        .map(|(h, _)| env.headers.get(h.as_str()).cloned())
        .collect();
    let request_id = env.request_id.clone();
    match bus.submit(env).await {
        Ok(admission) => {
            if rule == Duplicates::SamePlace && admission.duplicate {
                elsewhere(&admission.task, &placed)?;
            }
            Ok(admission)
        }
        Err(BusError::Conflict { .. }) if rule == Duplicates::Join => {
            match bus.lookup(&request_id).await {
                Ok(Some(task)) => Ok(Admission {
                    task,
                    duplicate: true,
                }),
                Ok(None) => Err(IngressError::Conflict(format!(
                    "request id {request_id} conflicts but is unknown"
                ))),
                Err(e) => Err(IngressError::Bus(e)),
            }
        }
        Err(e) => Err(IngressError::Bus(e)),
    }
}

/// `Err` when the first submission of `existing`'s request id was placed otherwise than
/// `placed` (the values of [`PLACE`], in order), naming what differs.
fn elsewhere(existing: &TaskRecord, placed: &[Option<String>]) -> Result<(), IngressError> {
    for ((header, what), new) in PLACE.iter().zip(placed) {
        let first = existing.envelope.headers.get(header.as_str());
        if first != new.as_ref() {
            let shown = |v: Option<&String>| v.map_or("none".to_string(), |v| format!("{v:?}"));
            return Err(IngressError::Conflict(format!(
                "request id {} is taken by task {}: it was first submitted with {what} {} (this one has {})",
                existing.request_id,
                existing.task_id,
                shown(first),
                shown(new.as_ref())
            )));
        }
    }
    Ok(())
}
