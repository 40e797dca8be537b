//! Which finished tasks have a reply to deliver, and where: decided from the task's origin (the
//! channel and peer its ingress recorded) and the channels that deliver.
//!
//! The session run stages the reply in the [`super::outbox`] before the outcome is recorded and
//! publishes it on `channel.<name>.out` after; the channel's delivery actor takes it from there.

use super::telegram::chat_of_session;
use super::{OutboundMessage, TELEGRAM_CHANNEL, WEBHOOK};
use crate::config::Config;
use crate::origin::{AGENT_CHANNEL, Origin};
use bus::Outcome;
use std::collections::{BTreeMap, BTreeSet};
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
        Self::from_parts(&config.channels, &config.webhooks)
    }

    /// The routes of `[channels.*]` and `[webhooks.*]` (what `clawbus check` judges
    /// announcement targets by).
    pub fn from_parts(
        channels: &BTreeMap<String, crate::config::ChannelDef>,
        webhooks: &BTreeMap<String, crate::config::WebhookDef>,
    ) -> Self {
        Self {
            telegram: channels
                .get(TELEGRAM_CHANNEL)
                .is_some_and(|c| c.telegram.is_some()),
            hooks: webhooks
                .iter()
                .filter(|(_, h)| h.deliver_url.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }

    /// Whether `channel` has a delivery actor (Telegram when it polls, `webhook` when a hook
    /// has a `deliver_url`).
    pub fn delivers(&self, channel: &str) -> bool {
        match channel {
            TELEGRAM_CHANNEL => self.telegram,
            WEBHOOK => !self.hooks.is_empty(),
            _ => false,
        }
    }

    /// Why an announcement to `channel` (`to` on it) could not be delivered; `None` when it can.
    pub fn refuses(&self, channel: &str, to: Option<&str>) -> Option<String> {
        match channel {
            TELEGRAM_CHANNEL if self.telegram => None,
            TELEGRAM_CHANNEL => Some(
                "channel \"telegram\" is not configured (expected [channels.telegram] token_env in clawbus.toml)".into(),
            ),
            WEBHOOK => {
                let hook = to.unwrap_or_default();
                (!self.hooks.contains(hook)).then(|| {
                    let known: Vec<&str> = self.hooks.iter().map(String::as_str).collect();
                    format!(
                        "no webhook {hook:?} with a deliver_url (expected one of: {})",
                        if known.is_empty() { "none configured".to_string() } else { known.join(", ") }
                    )
                })
            }
            other => Some(format!(
                "channel {other:?} has no delivery (expected \"telegram:<chat id>\" or \"webhook:<hook>\")"
            )),
        }
    }

    /// The channel and target a task from `origin` replies to, if any: a Telegram chat (the
    /// peer), a webhook with a `deliver_url` (the hook's name, the origin's chat type).
    ///
    /// A turn another run started in a Telegram chat's session (`sessions_send`, a finished
    /// subagent's or agent call's notice) replies to that chat too: it is a turn of that
    /// conversation, and the person should see what the agent says in their chat, as the
    /// session's transcript records it. (`NO_REPLY` stays silent, as ever.) A webhook session
    /// gets no such reply: a hook's receiver expects the replies of its own deliveries only.
    pub fn target(&self, origin: &Origin) -> Option<(&'static str, String)> {
        match origin.channel.as_str() {
            AGENT_CHANNEL if self.telegram => origin
                .session_key
                .as_ref()
                .and_then(|k| chat_of_session(k.as_str()))
                .map(|chat| (TELEGRAM_CHANNEL, chat.to_string())),
            TELEGRAM_CHANNEL if self.telegram && !origin.peer.is_empty() => {
                Some((TELEGRAM_CHANNEL, origin.peer.clone()))
            }
            WEBHOOK if self.hooks.contains(&origin.chat_type) => {
                Some((WEBHOOK, origin.chat_type.clone()))
            }
            _ => None,
        }
    }

    /// The reply of a finished task and the channel it goes out on; `None` when its origin has
    /// no way back. A failed task's person is told it failed, without the error
    /// (which may hold internals; it is in the task's record).
    pub fn reply(
        &self,
        origin: &Origin,
        task_id: Uuid,
        outcome: &Outcome,
    ) -> Option<(&'static str, OutboundMessage)> {
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
        Some((channel, msg))
    }
}
