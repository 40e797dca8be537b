//! Which finished tasks have a reply to deliver, and where: decided from the task's origin (the
//! channel and peer its ingress recorded) and the channels that deliver.
//!
//! The session run stages the reply in the [`outbox`](super) before the outcome is recorded and
//! publishes it on `channel.<name>.out` after; the channel's delivery actor takes it from there.

use super::OutboundMessage;
use crate::origin::{AGENT_CHANNEL, Origin};
use bus::Outcome;
use clawbus_core::config::{TELEGRAM as TELEGRAM_CHANNEL, WEBHOOK};
use clawbus_core::ids::chat_of_session;
use clawbus_core::task::TaskResult;
use uuid::Uuid;

pub use clawbus_core::config::ReplyRoutes;

/// Where a finished task's reply goes, by the [`ReplyRoutes`] of the configuration.
pub trait ReplyTo {
    /// The channel and target a task from `origin` replies to, if any: a Telegram chat (the
    /// peer), a webhook with a `deliver_url` (the hook's name, the origin's chat type).
    ///
    /// A turn another run started in a Telegram chat's session (`sessions_send`, a finished
    /// subagent's or agent call's notice) replies to that chat too: it is a turn of that
    /// conversation, and the person should see what the agent says in their chat, as the
    /// session's transcript records it. (`NO_REPLY` stays silent, as ever.) A webhook session
    /// gets no such reply: a hook's receiver expects the replies of its own deliveries only.
    fn target(&self, origin: &Origin) -> Option<(&'static str, String)>;

    /// The reply of a finished task and the channel it goes out on; `None` when its origin has
    /// no way back. A failed task's person is told it failed, without the error
    /// (which may hold internals; it is in the task's record).
    fn reply(
        &self,
        origin: &Origin,
        task_id: Uuid,
        outcome: &Outcome,
    ) -> Option<(&'static str, OutboundMessage)>;
}

impl ReplyTo for ReplyRoutes {
    fn target(&self, origin: &Origin) -> Option<(&'static str, String)> {
        match origin.channel.as_str() {
            AGENT_CHANNEL if self.delivers(TELEGRAM_CHANNEL) => origin
                .session_key
                .as_ref()
                .and_then(|k| chat_of_session(k.as_str()))
                .map(|chat| (TELEGRAM_CHANNEL, chat.to_string())),
            TELEGRAM_CHANNEL if self.delivers(TELEGRAM_CHANNEL) && !origin.peer.is_empty() => {
                Some((TELEGRAM_CHANNEL, origin.peer.clone()))
            }
            WEBHOOK if self.has_hook(&origin.chat_type) => {
                Some((WEBHOOK, origin.chat_type.clone()))
            }
            _ => None,
        }
    }

    fn reply(
        &self,
        origin: &Origin,
        task_id: Uuid,
        outcome: &Outcome,
    ) -> Option<(&'static str, OutboundMessage)> {
        let (channel, to) = self.target(origin)?;
        let text = match outcome {
            Outcome::Succeeded { result } => {
                TaskResult::text_of(result).unwrap_or_default().to_string()
            }
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
        Some((channel, msg))
    }
}
