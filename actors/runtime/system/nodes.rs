//! This node among the nodes of a shared bus: a heartbeat in the key-value store `nodes` (a
//! JetStream KV bucket every node shares on NATS; a sled tree on the embedded bus), under
//! `node.<id>`, written every [`HEARTBEAT_EVERY`] with a time to live of [`HEARTBEAT_TTL`]. A
//! node that dies stops writing and its key expires: the live nodes are the keys there.
//!
//! `clawbus nodes` reads them through the gateway (`GET /v1/nodes`).
//!
//! On a bus no other node shares (the embedded one) nobody else reads a heartbeat: none is
//! written (a sled write every 5 s, and the code it runs, kept an idle daemon busy for no
//! reader), and `/v1/nodes` answers this node's [`NodeSource::info`] live.

use super::Clawbus;
use bus::kv::{KvError, KvStore};
use bus::{Clock, LinkStatus};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// How often a node renews its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// How long a heartbeat lives without renewal: three missed beats and the node is gone.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(15);
/// The key-value store of heartbeats.
pub const NODES_STORE: &str = "nodes";
const KEY_PREFIX: &str = "node.";

/// What a node says of itself in its heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's id (`--node-id`, else the id its state folder keeps).
    pub node: String,
    /// The agents it hosts (consumes tasks for).
    pub agents: Vec<String>,
    /// Its lanes: cap, runs holding a slot, runs waiting.
    pub lanes: Vec<NodeLane>,
    /// Its gateway's URL.
    pub gateway: Option<String>,
    /// Its process id.
    pub pid: u32,
    /// When it started (Unix ms, its own clock).
    pub started_ms: u64,
    /// When it wrote this beat (Unix ms, its own clock).
    pub beat_ms: u64,
    /// Its link to the bus's server (`None` on the embedded bus).
    pub bus: Option<LinkStatus>,
}

/// One lane of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLane {
    /// The lane's name.
    pub name: String,
    /// Its concurrency cap.
    pub cap: usize,
    /// Runs holding a slot now.
    pub running: usize,
    /// Runs waiting for one.
    pub waiting: usize,
}

/// The running heartbeat of this node; [`Heartbeat::stop`] removes its key (a clean leave).
/// Nothing on a bus no other node shares.
pub struct Heartbeat(Option<Beating>);

struct Beating {
    kv: Arc<dyn KvStore>,
    key: String,
    task: tokio::task::JoinHandle<()>,
}

impl Heartbeat {
    /// Writes the first beat of `system`'s node (its gateway at `gateway`) and keeps renewing
    /// it. A key already there (this node's previous life, killed less than a TTL ago, or
    /// another node with the same id) is taken over, with a warning.
    pub async fn start(system: &Clawbus, gateway: Option<String>) -> Result<Self, KvError> {
        if !system.kv().is_shared() {
            tracing::debug!(node = %system.node_id(), "No other node shares the bus: no heartbeat is written.");
            return Ok(Self(None));
        }
        let kv = system
            .kv()
            .open(NODES_STORE)
            .await
            .map_err(|e| KvError::storage("open the nodes store", e))?;
        let key = heartbeat_key(system.node_id());
        let beat = Beat {
            system: NodeSource::of(system, gateway),
            kv: kv.clone(),
            key: key.clone(),
        };
        let mut revision = beat.first().await?;
        tracing::info!(node = %beat.system.node, agents = ?beat.system.agents, every_s = HEARTBEAT_EVERY.as_secs(), ttl_s = HEARTBEAT_TTL.as_secs(), "Node heartbeat started.");
        let task = tokio::spawn(async move {
            loop {
                beat.system.clock.sleep(HEARTBEAT_EVERY).await;
                revision = beat.renew(revision).await;
            }
        });
        Ok(Self(Some(Beating { kv, key, task })))
    }

    /// Stops beating and removes the key.
    pub async fn stop(self) {
        let Some(b) = self.0 else {
            return;
        };
        b.task.abort();
        if let Err(e) = b.kv.delete(&b.key, None).await {
            tracing::warn!(key = %b.key, error = %e, "Node heartbeat not removed; it expires by itself.");
        }
    }
}

/// What this node says of itself: a heartbeat's content, read live.
#[derive(Clone)]
pub struct NodeSource {
    node: String,
    agents: Vec<String>,
    gateway: Option<String>,
    started_ms: u64,
    lanes: crate::lane::Lanes,
    bus: Arc<dyn bus::Bus>,
    clock: Arc<dyn Clock>,
}

impl NodeSource {
    /// `system`'s node, its gateway at `gateway`, started now (by the system's clock).
    pub fn of(system: &Clawbus, gateway: Option<String>) -> Self {
        Self {
            node: system.node_id().to_string(),
            agents: system.agents().iter().map(|a| a.id().to_string()).collect(),
            gateway,
            started_ms: system.clock().now_ms(),
            lanes: system.lanes().clone(),
            bus: system.bus().clone(),
            clock: system.clock().clone(),
        }
    }

    /// What the node says of itself now: its lanes as they stand, this moment as its beat.
    pub async fn info(&self) -> NodeInfo {
        let lanes = match self.lanes.status().await {
            Ok(lanes) => lanes
                .into_iter()
                .map(|l| NodeLane {
                    name: l.name,
                    cap: l.cap,
                    running: l.holding.len(),
                    waiting: l.waiting.len(),
                })
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "Lanes not in the heartbeat.");
                Vec::new()
            }
        };
        NodeInfo {
            node: self.node.clone(),
            agents: self.agents.clone(),
            lanes,
            gateway: self.gateway.clone(),
            pid: std::process::id(),
            started_ms: self.started_ms,
            beat_ms: self.clock.now_ms(),
            bus: self.bus.link(),
        }
    }
}

struct Beat {
    system: NodeSource,
    kv: Arc<dyn KvStore>,
    key: String,
}

impl Beat {
    async fn value(&self) -> Vec<u8> {
        serde_json::to_vec(&self.system.info().await).unwrap_or_default()
    }

    /// The first beat: created, or taken over from whoever holds the key.
    async fn first(&self) -> Result<u64, KvError> {
        let value = self.value().await;
        match self
            .kv
            .create(&self.key, value.clone(), Some(HEARTBEAT_TTL))
            .await
        {
            Err(KvError::Exists { .. }) => {
                tracing::warn!(node = %self.system.node, "A heartbeat under this node id is live (this node's previous life, or another node with the same --node-id); taking it over.");
                let current = self.kv.get(&self.key).await?;
                match current {
                    Some(e) => {
                        self.kv
                            .update(&self.key, value, e.revision, Some(HEARTBEAT_TTL))
                            .await
                    }
                    None => self.kv.create(&self.key, value, Some(HEARTBEAT_TTL)).await,
                }
            }
            other => other,
        }
    }

    /// Renews the beat written at `revision`; the revision to expect next.
    async fn renew(&self, revision: u64) -> u64 {
        let value = self.value().await;
        match self
            .kv
            .update(&self.key, value, revision, Some(HEARTBEAT_TTL))
            .await
        {
            Ok(next) => next,
            Err(KvError::WrongRevision { .. }) => {
                tracing::error!(node = %self.system.node, "Another node writes the heartbeat of this node id: give each node its own --node-id.");
                self.first().await.unwrap_or(revision)
            }
            Err(e) => {
                // The server is away (the link says so) or the key expired meanwhile.
                tracing::warn!(node = %self.system.node, error = %e, "Node heartbeat not renewed; trying again.");
                self.first().await.unwrap_or(revision)
            }
        }
    }
}

/// The key of node `node`'s heartbeat: `node.<id>`.
pub fn heartbeat_key(node: &str) -> String {
    format!("{KEY_PREFIX}{node}")
}

/// The live nodes' heartbeats, by node id.
pub async fn live_nodes(kv: &dyn KvStore) -> Result<Vec<NodeInfo>, KvError> {
    let mut nodes = Vec::new();
    for key in kv.keys(KEY_PREFIX).await? {
        let Some(entry) = kv.get(&key).await? else {
            continue; // expired since the listing
        };
        match serde_json::from_slice::<NodeInfo>(&entry.value) {
            Ok(info) => nodes.push(info),
            Err(e) => tracing::warn!(key = %key, error = %e, "Unreadable node heartbeat skipped."),
        }
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(nodes)
}

/// The id of a node started without `--node-id`: made once, kept in the state folder's
/// database (tree `system.meta`), so a restart over the same folder is the same node.
pub fn local_node_id(db: &sled::Db) -> Result<String, sled::Error> {
    let meta = db.open_tree("system.meta")?;
    let fresh = format!("node-{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    match meta.compare_and_swap(b"node", None::<&[u8]>, Some(fresh.as_bytes()))? {
        Ok(()) => Ok(fresh),
        Err(e) => Ok(e
            .current
            .map(|id| String::from_utf8_lossy(&id).into_owned())
            .unwrap_or(fresh)),
    }
}
