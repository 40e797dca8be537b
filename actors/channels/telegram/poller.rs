//! The Telegram poller actor: `getUpdates` in a loop, each batch handed to [`Ingress`], the
//! offset kept in sled; and the approval requests of Telegram sessions sent to their chat.

use super::api::{ApiError, BotApi, Update};
use super::ingress::{Ingress, approval_prompt, is_request};
use actix::prelude::*;
use bus::{Bus, BusError, Delivery, Topic};
use clawbus_core::config::TelegramDef;
use clawbus_core::ids::chat_of_session;
use clawbus_runtime::approvals::{ApprovalRecord, Approvals};
use clawbus_runtime::router::Router;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The sled tree of the poller's state.
pub(super) const TELEGRAM_TREE: &str = "telegram";
const OFFSET_KEY: &[u8] = b"offset";
/// The longest wait between two polls after failures.
const MAX_POLL_BACKOFF: Duration = Duration::from_secs(30);

/// The next `getUpdates` offset, in sled, so a restart does not replay what was taken.
#[derive(Clone)]
pub(crate) struct OffsetStore {
    tree: sled::Tree,
}

impl OffsetStore {
    /// Opens the tree in `db`.
    pub(crate) fn open(db: &sled::Db) -> Result<Self, sled::Error> {
        Ok(Self {
            tree: db.open_tree(TELEGRAM_TREE)?,
        })
    }

    /// The stored offset.
    pub(crate) fn get(&self) -> Result<Option<i64>, sled::Error> {
        Ok(self.tree.get(OFFSET_KEY)?.and_then(|v| {
            let bytes: [u8; 8] = v.as_ref().try_into().ok()?;
            Some(i64::from_be_bytes(bytes))
        }))
    }

    /// Stores the offset.
    pub(crate) fn set(&self, offset: i64) -> Result<(), sled::Error> {
        self.tree.insert(OFFSET_KEY, &offset.to_be_bytes())?;
        Ok(())
    }
}

/// The actor.
pub(crate) struct TelegramPoller {
    api: BotApi,
    poll_timeout: Duration,
    ingress: Ingress,
    offsets: OffsetStore,
    offset: Option<i64>,
    failures: u32,
}

/// Stops polling (shutdown).
#[derive(Message)]
#[rtype(result = "()")]
struct Stop;

/// The handle of the running poller.
#[derive(Clone)]
pub(crate) struct TelegramHandle {
    addr: Addr<TelegramPoller>,
}

impl TelegramHandle {
    /// Starts polling. Must run inside an actix `System`.
    pub(crate) async fn start(
        def: &TelegramDef,
        api: BotApi,
        bus: Arc<dyn Bus>,
        router: Arc<Router>,
        approvals: Approvals,
        offsets: OffsetStore,
    ) -> Result<Self, BusError> {
        let approvals_sub = bus
            .subscribe(Topic::parse("approvals.>").map_err(|e| BusError::Invalid(e.to_string()))?)
            .await?;
        let offset = offsets
            .get()
            .map_err(|e| BusError::storage("telegram offset", e))?;
        let poller = TelegramPoller {
            api,
            poll_timeout: def.poll_timeout,
            ingress: Ingress {
                pipeline: clawbus_runtime::ingress::Ingress::routed(bus.clone(), router),
                bus,
                approvals,
                allow_chats: Arc::new(def.allow_chats.clone()),
            },
            offsets,
            offset,
            failures: 0,
        };
        if def.allow_chats.is_empty() {
            tracing::warn!(
                "[channels.telegram] allow_chats is empty: every Telegram message will be ignored."
            );
        }
        let addr = TelegramPoller::create(move |ctx| {
            ctx.add_stream(approvals_sub.into_stream());
            poller
        });
        Ok(Self { addr })
    }

    /// Stops polling; updates not yet taken stay on Telegram's side for the next start.
    pub(crate) async fn stop(&self) {
        if self.addr.send(Stop).await.is_err() {
            tracing::debug!("Telegram poller already stopped.");
        }
    }
}

impl TelegramPoller {
    fn poll(&mut self, ctx: &mut Context<Self>) {
        let (api, offset, timeout) = (self.api.clone(), self.offset, self.poll_timeout);
        ctx.spawn(
            async move { api.get_updates(offset, timeout).await }
                .into_actor(self)
                .map(|res, act, ctx| act.polled(res, ctx)),
        );
    }

    fn polled(&mut self, res: Result<Vec<Update>, ApiError>, ctx: &mut Context<Self>) {
        let updates = match res {
            Ok(u) => u,
            Err(e) => {
                self.failures = self.failures.saturating_add(1);
                let doubled = Duration::from_secs(1)
                    .saturating_mul(1 << self.failures.min(6))
                    .min(MAX_POLL_BACKOFF);
                let wait = e.retry_after().unwrap_or(doubled);
                tracing::warn!(failures = self.failures, wait_ms = wait.as_millis() as u64, error = %e, "Telegram getUpdates failed; polling again later.");
                ctx.run_later(wait, |act, ctx| act.poll(ctx));
                return;
            }
        };
        self.failures = 0;
        let ingress = self.ingress.clone();
        let fallback = self.offset;
        ctx.spawn(
            async move { take(&ingress, &updates, fallback).await }
                .into_actor(self)
                .map(|(offset, failed), act, ctx| {
                    act.advance(offset);
                    if failed {
                        ctx.run_later(Duration::from_secs(1), |act, ctx| act.poll(ctx));
                    } else {
                        act.poll(ctx);
                    }
                }),
        );
    }

    fn advance(&mut self, offset: Option<i64>) {
        if offset == self.offset {
            return;
        }
        self.offset = offset;
        if let Some(o) = offset {
            if let Err(e) = self.offsets.set(o) {
                tracing::error!(offset = o, error = %e, "Telegram offset not stored; a restart may poll these updates again (they run once).");
            }
        }
    }
}

/// Hands each update to `ingress` in order; returns the offset after the last one taken, and
/// whether one could not be taken (it is polled again).
async fn take(ingress: &Ingress, updates: &[Update], offset: Option<i64>) -> (Option<i64>, bool) {
    let mut offset = offset;
    for update in updates {
        if offset.is_some_and(|o| update.update_id < o) {
            continue;
        }
        if let Err(e) = ingress.handle(update).await {
            tracing::error!(update_id = update.update_id, error = %e, "Telegram update not taken; polling it again.");
            return (offset, true);
        }
        offset = Some(update.update_id + 1);
    }
    (offset, false)
}

impl Actor for TelegramPoller {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(offset = ?self.offset, poll_timeout_s = self.poll_timeout.as_secs(), "Telegram poller started.");
        self.poll(ctx);
    }
}

impl Handler<Stop> for TelegramPoller {
    type Result = ();
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// An event on `approvals.<agent>`.
#[derive(Deserialize)]
struct ApprovalEvent {
    event: String,
    approval: ApprovalRecord,
}

impl StreamHandler<Delivery> for TelegramPoller {
    fn handle(&mut self, item: Delivery, ctx: &mut Context<Self>) {
        let Ok(ev) = serde_json::from_value::<ApprovalEvent>(item.envelope().payload.clone())
        else {
            return;
        };
        if !is_request(ev.approval.state, &ev.event) {
            return;
        }
        let Some(chat) = chat_of_session(&ev.approval.session) else {
            return;
        };
        if !self.ingress.allow_chats.contains(&chat) {
            return;
        }
        let rec = ev.approval;
        let text = approval_prompt(&rec.agent, &rec.id, &rec.command);
        let ingress = self.ingress.clone();
        ctx.spawn(async move { ingress.say(chat, text).await }.into_actor(self));
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        // The approvals subscription ends with the bus; polling goes on until stopped.
    }
}
