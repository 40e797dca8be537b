//! The outbox: replies and announcements waiting to be delivered, in sled (tree `outbox`; on a
//! shared bus, the cluster's key-value store, below), so a daemon killed between a task's end
//! and its reply reaching the channel delivers it after the restart.
//!
//! - A task's reply is staged before the task's outcome is recorded (the outcome's durable
//!   flush covers the staged entry too), so there is no moment when the task has ended and its
//!   reply is neither sent nor pending. A cron announcement is staged when it is handed over.
//! - An entry is keyed by channel and delivery id (the task id, else `job:<job>`): a duplicate
//!   hand-over is one entry. A message with neither (a chat notice) is not staged.
//! - The channel's delivery actor stages what reaches it, removes an entry once its delivery is
//!   recorded (delivered or failed), and on start takes every pending entry of its channel, in
//!   the order they were staged.
//!
//! Delivery is at least once: a daemon killed after a send and before its record sends it again.
//! Webhook receivers drop a repeat by its `X-Clawbus-Delivery` (the delivery id); Telegram has
//! no such key, so a chat may, rarely, see a reply twice.
//!
//! On a shared bus (NATS) the entries and records live in key-value stores every node shares
//! ([`SharedOutbox`], [`DeliveryRecords`]). Every node's delivery actor hears
//! `channel.<name>.out`, but a message names the node that staged it ([`SENDER_NODE_HEADER`])
//! and only that node's delivery actor takes it from the bus; it claims the entry before
//! sending. An entry whose node died, or whose claim lapsed, is adopted by another node's sweep
//! (see `shared`), so a reply goes out once in the cluster, also when its node does not come
//! back. An entry that could not be staged there (the store unreachable) is staged in the node's
//! own tree, which that node resumes when it starts.
//!
//! A message for a channel that has no delivery actor is not staged: it is recorded failed at
//! once with the reason `NO_CHANNEL`.
//!
//! - `replies`: which finished tasks have a reply to deliver, and where (the task's origin).
//! - [`record`]: what became of each delivery ([`DeliveryRecords`], in sled or shared).
//! - [`shared`]: the entries, claims and adoption on a shared store.
//!
//! The channels' delivery actors (`channels::delivery`) take what is published here.

pub mod record;
pub(crate) mod replies;
pub mod shared;
#[cfg(test)]
mod tests;

pub use record::{DeliveryRecord, DeliveryRecords, DeliveryState};
pub use replies::ReplyTo;
pub use shared::{Claim, SharedOutbox};

use bus::events::TaskEventKind;
use bus::{Bus, BusError, Clock, Envelope, Topic};
use clawbus_core::config::ReplyRoutes;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// The sled tree of pending deliveries.
pub(crate) const OUTBOX_TREE: &str = "outbox";

/// The reason recorded for a message to a channel that has no delivery actor.
pub(crate) const NO_CHANNEL: &str = "no_channel";

/// One pending delivery, as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// Time-ordered: the order entries are taken in.
    staged: Uuid,
    msg: OutboundMessage,
    /// On a shared store: the node that staged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    /// On a shared store: whether a node ever claimed it (a claim that is gone lapsed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    claimed: bool,
}

/// The outbox could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("outbox: {0}")]
pub struct OutboxError(#[source] Box<dyn std::error::Error + Send + Sync>);

fn err(e: impl std::error::Error + Send + Sync + 'static) -> OutboxError {
    OutboxError(Box::new(e))
}

/// The header of an outbound message naming the node whose delivery actor sends it (on a
/// shared bus, where every node's delivery actor hears `channel.<name>.out`).
pub const SENDER_NODE_HEADER: &str = "sender_node";

/// The pending deliveries, the delivery records and which channels deliver; cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    /// The embedded entries (on a shared store: those staged while it was unreachable).
    tree: sled::Tree,
    /// On a shared bus: the cluster's entries and claims.
    shared: Option<SharedOutbox>,
    records: DeliveryRecords,
    routes: ReplyRoutes,
    /// On a shared bus: this node's id. The outbox is the node's own, so what it stages is
    /// delivered by this node alone: each message it publishes names it
    /// ([`SENDER_NODE_HEADER`]), and the other nodes' delivery actors leave it.
    node: Option<String>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// Opens the trees in `db`; `routes` says which channels deliver.
    pub fn open(db: &sled::Db, routes: ReplyRoutes) -> Result<Self, OutboxError> {
        Ok(Self {
            tree: db.open_tree(OUTBOX_TREE).map_err(err)?,
            shared: None,
            records: DeliveryRecords::open(db).map_err(err)?,
            routes,
            node: None,
        })
    }

    /// The outbox of a node on a shared bus: entries and claims in `shared`, records in
    /// `records` (key-value stores every node shares).
    pub fn with_shared(mut self, shared: SharedOutbox, records: Arc<dyn bus::kv::KvStore>) -> Self {
        self.node = Some(shared.node().to_string());
        self.records = self.records.with_shared(records);
        self.shared = Some(shared);
        self
    }

    /// True when its entries are the cluster's (a delivery is claimed before it is sent, and
    /// entries of dead nodes are adopted).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The outbox of node `node` on a shared bus: the messages it publishes are taken from the
    /// bus by this node's delivery actors only.
    pub fn on_node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Whether this node's delivery actor sends a message published with `headers`: one that
    /// names no node (the embedded bus) or names this one.
    pub fn sends(&self, headers: &std::collections::BTreeMap<String, String>) -> bool {
        match (headers.get(SENDER_NODE_HEADER), &self.node) {
            (Some(sender), Some(node)) => sender == node,
            (Some(_), None) | (None, _) => true,
        }
    }

    /// The delivery records.
    pub fn records(&self) -> &DeliveryRecords {
        &self.records
    }

    /// Where finished tasks' replies go.
    pub fn routes(&self) -> &ReplyRoutes {
        &self.routes
    }

    fn key(channel: &str, msg: &OutboundMessage) -> Option<Vec<u8>> {
        msg.delivery_id()
            .map(|id| format!("{channel}/{id}").into_bytes())
    }

    /// Stages `msg` for `channel` unless an entry with its key is already there; a message with
    /// no delivery id, or one never sent (`NO_REPLY`, a heartbeat acknowledgement), is not
    /// staged. Embedded: not flushed, the task store's next flush makes it durable. Shared: in
    /// the cluster's store when it answers (a write the server has stored), else in this
    /// node's own tree.
    pub async fn stage(&self, channel: &str, msg: &OutboundMessage) -> Result<(), OutboxError> {
        let Some(key) = Self::key(channel, msg).filter(|_| !is_silent(&msg.text)) else {
            return Ok(());
        };
        let entry = Entry {
            staged: Uuid::now_v7(),
            msg: msg.clone(),
            node: self.shared.as_ref().map(|s| s.node().to_string()),
            claimed: false,
        };
        if let Some(shared) = &self.shared {
            match shared.stage(channel, &entry).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(channel, delivery = ?msg.delivery_id(), error = %e, "Delivery not staged in the shared outbox; staged in this node's own, which it resumes when it starts.");
                }
            }
        }
        let bytes = serde_json::to_vec(&entry).map_err(err)?;
        // An entry already there keeps its place in the order.
        let _already_staged = self
            .tree
            .compare_and_swap(key, None as Option<&[u8]>, Some(bytes))
            .map_err(err)?
            .is_err();
        Ok(())
    }

    /// Removes the entry of a delivery that has been recorded.
    pub async fn remove(&self, channel: &str, msg: &OutboundMessage) -> Result<(), OutboxError> {
        if let Some(key) = Self::key(channel, msg) {
            self.tree.remove(key).map_err(err)?;
        }
        if let Some(shared) = &self.shared {
            shared.remove(channel, msg).await.map_err(err)?;
        }
        Ok(())
    }

    /// The pending messages of `channel` this node staged, in the order they were staged.
    pub async fn pending(&self, channel: &str) -> Result<Vec<OutboundMessage>, OutboxError> {
        let mut entries = self
            .tree
            .scan_prefix(format!("{channel}/"))
            .map(|item| {
                let (_, bytes) = item.map_err(err)?;
                serde_json::from_slice::<Entry>(&bytes).map_err(err)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(shared) = &self.shared {
            let local: std::collections::HashSet<_> =
                entries.iter().map(|e| e.msg.delivery_id()).collect();
            let own = shared.own(channel).await?;
            entries.extend(
                own.into_iter()
                    .filter(|e| !local.contains(&e.msg.delivery_id())),
            );
        }
        Ok(in_order(entries))
    }

    /// On a shared store: the pending messages of `channel` this node should adopt (their
    /// node died, or a claim on them lapsed), leaving out the delivery ids in `in_hand`; in
    /// the order they were staged. Embedded: none.
    pub async fn adoptable(
        &self,
        channel: &str,
        in_hand: &std::collections::HashSet<String>,
    ) -> Result<Vec<OutboundMessage>, OutboxError> {
        match &self.shared {
            Some(shared) => Ok(in_order(shared.adoptable(channel, in_hand).await?)),
            None => Ok(Vec::new()),
        }
    }

    /// Claims the delivery of `msg` for this node before its first try. Embedded, or a message
    /// with no delivery id: always, with nothing to renew. Shared: `None` when another node
    /// holds it or it was delivered meanwhile.
    pub async fn claim(
        &self,
        channel: &str,
        msg: &OutboundMessage,
    ) -> Result<Option<Claim>, OutboxError> {
        match &self.shared {
            Some(shared) => {
                let staged_here = match Self::key(channel, msg) {
                    Some(key) => self.tree.contains_key(key).map_err(err)?,
                    None => false,
                };
                shared.claim(channel, msg, staged_here).await
            }
            None => Ok(Some(Claim::none())),
        }
    }

    /// Ends a delivery: records `record`, then (once recorded) removes the entry of `msg` and
    /// releases `claim`. Failures are logged: an entry not removed is delivered again later.
    pub async fn settle(
        &self,
        channel: &str,
        msg: &OutboundMessage,
        record: &DeliveryRecord,
        claim: Claim,
    ) {
        match self.records.put(record).await {
            Ok(()) => {
                if let Err(e) = self.remove(channel, msg).await {
                    tracing::error!(channel, delivery = ?msg.delivery_id(), error = %e, "Outbox entry not removed; it will be delivered again.");
                }
            }
            Err(e) => {
                tracing::error!(channel, error = %e, "Delivery outcome not recorded in the store; it stays in the outbox.");
            }
        }
        claim.release().await;
    }

    /// Hands `msg` to `channel`'s delivery actor: staged, then published on `channel.<name>.out`.
    /// To a channel with no delivery actor it is recorded failed (`NO_CHANNEL`) in the
    /// delivery records and on its task's events.
    pub async fn hand_over(
        &self,
        bus: &dyn Bus,
        clock: &Arc<dyn Clock>,
        channel: &str,
        msg: OutboundMessage,
    ) {
        if !self.routes.delivers(channel) {
            self.no_channel(bus, clock, channel, msg).await;
            return;
        }
        if let Err(e) = self.stage(channel, &msg).await {
            tracing::error!(channel, task_id = ?msg.task_id, error = %e, "Delivery not staged in the outbox; it is still handed over.");
        }
        self.publish(bus, channel, &msg).await;
    }

    /// Publishes `msg` on `channel.<channel>.out` (the delivery actor's subscription), naming
    /// this node on a shared bus, and logging a failure: a staged message is still delivered
    /// after the next start.
    pub async fn publish(&self, bus: &dyn Bus, channel: &str, msg: &OutboundMessage) {
        let sent = match (out_topic(channel), serde_json::to_value(msg)) {
            (Ok(topic), Ok(payload)) => {
                let from = msg
                    .task_id
                    .map_or_else(|| channel.to_string(), |t| format!("task:{t}"));
                let mut env = Envelope::event(topic, payload).from(from);
                if let Some(node) = &self.node {
                    env = env.header(SENDER_NODE_HEADER, node.clone());
                }
                bus.publish(env).await
            }
            (Err(e), _) => Err(e),
            (_, Err(e)) => Err(bus::BusError::Invalid(e.to_string())),
        };
        if let Err(e) = sent {
            tracing::error!(channel, task_id = ?msg.task_id, error = %e, "Message not handed to the channel's delivery actor.");
        }
    }

    async fn no_channel(
        &self,
        bus: &dyn Bus,
        clock: &Arc<dyn Clock>,
        channel: &str,
        msg: OutboundMessage,
    ) {
        let to = msg.to.clone().unwrap_or_default();
        tracing::error!(channel, %to, task_id = ?msg.task_id, job = ?msg.job, "No delivery actor for the channel; the message is recorded failed.");
        let record = DeliveryRecord {
            channel: channel.to_string(),
            to: to.clone(),
            task_id: msg.task_id,
            job: msg.job.clone(),
            state: DeliveryState::Failed,
            attempts: 0,
            parts: 0,
            error: Some(NO_CHANNEL.to_string()),
            ended_ms: clock.now_ms(),
        };
        if let Err(e) = self.records.put(&record).await {
            tracing::error!(channel, error = %e, "Delivery outcome not recorded in the store.");
        }
        if let Some(task_id) = msg.task_id {
            let kind = TaskEventKind::DeliveryFailed {
                target: format!("{channel}:{to}"),
                attempts: 0,
                reason: NO_CHANNEL.to_string(),
            };
            if let Err(e) = bus.emit(task_id, kind).await {
                tracing::error!(%task_id, error = %e, "Delivery event not recorded on the task.");
            }
        }
    }
}

/// The messages of `entries`, in the order they were staged.
fn in_order(mut entries: Vec<Entry>) -> Vec<OutboundMessage> {
    entries.sort_by_key(|e| e.staged);
    entries.into_iter().map(|e| e.msg).collect()
}

/// One message to send out, as published on `channel.<name>.out` (by a finished task, by a
/// cron announcement).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// Who gets it on the channel: a Telegram chat id, a webhook's name.
    #[serde(default)]
    pub to: Option<String>,
    /// The text.
    pub text: String,
    /// The task whose reply it is (its events record the delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// The cron job that announced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl OutboundMessage {
    /// The id a receiver can drop a repeat by, and the outbox's key: the task id, else
    /// `job:<job>`; `None` for a message that is neither (a chat notice).
    pub fn delivery_id(&self) -> Option<String> {
        self.task_id
            .map(|t| t.to_string())
            .or_else(|| self.job.as_ref().map(|j| format!("job:{j}")))
    }
}

/// The topic a channel's delivery actor listens on: `channel.<name>.out`.
pub fn out_topic(channel: &str) -> Result<Topic, BusError> {
    Topic::parse(&format!("channel.{channel}.out")).map_err(|e| BusError::Invalid(e.to_string()))
}

/// True for a text that is never delivered: empty, exactly `NO_REPLY`, or a heartbeat acknowledgement
/// (`HEARTBEAT_OK` with at most a few words), as the cron scheduler decides it.
pub fn is_silent(text: &str) -> bool {
    let t = text.trim();
    t.is_empty()
        || t == clawbus_core::jobs::heartbeat::NO_REPLY
        || clawbus_core::jobs::heartbeat::is_ack(t)
}
