//! What became of the delivery `openclaw agent --deliver` asked for, as the second answer of
//! `agent` reports it (`result.deliveryStatus`): the reply's `delivered` or `delivery_failed`
//! task event, already recorded or awaited.

use super::openclaw::delivery;
use crate::gateway::api::{self, ApiState};
use bus::events::TaskEvent;
use bus::{TaskRecord, TaskState, Topic};
use clawbus_core::task::TaskResult;
use clawbus_runtime::origin::Origin;
use serde_json::{Value, json};
use std::time::Duration;

/// What became of the delivery of `rec`'s reply: its `delivered` or `delivery_failed` event
/// (already recorded, or awaited at most `timeout`).
pub(super) async fn status(state: &ApiState, rec: &TaskRecord, timeout: Duration) -> Value {
    let asked = Origin::of(&rec.envelope).ok().and_then(|o| o.deliver_to);
    if asked.is_none() {
        return delivery::not_attempted("failed", "unknown_channel");
    }
    if rec.state == TaskState::Succeeded
        && rec
            .result()
            .is_none_or(|r| clawbus_runtime::outbox::is_silent(&TaskResult::shown(r)))
    {
        return delivery::not_attempted("suppressed", "no_visible_result");
    }
    // Subscribed before the replay is read: an event is in one or the other.
    let live = state.bus.subscribe(Topic::task_events(rec.task_id)).await;
    let found = async {
        let mut replayed = state.bus.task_events(rec.task_id).await.ok()?;
        while let Some(e) = replayed.next().await {
            if let Some(status) = delivery::from_event(&e.event) {
                return Some(status);
            }
        }
        let mut live = live.ok()?;
        while let Some(d) = live.next().await {
            let status = TaskEvent::from_envelope(d.envelope())
                .ok()
                .filter(|e| e.task_id == rec.task_id)
                .and_then(|e| delivery::from_event(&e.event));
            if status.is_some() {
                return status;
            }
        }
        None
    };
    match tokio::time::timeout(timeout.min(api::MAX_WAIT), found).await {
        Ok(Some(status)) => status,
        _ => json!({
            "requested": true, "attempted": true, "status": "failed", "succeeded": false,
            "error": true, "reason": "delivery_pending",
            "errorMessage": "the delivery was still being tried when the wait ended (clawbus tasks watch shows its outcome)",
        }),
    }
}
