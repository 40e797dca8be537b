//! Which finished tasks have a reply to deliver, and where: decided from the task's origin (the
//! channel and peer its ingress recorded) and the channels that deliver.
//!
//! The session run publishes the reply on `channel.<name>.out` once the outcome is recorded;
//! the channel's delivery actor takes it from there.

use super::{OutboundMessage, TELEGRAM_CHANNEL, WEBHOOK, out_topic};
use crate::config::Config;
use crate::origin::Origin;
use bus::{Envelope, Outcome};
use serde_json::json;
use std::collections::BTreeSet;
use uuid::Uuid;

/// The channels (and webhooks) whose tasks' replies go back out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyRoutes {
    /// Telegram polls, so its chats get replies.
    telegram: bool,
    /// Webhooks with a `deliver_url`.
    hooks: BTreeSet<String>,
}

impl ReplyRoutes {
    /// The routes the configuration sets up.
    pub fn new(config: &Config) -> Self {
        Self {
            telegram: config
                .channels
                .get(TELEGRAM_CHANNEL)
                .is_some_and(|c| c.telegram.is_some()),
            hooks: config
                .webhooks
                .iter()
                .filter(|(_, h)| h.deliver_url.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    /// The channel and target a task from `origin` replies to, if any: a Telegram chat (the
    /// peer), a webhook with a `deliver_url` (the hook's name, the origin's chat type).
    pub fn target(&self, origin: &Origin) -> Option<(&'static str, String)> {
        match origin.channel.as_str() {
            TELEGRAM_CHANNEL if self.telegram && !origin.peer.is_empty() => {
                Some((TELEGRAM_CHANNEL, origin.peer.clone()))
            }
            WEBHOOK if self.hooks.contains(&origin.chat_type) => {
                Some((WEBHOOK, origin.chat_type.clone()))
            }
            _ => None,
        }
    }

    /// The reply of a finished task as the event for its channel's delivery actor; `None` when
    /// its origin has no way back. A failed task's person is told it failed, without the error
    /// (which may hold internals; it is in the task's record).
    pub fn reply(&self, origin: &Origin, task_id: Uuid, outcome: &Outcome) -> Option<Envelope> {
        let (channel, to) = self.target(origin)?;
        let text = match outcome {
            Outcome::Succeeded { result } => result
                .get("text")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_string(),
            other => format!(
                "Sorry, this request could not be answered ({}).",
                other.state().as_str()
            ),
        };
        let msg = OutboundMessage {
            to: Some(to),
            text,
            task_id: Some(task_id),
            job: None,
        };
        let topic = out_topic(channel).ok()?;
        let payload = serde_json::to_value(&msg).unwrap_or_else(|_| json!({}));
        Some(Envelope::event(topic, payload).from(format!("task:{task_id}")))
    }
}
