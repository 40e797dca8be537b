//! `session.message` events, as OpenClaw sends them: each message a run commits to its
//! session's transcript, in transcript order, once per connection. The user's message goes out
//! when the run first calls the model (it is in the transcript by then), the rest (tool calls
//! and results, the answer) when the run ends, before its `chat` `final`. A client that sent the
//! message sees its own input confirmed (its `idempotencyKey`) above the answer.

use super::frames::EventName;
use super::openclaw::sessions::{numbered, row, session_message};
use super::outbox::{Closed, Outbox};
use crate::gateway::api::ApiState;
use crate::gateway::sessions;
use bus::events::TaskEvent;

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
    let shown = match sessions::transcript(state, run.key).await {
        Ok(shown) => shown,
        Err(f) => {
            tracing::debug!(session = run.key, error = %f.message, "No transcript for session.message.");
            return Ok(());
        }
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
