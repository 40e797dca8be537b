//! The Telegram channel: Bot API long polling in, `sendMessage` out.
//!
//! - [`TelegramPoller`] (an actor) calls `getUpdates` with `offset` = last `update_id` + 1
//!   (kept in sled, so a restart does not replay) and `timeout` = `poll_timeout`; each text
//!   message from an allowlisted chat becomes a task, routed at ingress like
//!   `POST /v1/channels/telegram/messages`: request id `telegram:<update_id>` (a redelivered
//!   update runs once), session `agent:<id>:telegram:<direct|group>:<chat id>`. A message from
//!   any other chat is logged and dropped; nothing is enqueued.
//! - [`TelegramSink`] sends replies through the `telegram` delivery actor, split into messages
//!   of at most 4,096 UTF-16 units ([`split`]).
//! - Approvals where the person is: an `exec` approval asked by a run whose session is a
//!   Telegram chat is sent to that chat with `/approve <id>` and `/deny <id>`; the answer counts
//!   only from that same chat.

pub mod api;
mod ingress;
mod poller;
pub mod split;

pub use api::{ApiError, BotApi, Update};
pub use poller::{OffsetStore, TelegramHandle, TelegramPoller};

use super::OutboundMessage;
use super::delivery::{SendError, Sink};

/// The session chat type of a Telegram chat type: `private` → `direct`, `group` and
/// `supergroup` → `group`, `channel` → `channel`.
pub fn chat_type(telegram: &str) -> &'static str {
    match telegram {
        "private" => "direct",
        "group" | "supergroup" => "group",
        _ => "channel",
    }
}

/// Sends replies with `sendMessage`, one message per part.
pub struct TelegramSink {
    api: BotApi,
}

impl TelegramSink {
    /// A sink over `api`.
    pub fn new(api: BotApi) -> Self {
        Self { api }
    }
}

#[async_trait::async_trait]
impl Sink for TelegramSink {
    fn parts(&self, text: &str) -> Vec<String> {
        split::split(text, split::MAX_MESSAGE_UTF16)
    }

    async fn send(&self, _: &OutboundMessage, to: &str, part: &str) -> Result<(), SendError> {
        let chat_id: i64 = to.parse().map_err(|_| SendError::Permanent {
            reason: format!("{to:?} is not a Telegram chat id (expected an integer)"),
        })?;
        Ok(self.api.send_message(chat_id, part).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::chat_of_session;

    #[test]
    fn a_telegram_session_names_its_chat() {
        assert_eq!(
            chat_of_session("agent:a:telegram:group:-100123"),
            Some(-100123)
        );
        assert_eq!(chat_of_session("agent:a:telegram:direct:42"), Some(42));
        assert_eq!(chat_of_session("agent:a:api:direct:42"), None);
        assert_eq!(chat_of_session("agent:a:main"), None);
        assert_eq!(chat_type("supergroup"), "group");
        assert_eq!(chat_type("private"), "direct");
    }
}
