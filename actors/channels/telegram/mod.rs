//! The Telegram channel: Bot API long polling in, `sendMessage` out.
//!
//! - [`TelegramPoller`] (an actor) calls `getUpdates` with `offset` = last `update_id` + 1
//!   (kept in the [`offset`] store, so a restart does not replay) and `timeout` =
//!   `poll_timeout`; each text
//!   message from an allowlisted chat becomes a task, routed at ingress like
//!   `POST /v1/channels/telegram/messages`: request id `telegram:<update_id>` (a redelivered
//!   update runs once), session `agent:<id>:telegram:<direct|group>:<chat id>`. A message from
//!   any other chat is logged and dropped; nothing is enqueued.
//! - [`TelegramSink`] sends replies through the `telegram` delivery actor, split into messages
//!   of at most 4,096 UTF-16 units ([`split`]).
//! - Approvals where the person is: an `exec` approval asked by a run whose session is a
//!   Telegram chat is sent to that chat with `/approve <id>` and `/deny <id>`; the answer counts
//!   only from that same chat.
//! - On a shared bus (NATS) the channel runs on one node at a time: the node holding its lease
//!   ([`hold`]) polls, and the offset is the cluster's; each node's delivery actor sends the
//!   replies of the runs it ran.

pub(crate) mod api;
pub(crate) mod hold;
mod ingress;
pub(crate) mod offset;
mod poller;
pub(crate) mod split;

pub(crate) use api::BotApi;
pub(crate) use poller::TelegramHandle;

use offset::OffsetStore;

use super::OutboundMessage;
use super::delivery::{SendError, Sink};

/// The Telegram channel, prepared: the Bot API with the token read from the environment before
/// the system starts. Started, it is the `telegram` delivery actor and the poller.
pub(crate) struct TelegramChannel {
    def: clawbus_core::config::TelegramDef,
    api: BotApi,
}

impl TelegramChannel {
    /// The channel when `[channels.telegram]` is configured, else `None`; fails when its
    /// `token_env` is unset or empty.
    pub(crate) fn prepare(
        config: &clawbus_core::config::Config,
    ) -> Result<Option<Self>, crate::ChannelError> {
        let telegram = config
            .channels
            .get(clawbus_core::ids::Channel::Telegram.as_str());
        let Some(def) = telegram.and_then(|c| c.telegram.as_ref()) else {
            return Ok(None);
        };
        let token = std::env::var(&def.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| crate::ChannelError::MissingToken {
                env: def.token_env.clone(),
            })?;
        Ok(Some(Self {
            api: BotApi::new(&def.base_url, token.trim()),
            def: def.clone(),
        }))
    }
}

#[async_trait::async_trait(?Send)]
impl crate::Prepared for TelegramChannel {
    async fn start(
        self: Box<Self>,
        system: &clawbus_runtime::system::Clawbus,
    ) -> Result<Box<dyn crate::Channel>, crate::ChannelError> {
        let sink = TelegramSink::new(self.api.clone());
        let delivery = crate::delivery::DeliveryHandle::start(
            clawbus_core::ids::Channel::Telegram.as_str(),
            std::sync::Arc::new(sink),
            crate::delivery::DeliveryDeps::of(system),
        )
        .await?;
        let (offsets, hold) = if system.kv().is_shared() {
            let store = system.kv().open(offset::CHANNEL_STORE).await?;
            let life = uuid::Uuid::new_v4().simple().to_string();
            let leases = bus::kv::Leases::new(
                store.clone(),
                system.clock().clone(),
                format!("{}/{}", system.node_id(), &life[..12]),
                system.config().bus.session_lease_ttl,
            );
            (OffsetStore::Shared(store), Some(hold::Hold::new(leases)))
        } else {
            let offsets =
                OffsetStore::local(system.db()).map_err(|source| crate::ChannelError::State {
                    what: "telegram offset",
                    source,
                })?;
            (offsets, None)
        };
        let poller = TelegramHandle::start(&self.def, self.api, system, offsets, hold).await?;
        Ok(Box::new(RunningTelegram { delivery, poller }))
    }
}

/// The running Telegram channel: its poller stops before the drain (updates not yet taken stay
/// on Telegram's side), its delivery actor goes on through it.
struct RunningTelegram {
    delivery: crate::delivery::DeliveryHandle,
    poller: TelegramHandle,
}

#[async_trait::async_trait]
impl crate::Channel for RunningTelegram {
    fn name(&self) -> &str {
        self.delivery.channel()
    }

    async fn stop_input(&self) {
        self.poller.stop().await;
    }
}

/// The session chat type of a Telegram chat type: `private` → `direct`, `group` and
/// `supergroup` → `group`, `channel` → `channel`.
pub(crate) fn chat_type(telegram: &str) -> &'static str {
    match telegram {
        "private" => "direct",
        "group" | "supergroup" => "group",
        _ => "channel",
    }
}

/// Sends replies with `sendMessage`, one message per part.
pub(crate) struct TelegramSink {
    api: BotApi,
}

impl TelegramSink {
    /// A sink over `api`.
    pub(crate) fn new(api: BotApi) -> Self {
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
    use clawbus_core::ids::chat_of_session;

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
