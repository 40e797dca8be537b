//! The outbox on a key-value store every node shares (the JetStream KV bucket `cb_outbox` on
//! NATS), so a reply staged on a node that dies is still sent, once, by another.
//!
//! - **Entries** are `e.<channel>.<delivery id>` (escaped): the message, when it was staged and
//!   by which node, and whether a node ever claimed it. Staging is a create: a repeated
//!   hand-over is one entry.
//! - **Claims** are leases (`bus::kv::Leases`) on `c.<channel>.<delivery id>`, living
//!   [`CLAIM_TTL`] past their last renewal: a node's delivery actor claims an entry before its
//!   first try and renews the claim while the delivery goes on (tries, backoff), then records
//!   the outcome, removes the entry and releases the claim. A claim taken marks the entry
//!   `claimed`.
//! - **Adoption:** every node's delivery actor sweeps its channel's entries every
//!   [`SWEEP_EVERY`]. An entry with no live claim is adopted when a claim on it lapsed (it was
//!   claimed once: its claimer died or lost its link) or when the node that staged it has no
//!   heartbeat (it died before claiming). Adopting is claiming: the claim is a create, so one
//!   node wins, and the winner reads the entry again under its claim (one delivered and removed
//!   meanwhile is left).
//!
//! An entry staged by a live node and never claimed is that node's: its delivery actor takes it
//! from the bus message, or from the outbox when it starts again.

use super::{Entry, OutboundMessage, OutboxError, err};
use bus::kv::{KvError, KvStore, Lease, Leases};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a claim lives past its last renewal (renewed every third of it).
pub const CLAIM_TTL: Duration = Duration::from_secs(10);
/// How often each node's delivery actor looks for entries to adopt.
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// The key-value store (bucket) of the shared outbox.
pub const OUTBOX_STORE: &str = "outbox";
/// The prefix of every entry's key.
const ENTRY_PREFIX: &str = "e.";
/// The prefix of every claim's key.
const CLAIM_PREFIX: &str = "c.";

/// The shared half of an outbox: entries, claims and the nodes' heartbeats.
#[derive(Clone)]
pub struct SharedOutbox {
    kv: Arc<dyn KvStore>,
    nodes: Arc<dyn KvStore>,
    /// The key of a node's heartbeat in `nodes`.
    heartbeat_key: fn(&str) -> String,
    claims: Leases,
    node: String,
}

impl std::fmt::Debug for SharedOutbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedOutbox")
            .field("node", &self.node)
            .field("claims", &self.claims)
            .finish_non_exhaustive()
    }
}

/// The key of a message's entry or claim under `prefix`; `None` for a message with no delivery
/// id.
fn key(prefix: &str, channel: &str, msg: &OutboundMessage) -> Option<String> {
    let id = msg.delivery_id()?;
    let channel = bus::kv::escaped_key(prefix, channel);
    Some(bus::kv::escaped_key(&format!("{channel}."), &id))
}

/// The prefix of every entry of `channel`.
fn channel_prefix(channel: &str) -> String {
    format!("{}.", bus::kv::escaped_key(ENTRY_PREFIX, channel))
}

impl SharedOutbox {
    /// The outbox of node `node` in `kv`, telling live nodes by their heartbeats in `nodes`
    /// (under `heartbeat_key` of the node's id); its claims are held as `holder` (the node and this process's life),
    /// living `claim_ttl` ([`CLAIM_TTL`] in a daemon) and timed on `clock`.
    pub fn new(
        kv: Arc<dyn KvStore>,
        nodes: Arc<dyn KvStore>,
        heartbeat_key: fn(&str) -> String,
        clock: Arc<dyn bus::Clock>,
        node: impl Into<String>,
        holder: impl Into<String>,
        claim_ttl: Duration,
    ) -> Self {
        Self {
            claims: Leases::new(kv.clone(), clock, holder, claim_ttl),
            kv,
            nodes,
            heartbeat_key,
            node: node.into(),
        }
    }

    /// The node it stages for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Creates the entry of `msg` unless one is there (it keeps its place in the order).
    pub(super) async fn stage(&self, channel: &str, entry: &Entry) -> Result<(), KvError> {
        let Some(k) = key(ENTRY_PREFIX, channel, &entry.msg) else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(entry).map_err(|e| KvError::storage("encode", e))?;
        match self.kv.create(&k, bytes, None).await {
            Ok(_) | Err(KvError::Exists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes the entry of `msg`.
    pub(super) async fn remove(&self, channel: &str, msg: &OutboundMessage) -> Result<(), KvError> {
        match key(ENTRY_PREFIX, channel, msg) {
            Some(k) => self.kv.delete(&k, None).await,
            None => Ok(()),
        }
    }

    /// Every entry of `channel`, with its key.
    async fn entries(&self, channel: &str) -> Result<Vec<(String, Entry)>, OutboxError> {
        let mut out = Vec::new();
        for k in self.kv.keys(&channel_prefix(channel)).await.map_err(err)? {
            let Some(e) = self.kv.get(&k).await.map_err(err)? else {
                continue; // removed since the listing
            };
            match serde_json::from_slice::<Entry>(&e.value) {
                Ok(entry) => out.push((k, entry)),
                Err(e) => tracing::warn!(key = %k, error = %e, "Unreadable outbox entry skipped."),
            }
        }
        Ok(out)
    }

    /// The entries of `channel` this node staged.
    pub(super) async fn own(&self, channel: &str) -> Result<Vec<Entry>, OutboxError> {
        Ok(self
            .entries(channel)
            .await?
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| e.node.as_deref() == Some(self.node.as_str()))
            .collect())
    }

    /// The entries of `channel` another node should take over: no live claim, and either a
    /// claim on it lapsed or the node that staged it has no heartbeat. Those whose delivery id
    /// is in `in_hand` (being delivered here) are left out.
    pub(super) async fn adoptable(
        &self,
        channel: &str,
        in_hand: &HashSet<String>,
    ) -> Result<Vec<Entry>, OutboxError> {
        let mut alive: BTreeMap<String, bool> = BTreeMap::new();
        let mut out = Vec::new();
        for (_, entry) in self.entries(channel).await? {
            if entry
                .msg
                .delivery_id()
                .is_some_and(|id| in_hand.contains(&id))
            {
                continue;
            }
            let Some(claim) = key(CLAIM_PREFIX, channel, &entry.msg) else {
                continue;
            };
            let stager_alive = match &entry.node {
                Some(node) if alive.contains_key(node) => alive[node],
                Some(node) => {
                    let live = self
                        .nodes
                        .get(&(self.heartbeat_key)(node))
                        .await
                        .map_err(err)?
                        .is_some();
                    alive.insert(node.clone(), live);
                    live
                }
                None => false,
            };
            // The cheap test first: most entries are unclaimed ones of a live node, left to it.
            if !entry.claimed && stager_alive {
                continue;
            }
            if self.claims.holder_of(&claim).await.map_err(err)?.is_none() {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Claims the delivery of `msg` on `channel` for this node: `None` when another node holds
    /// it, or when its entry is gone (delivered and removed meanwhile) and `staged_here` (this
    /// node's own store holds it) is false.
    pub(super) async fn claim(
        &self,
        channel: &str,
        msg: &OutboundMessage,
        staged_here: bool,
    ) -> Result<Option<Claim>, OutboxError> {
        let (Some(entry_key), Some(claim_key)) = (
            key(ENTRY_PREFIX, channel, msg),
            key(CLAIM_PREFIX, channel, msg),
        ) else {
            return Ok(Some(Claim::none()));
        };
        let Some(lease) = self.claims.try_acquire(&claim_key).await.map_err(err)? else {
            return Ok(None);
        };
        // Read again under the claim: an entry delivered and removed meanwhile is not sent.
        match self.kv.get(&entry_key).await {
            Ok(Some(found)) => {
                if let Ok(mut entry) = serde_json::from_slice::<Entry>(&found.value)
                    && !entry.claimed
                {
                    entry.claimed = true;
                    let bytes = serde_json::to_vec(&entry).map_err(err)?;
                    // A lost race (another write of the entry) only leaves the mark unset.
                    if let Err(e) = self
                        .kv
                        .update(&entry_key, bytes, found.revision, None)
                        .await
                    {
                        tracing::debug!(key = %entry_key, error = %e, "Outbox entry not marked claimed.");
                    }
                }
                Ok(Some(Claim::held(lease)))
            }
            Ok(None) if staged_here => Ok(Some(Claim::held(lease))),
            Ok(None) => {
                if let Err(e) = lease.release().await {
                    tracing::debug!(key = %claim_key, error = %e, "Claim not released.");
                }
                Ok(None)
            }
            Err(e) => {
                if let Err(e) = lease.release().await {
                    tracing::debug!(key = %claim_key, error = %e, "Claim not released.");
                }
                Err(err(e))
            }
        }
    }
}

/// The claim on one delivery: renewed in the background until it is released (or dropped,
/// which releases it too); [`Claim::is_lost`] says when another node may have taken it over.
#[derive(Debug)]
pub struct Claim {
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    lost: Arc<AtomicBool>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Claim {
    /// No claim to hold: the embedded outbox, a message with no delivery id, or a delivery
    /// sent while the shared store could not be reached.
    pub fn none() -> Self {
        Self { held: None }
    }

    /// A claim taken as `lease`, renewed from now on.
    fn held(mut lease: Lease) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let flag = lost.clone();
        let task = tokio::spawn(async move {
            let gone = tokio::select! {
                lost = lease.keep() => Some(lost),
                _ = stopped => None,
            };
            match gone {
                Some(why) => {
                    tracing::warn!(claim = %lease.key(), error = %why, "Delivery claim lost; another node may send it.");
                    flag.store(true, Ordering::Release);
                }
                None => {
                    let key = lease.key().to_string();
                    if let Err(e) = lease.release().await {
                        tracing::warn!(claim = %key, error = %e, "Delivery claim not released; it lapses by itself.");
                    }
                }
            }
        });
        Self {
            held: Some(Held { lost, stop, task }),
        }
    }

    /// True once the claim could not be kept: the delivery is no longer this node's.
    pub fn is_lost(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|h| h.lost.load(Ordering::Acquire))
    }

    /// Releases the claim (after the delivery's outcome is recorded and its entry removed).
    pub async fn release(mut self) {
        if let Some(held) = self.held.take() {
            let _ = held.stop.send(());
            if let Err(e) = held.task.await {
                tracing::warn!(error = %e, "Delivery claim's renewals ended abnormally.");
            }
        }
    }

    /// Stops renewing without releasing, as a node that died would.
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        if let Some(held) = self.held.take() {
            held.task.abort();
            // Kept, so the renewing task does not take the stop for a release.
            std::mem::forget(held.stop);
        }
    }
}
