//! Which channels deliver replies: Telegram when it polls, webhooks with a `deliver_url`
//! ([`ReplyRoutes`]). What a finished task's reply is and where it goes is the runtime's
//! (`outbox`'s `ReplyTo`); here only what the configuration sets up, which `clawbus check` judges
//! announcement targets by.

use super::{ChannelDef, Config, WebhookDef};
use crate::ids::Channel;
use std::collections::{BTreeMap, BTreeSet};

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
    pub(crate) fn from_parts(
        channels: &BTreeMap<String, ChannelDef>,
        webhooks: &BTreeMap<String, WebhookDef>,
    ) -> Self {
        Self {
            telegram: channels
                .get(Channel::Telegram.as_str())
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
        match Channel::from(channel) {
            Channel::Telegram => self.telegram,
            Channel::Webhook => !self.hooks.is_empty(),
            _ => false,
        }
    }

    /// Why an announcement to `channel` (`to` on it) could not be delivered; `None` when it can.
    pub fn refuses(&self, channel: &str, to: Option<&str>) -> Option<String> {
        match Channel::from(channel) {
            Channel::Telegram if self.telegram => None,
            Channel::Telegram => Some(
                "channel \"telegram\" is not configured (expected [channels.telegram] token_env in clawbus.toml)".into(),
            ),
            Channel::Webhook => {
                let hook = to.unwrap_or_default();
                (!self.hooks.contains(hook)).then(|| {
                    let known: Vec<&str> = self.hooks.iter().map(String::as_str).collect();
                    format!(
                        "no webhook {hook:?} with a deliver_url (expected one of: {})",
                        if known.is_empty() { "none configured".to_string() } else { known.join(", ") }
                    )
                })
            }
            _ => Some(format!(
                "channel {channel:?} has no delivery (expected \"telegram:<chat id>\" or \"webhook:<hook>\")"
            )),
        }
    }

    /// Whether webhook `hook` has a `deliver_url`.
    pub fn has_hook(&self, hook: &str) -> bool {
        self.hooks.contains(hook)
    }
}
