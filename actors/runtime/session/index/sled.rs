//! Index rows in the sled tree `sessions` of the process's database, as JSON by session key.

use super::{FinishedRun, IndexError, IndexRows, SessionMeta};
use async_trait::async_trait;

/// Index rows in a sled tree.
#[derive(Clone)]
pub struct SledIndex {
    tree: ::sled::Tree,
}

impl SledIndex {
    /// Opens the `sessions` tree of `db`.
    pub fn open(db: &::sled::Db) -> Result<Self, IndexError> {
        let tree = db.open_tree("sessions").map_err(IndexError::of)?;
        Ok(Self { tree })
    }

    /// The row of `key`.
    pub fn row(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        match self.tree.get(key.as_bytes()).map_err(IndexError::of)? {
            Some(b) => serde_json::from_slice(&b).map(Some).map_err(IndexError::of),
            None => Ok(None),
        }
    }

    /// The row of `meta`'s key; `meta` stored first when there is none.
    pub fn get_or_create(&self, meta: SessionMeta) -> Result<SessionMeta, IndexError> {
        if let Some(meta) = self.row(&meta.key)? {
            return Ok(meta);
        }
        let bytes = serde_json::to_vec(&meta).map_err(IndexError::of)?;
        // Only the first creator wins; a racing one reads the winner back.
        let swapped = self
            .tree
            .compare_and_swap(meta.key.as_bytes(), None as Option<&[u8]>, Some(bytes))
            .map_err(IndexError::of)?;
        match swapped {
            Ok(()) => Ok(meta),
            Err(_) => self
                .row(&meta.key)?
                .ok_or_else(|| IndexError(format!("session {} vanished", meta.key))),
        }
    }

    /// Stores `meta` as the row of its key, replacing any.
    pub fn put(&self, meta: &SessionMeta) -> Result<(), IndexError> {
        let bytes = serde_json::to_vec(meta).map_err(IndexError::of)?;
        self.tree
            .insert(meta.key.as_bytes(), bytes)
            .map_err(IndexError::of)?;
        Ok(())
    }

    /// Sets the counts of the row of `key` (if any) to zero, keeping the rest as stored.
    pub fn clear_counts(&self, key: &str) -> Result<(), IndexError> {
        let mut unreadable = None;
        self.tree
            .update_and_fetch(key.as_bytes(), |old| {
                let old = old?;
                let cleared = serde_json::from_slice::<SessionMeta>(old).and_then(|meta| {
                    serde_json::to_vec(&SessionMeta {
                        turns: 0,
                        tokens_in: 0,
                        tokens_out: 0,
                        ..meta
                    })
                });
                match cleared {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        unreadable = Some(e);
                        Some(old.to_vec())
                    }
                }
            })
            .map_err(IndexError::of)?;
        match unreadable {
            Some(e) => Err(IndexError(format!(
                "entry of session {key} unreadable: {e}"
            ))),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl IndexRows for SledIndex {
    async fn set_archived(
        &self,
        key: &str,
        archived_ms: Option<u64>,
    ) -> Result<Option<SessionMeta>, IndexError> {
        // Compare-and-set on the bytes read, so a run counted meanwhile is not undone.
        loop {
            let Some(old) = self.tree.get(key.as_bytes()).map_err(IndexError::of)? else {
                return Ok(None);
            };
            let mut meta: SessionMeta = serde_json::from_slice(&old)
                .map_err(|e| IndexError(format!("entry of session {key} unreadable: {e}")))?;
            meta.archived_ms = archived_ms;
            let bytes = serde_json::to_vec(&meta).map_err(IndexError::of)?;
            let swapped = self
                .tree
                .compare_and_swap(key.as_bytes(), Some(old), Some(bytes))
                .map_err(IndexError::of)?;
            if swapped.is_ok() {
                return Ok(Some(meta));
            }
        }
    }

    async fn remove(&self, key: &str) -> Result<bool, IndexError> {
        let old = self.tree.remove(key.as_bytes()).map_err(IndexError::of)?;
        Ok(old.is_some())
    }

    async fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        self.row(key)
    }

    async fn create(&self, meta: SessionMeta) -> Result<SessionMeta, IndexError> {
        self.get_or_create(meta)
    }

    async fn record_run(&self, key: &str, run: FinishedRun) -> Result<(), IndexError> {
        let mut unreadable = None;
        let updated = self
            .tree
            .update_and_fetch(key.as_bytes(), |old| {
                let old = old?;
                // Returning `None` would delete the entry (and the session's link to its
                // transcript): an entry that cannot be read or rewritten is left as it is.
                let updated = serde_json::from_slice::<SessionMeta>(old).and_then(|mut meta| {
                    meta.count(&run);
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
            .map_err(IndexError::of)?;
        match (unreadable, updated) {
            (Some(e), _) => Err(IndexError(format!(
                "entry of session {key} unreadable: {e}"
            ))),
            (None, None) => Err(IndexError(format!("no entry for session {key}"))),
            (None, Some(_)) => Ok(()),
        }
    }

    async fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        let mut out = Vec::new();
        for item in self.tree.iter() {
            let (_, v) = item.map_err(IndexError::of)?;
            let meta: SessionMeta = serde_json::from_slice(&v).map_err(IndexError::of)?;
            if agent.is_none_or(|a| a == meta.agent) {
                out.push(meta);
            }
        }
        out.sort_by_key(|m| std::cmp::Reverse(m.updated_ms));
        Ok(out)
    }
}
