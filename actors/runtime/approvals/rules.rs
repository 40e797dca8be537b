//! On a shared store: the entries approved with `always`, kept for every node as `rule.<id>`
//! (the id of the request whose answer approved the entry) in the store the requests live in,
//! with no time to live. Each node copies them into its own tree, which `exec` reads: when it
//! opens the store, and again after its watch of the requests broke (an answer may have been
//! given meanwhile). The nodes up when an answer is given also learn it from the request's
//! record, through that watch.

use super::{ApprovalError, ApprovalRecord, rule_key, storage};
use bus::kv::{KvError, KvStore};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The prefix of every entry's key in the store.
const PREFIX: &str = "rule.";

/// An entry as the store keeps it.
#[derive(Serialize, Deserialize)]
struct Rule {
    agent: String,
    rule: String,
}

/// The entries approved with `always`, in a store every node shares.
pub(super) struct SharedRules {
    pub(super) kv: Arc<dyn KvStore>,
}

/// The store key of the entry approved by request `id`; `None` for an id no request can have.
fn key(id: &str) -> Option<String> {
    let key = format!("{PREFIX}{id}");
    (!id.contains('.') && bus::kv::check_key(&key).is_ok()).then_some(key)
}

impl SharedRules {
    /// Keeps the entry `rec` approved (answered `always`) for every node.
    pub(super) async fn keep(&self, rec: &ApprovalRecord) -> Result<(), ApprovalError> {
        let key = key(&rec.id).ok_or_else(|| storage(format!("bad id {:?}", rec.id)))?;
        self.offer(&key, &rec.agent, &rec.rule).await
    }

    /// Stores the entry under `key` unless it is there already.
    async fn offer(&self, key: &str, agent: &str, rule: &str) -> Result<(), ApprovalError> {
        let value = serde_json::to_vec(&Rule {
            agent: agent.to_string(),
            rule: rule.to_string(),
        })
        .map_err(storage)?;
        match self.kv.create(key, value, None).await {
            Ok(_) | Err(KvError::Exists { .. }) => Ok(()),
            Err(e) => Err(storage(e)),
        }
    }

    /// Makes this node's entries (`tree`) and the cluster's the same: one only here (approved
    /// before the store was shared) is offered to the store, and every one in the store is
    /// copied here.
    pub(super) async fn sync(&self, tree: &sled::Tree) -> Result<(), ApprovalError> {
        for item in tree.iter() {
            let (k, id) = item.map_err(storage)?;
            let Some(split) = k.iter().position(|b| *b == 0) else {
                continue;
            };
            let (agent, rule) = (
                String::from_utf8_lossy(&k[..split]),
                String::from_utf8_lossy(&k[split + 1..]),
            );
            match key(&String::from_utf8_lossy(&id)) {
                Some(key) => self.offer(&key, &agent, &rule).await?,
                None => {
                    tracing::warn!(%agent, %rule, "Approved entry with no request id; kept on this node only.")
                }
            }
        }
        for k in self.kv.keys(PREFIX).await.map_err(storage)? {
            let Some(entry) = self.kv.get(&k).await.map_err(storage)? else {
                continue;
            };
            match serde_json::from_slice::<Rule>(&entry.value) {
                Ok(r) => {
                    let id = k.get(PREFIX.len()..).unwrap_or_default();
                    tree.insert(rule_key(&r.agent, &r.rule), id.as_bytes())
                        .map_err(storage)?;
                }
                Err(e) => {
                    tracing::warn!(key = %k, error = %e, "Approved entry unreadable; skipped.")
                }
            }
        }
        Ok(())
    }
}
