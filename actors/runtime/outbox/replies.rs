//! Which finished tasks have a reply to deliver, and where: decided from the task's origin (the
//! channel and peer its ingress recorded) and the channels that deliver.
//!
//! The session run stages the reply in the [`outbox`](super) before the outcome is recorded and
//! publishes it on `channel.<name>.out` after; the channel's delivery actor takes it from there.

use super::OutboundMessage;
use crate::origin::Origin;
use bus::Outcome;
use clawbus_core::ids::{Channel, chat_of_session};
use clawbus_core::task::TaskResult;
use uuid::Uuid;

pub(crate) use clawbus_core::config::ReplyRoutes;

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
    ///
    /// A task whose client named where its reply goes ([`Origin::deliver_to`]) replies there,
    /// when that channel delivers.
    fn target(&self, origin: &Origin) -> Option<(Channel, String)>;

    /// The reply of a finished task and the channel it goes out on; `None` when its origin has
    /// no way back. A failed task's person is told it failed, without the error
    /// (which may hold internals; it is in the task's record).
    fn reply(
        &self,
        origin: &Origin,
        task_id: Uuid,
        outcome: &Outcome,
    ) -> Option<(Channel, OutboundMessage)>;
}

impl ReplyTo for ReplyRoutes {
    fn target(&self, origin: &Origin) -> Option<(Channel, String)> {
        if let Some(asked) = &origin.deliver_to {
            return self
                .refuses(asked.channel.as_str(), Some(&asked.to))
                .is_none()
                .then(|| (asked.channel.clone(), asked.to.clone()));
        }
        let telegram = self.delivers(Channel::Telegram.as_str());
        match origin.channel {
            Channel::Agent if telegram => origin
                .session_key
                .as_ref()
                .and_then(|k| chat_of_session(k.as_str()))
                .map(|chat| (Channel::Telegram, chat.to_string())),
            Channel::Telegram if telegram && !origin.peer.is_empty() => {
                Some((Channel::Telegram, origin.peer.clone()))
            }
            Channel::Webhook if self.has_hook(&origin.chat_type) => {
                Some((Channel::Webhook, origin.chat_type.clone()))
            }
            _ => None,
        }
    }

    fn reply(
        &self,
        origin: &Origin,
        task_id: Uuid,
        outcome: &Outcome,
    ) -> Option<(Channel, OutboundMessage)> {
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
