//! The session index in sled: session key → session id, times, counts.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What the index keeps per session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session key (`agent:<id>:<channel>:<chatType>:<peer>`).
    pub key: String,
    /// The agent.
    pub agent: String,
    /// The transcript's id.
    pub session_id: Uuid,
    /// Unix ms created.
    pub created_ms: u64,
    /// Unix ms of the last run.
    pub updated_ms: u64,
    /// Runs finished.
    pub turns: u64,
    /// Prompt tokens reported by the model, summed.
    pub tokens_in: u64,
    /// Completion tokens reported by the model, summed.
    pub tokens_out: u64,
}

/// The index, a sled tree shared by every session of the process.
#[derive(Clone)]
pub struct SessionIndex {
    tree: sled::Tree,
}

/// Index storage failure.
#[derive(Debug, thiserror::Error)]
#[error("session index: {0}")]
pub struct IndexError(String);

impl SessionIndex {
    /// Opens the `sessions` tree of `db`.
    pub fn open(db: &sled::Db) -> Result<Self, IndexError> {
        let tree = db
            .open_tree("sessions")
            .map_err(|e| IndexError(e.to_string()))?;
        Ok(Self { tree })
    }

    /// The entry for a key.
    pub fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        match self
            .tree
            .get(key.as_bytes())
            .map_err(|e| IndexError(e.to_string()))?
        {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| IndexError(e.to_string())),
            None => Ok(None),
        }
    }

    /// The entry for a key, created with a fresh session id if there is none.
    pub(crate) fn get_or_create(
        &self,
        key: &str,
        agent: &str,
        now_ms: u64,
    ) -> Result<SessionMeta, IndexError> {
        if let Some(meta) = self.get(key)? {
            return Ok(meta);
        }
        let meta = SessionMeta {
            key: key.to_string(),
            agent: agent.to_string(),
            session_id: Uuid::now_v7(),
            created_ms: now_ms,
            updated_ms: now_ms,
            turns: 0,
            tokens_in: 0,
            tokens_out: 0,
        };
        let bytes = serde_json::to_vec(&meta).map_err(|e| IndexError(e.to_string()))?;
        // Only the first creator wins; a racing one reads the winner back.
        let swapped = self
            .tree
            .compare_and_swap(key.as_bytes(), None as Option<&[u8]>, Some(bytes))
            .map_err(|e| IndexError(e.to_string()))?;
        match swapped {
            Ok(()) => Ok(meta),
            Err(_) => self
                .get(key)?
                .ok_or_else(|| IndexError(format!("session {key} vanished"))),
        }
    }

    /// Records a finished run.
    pub(crate) fn record_run(
        &self,
        key: &str,
        now_ms: u64,
        tokens_in: u64,
        tokens_out: u64,
    ) -> Result<(), IndexError> {
        let mut unreadable = None;
        self.tree
            .update_and_fetch(key.as_bytes(), |old| {
                let old = old?;
                // Returning `None` would delete the entry (and the session's link to its
                // transcript): an entry that cannot be read or rewritten is left as it is.
                let updated = serde_json::from_slice::<SessionMeta>(old).and_then(|mut meta| {
                    meta.updated_ms = now_ms;
                    meta.turns += 1;
                    meta.tokens_in += tokens_in;
                    meta.tokens_out += tokens_out;
                    serde_json::to_vec(&meta)
                });
                match updated {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        unreadable = Some(e);
                        Some(old.to_vec())
                    }
                }
            })
            .map_err(|e| IndexError(e.to_string()))?;
        match unreadable {
            Some(e) => Err(IndexError(format!(
                "entry of session {key} unreadable: {e}"
            ))),
            None => Ok(()),
        }
    }

    /// Every session, optionally of one agent, most recently active first.
    pub fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        let mut out = Vec::new();
        for item in self.tree.iter() {
            let (_, v) = item.map_err(|e| IndexError(e.to_string()))?;
            let meta: SessionMeta =
                serde_json::from_slice(&v).map_err(|e| IndexError(e.to_string()))?;
            if agent.is_none_or(|a| a == meta.agent) {
                out.push(meta);
            }
        }
        out.sort_by_key(|m| std::cmp::Reverse(m.updated_ms));
        Ok(out)
    }
}
