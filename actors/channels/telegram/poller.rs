//! The Telegram poller actor: `getUpdates` in a loop, each batch handed to [`Ingress`], the
//! offset kept in the [`OffsetStore`]; and the approval requests of Telegram sessions sent to
//! their chat.
//!
//! On a shared bus the poller polls only while it holds the channel's lease ([`super::hold`]):
//! a node without it stands by, and takes over once the holder releases it (a clean stop) or
//! stops renewing it (it died). The new holder reads the shared offset after taking the lease.

use super::api::{ApiError, BotApi, Update};
use super::hold::{Hold, Kept};
use super::ingress::{Ingress, approval_prompt, is_request};
use super::offset::OffsetStore;
use actix::prelude::*;
use bus::{BusError, Delivery, Topic};
use clawbus_core::config::TelegramDef;
use clawbus_core::ids::chat_of_session;
use clawbus_runtime::approvals::ApprovalRecord;
use clawbus_runtime::system::Clawbus;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The longest wait between two polls after failures.
const MAX_POLL_BACKOFF: Duration = Duration::from_secs(30);

/// The actor.
pub(crate) struct TelegramPoller {
    api: BotApi,
    poll_timeout: Duration,
    ingress: Ingress,
    offsets: OffsetStore,
    offset: Option<i64>,
    failures: u32,
    /// The channel's lease on a shared bus; `None` on the embedded bus (always polls).
    hold: Option<Hold>,
    /// The `getUpdates` under way, dropped when the lease is lost or the poller stops.
    polling: Option<SpawnHandle>,
    /// Raised each time the lease is taken or lost: a poll loop of an earlier term (its poll or
    /// its batch still out when the lease went) ends instead of going on beside the new one.
    term: u64,
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
        system: &Clawbus,
        offsets: OffsetStore,
        hold: Option<Hold>,
    ) -> Result<Self, BusError> {
        let bus = system.bus().clone();
        let approvals_sub = bus
            .subscribe(Topic::parse("approvals.>").map_err(|e| BusError::Invalid(e.to_string()))?)
            .await?;
        // A lease holder reads the offset once it holds the lease.
        let offset = if hold.is_none() {
            offsets
                .get()
                .await
                .map_err(|e| BusError::storage("telegram offset", e))?
        } else {
            None
        };
        let poller = TelegramPoller {
            api,
            poll_timeout: def.poll_timeout,
            ingress: Ingress {
                pipeline: clawbus_runtime::ingress::Ingress::routed(
                    bus.clone(),
                    system.router().clone(),
                ),
                bus,
                outbox: system.outbox().clone(),
                approvals: system.approvals().clone(),
                allow_chats: Arc::new(def.allow_chats.clone()),
            },
            offsets,
            offset,
            failures: 0,
            hold,
            polling: None,
            term: 0,
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
    /// True while this node may poll: always on the embedded bus, while it holds the lease on a
    /// shared one.
    fn holds(&self) -> bool {
        self.hold.as_ref().is_none_or(Hold::is_held)
    }

    /// Polls, if this node may and `term` is still the current one.
    fn poll(&mut self, term: u64, ctx: &mut Context<Self>) {
        if !self.holds() || term != self.term {
            return;
        }
        let (api, offset, timeout) = (self.api.clone(), self.offset, self.poll_timeout);
        let handle = ctx.spawn(
            async move { api.get_updates(offset, timeout).await }
                .into_actor(self)
                .map(move |res, act, ctx| act.polled(res, term, ctx)),
        );
        self.polling = Some(handle);
    }

    fn polled(&mut self, res: Result<Vec<Update>, ApiError>, term: u64, ctx: &mut Context<Self>) {
        if !self.holds() || term != self.term {
            // The lease went while the poll was out: the next holder takes these updates.
            return;
        }
        self.polling = None;
        let updates = match res {
            Ok(u) => u,
            Err(e) => {
                self.failures = self.failures.saturating_add(1);
                let doubled = Duration::from_secs(1)
                    .saturating_mul(1 << self.failures.min(6))
                    .min(MAX_POLL_BACKOFF);
                let wait = e.retry_after().unwrap_or(doubled);
                tracing::warn!(failures = self.failures, wait_ms = wait.as_millis() as u64, error = %e, "Telegram getUpdates failed; polling again later.");
                ctx.run_later(wait, move |act, ctx| act.poll(term, ctx));
                return;
            }
        };
        self.failures = 0;
        let (ingress, offsets) = (self.ingress.clone(), self.offsets.clone());
        let fallback = self.offset;
        ctx.spawn(
            async move {
                let (offset, failed) = take(&ingress, &updates, fallback).await;
                if let Some(o) = offset.filter(|_| offset != fallback)
                    && let Err(e) = offsets.advance(o).await
                {
                    tracing::error!(offset = o, error = %e, "Telegram offset not stored; the next poller may poll these updates again (they run once).");
                }
                (offset, failed)
            }
            .into_actor(self)
            .map(move |(offset, failed), act, ctx| {
                if term != act.term {
                    return;
                }
                act.offset = offset;
                if failed {
                    ctx.run_later(Duration::from_secs(1), move |act, ctx| act.poll(term, ctx));
                } else {
                    act.poll(term, ctx);
                }
            }),
        );
    }

    /// Waits for the channel's lease (shared bus), then reads the offset and polls.
    fn take_lease(&mut self, ctx: &mut Context<Self>) {
        let Some(hold) = &self.hold else { return };
        let waiting = hold.wait();
        ctx.spawn(waiting.into_actor(self).map(|taken, act, ctx| {
            let Some(hold) = act.hold.as_mut() else {
                return;
            };
            match taken {
                Ok(lease) => {
                    let kept = hold.held(lease);
                    ctx.spawn(kept.into_actor(act).map(|end, act, ctx| act.kept(end, ctx)));
                    act.term += 1;
                    act.resume(act.term, ctx);
                }
                Err(wait) => {
                    ctx.run_later(wait, |act, ctx| act.take_lease(ctx));
                }
            }
        }));
    }

    /// Just took the lease: reads the shared offset (where the last holder stopped), then polls.
    fn resume(&mut self, term: u64, ctx: &mut Context<Self>) {
        if term != self.term {
            return;
        }
        let offsets = self.offsets.clone();
        ctx.spawn(async move { offsets.get().await }.into_actor(self).map(
            move |read, act, ctx| match read {
                Ok(_) if term != act.term => {}
                Ok(offset) => {
                    tracing::info!(offset = ?offset, "Telegram channel lease taken; polling on this node.");
                    act.offset = offset;
                    act.poll(term, ctx);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Telegram offset not readable; trying again.");
                    ctx.run_later(Duration::from_secs(1), move |act, ctx| {
                        act.resume(term, ctx)
                    });
                }
            },
        ));
    }

    /// The keeper of the lease ended: lost (polling stops, the lease is waited for again) or
    /// released (the poller is stopping).
    fn kept(&mut self, end: Kept, ctx: &mut Context<Self>) {
        let Some(hold) = self.hold.as_mut() else {
            return;
        };
        hold.ended();
        self.term += 1;
        if let Kept::Lost(why) = end {
            tracing::warn!(error = %why, "Telegram channel lease lost; polling stops on this node until it takes the lease again.");
            if let Some(h) = self.polling.take() {
                ctx.cancel_future(h);
            }
            self.take_lease(ctx);
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
        tracing::info!(offset = ?self.offset, poll_timeout_s = self.poll_timeout.as_secs(), leased = self.hold.is_some(), "Telegram poller started.");
        if self.hold.is_some() {
            self.take_lease(ctx);
        } else {
            self.poll(self.term, ctx);
        }
    }
}

impl Handler<Stop> for TelegramPoller {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(h) = self.polling.take() {
            ctx.cancel_future(h);
        }
        // The lease is released, so another node takes the channel over at once.
        let released = self.hold.as_mut().map(Hold::release);
        Box::pin(
            async move {
                if let Some(released) = released {
                    released.await;
                }
            }
            .into_actor(self)
            .map(|(), _, ctx| ctx.stop()),
        )
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
        if !self.holds() {
            // Every node hears the request; the one polling the channel asks the chat.
            return;
        }
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
