//! `agent`'s delivery fields (`openclaw agent --deliver --channel C --to T`, `--reply-channel`,
//! `--reply-to`, `bestEffortDeliver`) to the target a run's reply also goes to, and the
//! delivery's outcome as OpenClaw's `result.deliveryStatus`.
//!
//! The reply channel is `replyChannel`, else `channel`; the target `replyTo`, else `to`. A
//! channel that does not deliver here (none named, `last`, an unknown one, a webhook without a
//! `deliver_url`) is refused with `INVALID_REQUEST` naming it, as OpenClaw's strict default;
//! with `bestEffortDeliver` the run goes ahead without delivery and its `deliveryStatus` says why.

use super::super::frames::ErrorShape;
use bus::events::TaskEventKind;
use clawbus_core::config::ReplyRoutes;
use clawbus_core::ids::Channel;
use clawbus_runtime::origin::DeliverTo;
use serde_json::{Value, json};

/// The delivery fields of `agent`'s params.
const FIELDS: [&str; 6] = [
    "deliver",
    "channel",
    "to",
    "replyChannel",
    "replyTo",
    "bestEffortDeliver",
];

/// What an `agent` request asks of delivery.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct DeliveryAsk {
    deliver: bool,
    channel: Option<String>,
    to: Option<String>,
    best_effort: bool,
}

/// Where a run's reply goes, as resolved from a [`DeliveryAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// No delivery was asked for.
    NotAsked,
    /// The reply also goes to this target.
    To(DeliverTo),
    /// Asked with `bestEffortDeliver`, but nothing delivers there: the run goes ahead alone.
    Dropped,
}

fn text(p: &Value, key: &str) -> Option<String> {
    p.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl DeliveryAsk {
    /// Takes the delivery fields out of `agent`'s params (what is left is read as a run's).
    pub(crate) fn take(p: &mut Value) -> Self {
        let ask = Self {
            deliver: p.get("deliver").and_then(Value::as_bool).unwrap_or(false),
            channel: text(p, "replyChannel").or_else(|| text(p, "channel")),
            to: text(p, "replyTo").or_else(|| text(p, "to")),
            best_effort: p
                .get("bestEffortDeliver")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        if let Value::Object(obj) = p {
            for f in FIELDS {
                obj.remove(f);
            }
        }
        ask
    }

    /// The target the reply goes to, by the channels that deliver here (`routes`).
    pub(crate) fn resolve(&self, routes: &ReplyRoutes) -> Result<Resolved, ErrorShape> {
        if !self.deliver {
            return Ok(Resolved::NotAsked);
        }
        let refused = match (self.channel.as_deref(), self.to.as_deref()) {
            (None | Some("last"), _) => {
                "deliver: no channel named (pass --channel or --reply-channel: \"telegram\" with --to <chat id>, or \"webhook\" with --to <hook>)".to_string()
            }
            (Some(channel), None) => format!(
                "deliver: channel {channel:?} needs a target (--to or --reply-to: a Telegram chat id, a webhook's name)"
            ),
            (Some(channel), Some(to)) => match routes.refuses(channel, Some(to)) {
                None => {
                    return Ok(Resolved::To(DeliverTo {
                        channel: Channel::from(channel),
                        to: to.to_string(),
                    }));
                }
                Some(why) => format!("deliver: {why}"),
            },
        };
        if self.best_effort {
            tracing::debug!(reason = %refused, "agent: delivery dropped (bestEffortDeliver).");
            return Ok(Resolved::Dropped);
        }
        Err(ErrorShape::invalid(refused))
    }
}

/// `deliveryStatus` when nothing was attempted: `reason` says why.
pub(crate) fn not_attempted(status: &str, reason: &str) -> Value {
    let failed = status == "failed";
    let mut v = json!({
        "requested": true, "attempted": false, "status": status,
        "succeeded": false, "reason": reason,
    });
    if failed {
        v["error"] = json!(true);
    }
    v
}

/// `deliveryStatus` from the task's delivery event (`delivered` or `delivery_failed`).
pub(crate) fn from_event(kind: &TaskEventKind) -> Option<Value> {
    match kind {
        TaskEventKind::Delivered { .. } => Some(json!({
            "requested": true, "attempted": true, "status": "sent",
            "succeeded": true, "resultCount": 1,
        })),
        TaskEventKind::DeliveryFailed { reason, .. } => Some(json!({
            "requested": true, "attempted": true, "status": "failed",
            "succeeded": false, "error": true, "errorMessage": reason,
        })),
        _ => None,
    }
}
