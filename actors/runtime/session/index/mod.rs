//! The session index: session key → session id, times, counts.
//!
//! Its rows sit behind [`IndexRows`]: [`SledIndex`], a tree of the process's database (the
//! embedded default), and [`KvIndex`], a key-value store every node shares (a JetStream KV
//! bucket on NATS). On the embedded bus the sled tree is the index. On a shared bus the shared
//! rows are the ones listings, readers and counts use, so every node lists every session and
//! can show any of them; the sled row stays as this node's note of its own transcript copy.
//! One conformance suite (`tests.rs`) runs against each implementation.

mod held;
mod kv;
mod sled;
#[cfg(test)]
mod tests;

pub use self::kv::KvIndex;
pub use self::sled::SledIndex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// The key-value store (a JetStream KV bucket on NATS) the cluster's rows live in.
pub const SHARED_STORE: &str = "sessions";

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
    /// Unix ms the session was archived: listings hide it unless asked. `None` (and a row
    /// written before archiving existed): not archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_ms: Option<u64>,
}

impl SessionMeta {
    /// A new session of `agent` at `now_ms`, with a fresh session id and no runs.
    pub fn new(key: &str, agent: &str, now_ms: u64) -> Self {
        Self {
            key: key.to_string(),
            agent: agent.to_string(),
            session_id: Uuid::now_v7(),
            created_ms: now_ms,
            updated_ms: now_ms,
            turns: 0,
            tokens_in: 0,
            tokens_out: 0,
            archived_ms: None,
        }
    }

    /// Whether the session is archived.
    pub fn is_archived(&self) -> bool {
        self.archived_ms.is_some()
    }

    /// Counts one finished run.
    fn count(&mut self, run: &FinishedRun) {
        self.updated_ms = run.now_ms;
        self.turns += 1;
        self.tokens_in += run.tokens_in;
        self.tokens_out += run.tokens_out;
    }
}

/// A finished run, as the index counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedRun {
    /// Unix ms it ended.
    pub now_ms: u64,
    /// Prompt tokens it reported.
    pub tokens_in: u64,
    /// Completion tokens it reported.
    pub tokens_out: u64,
}

/// Index storage failure.
#[derive(Debug, thiserror::Error)]
#[error("session index: {0}")]
pub struct IndexError(String);

impl IndexError {
    fn of(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

/// Where index rows live. A writer never loses another's count: creation keeps the first row,
/// and a finished run is added to the row as stored (compare-and-set, tried again on a race).
#[async_trait]
pub trait IndexRows: Send + Sync + 'static {
    /// The row of `key`.
    async fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError>;
    /// Stores `meta` unless its key has a row; the row stored after (the first one's).
    async fn create(&self, meta: SessionMeta) -> Result<SessionMeta, IndexError>;
    /// Adds a finished run to the row of `key`; an error when there is none, or it cannot be
    /// read (it is then left as it is: it is the session's link to its transcript).
    async fn record_run(&self, key: &str, run: FinishedRun) -> Result<(), IndexError>;
    /// Every row, optionally of one agent, most recently active first.
    async fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError>;
    /// Sets (`Some(unix ms)`) or clears (`None`) the archive mark of the row of `key`, keeping
    /// the rest of the row as stored; the row after, or `None` when there is none.
    async fn set_archived(
        &self,
        key: &str,
        archived_ms: Option<u64>,
    ) -> Result<Option<SessionMeta>, IndexError>;
    /// Removes the row of `key`; whether there was one.
    async fn remove(&self, key: &str) -> Result<bool, IndexError>;
}

/// The index of the process: its sled rows, and on a shared bus the cluster's rows.
#[derive(Clone)]
pub struct SessionIndex {
    /// This node's rows: on the embedded bus the index itself; on a shared bus the session id
    /// of this node's transcript copy.
    local: SledIndex,
    /// On a shared bus, the rows every node reads and counts in; `None` on the embedded bus.
    shared: Option<Arc<dyn IndexRows>>,
    /// On a shared bus, the counts its rows could not take yet.
    held: Arc<held::Held>,
}

impl SessionIndex {
    /// Opens the `sessions` tree of `db`: the index of the embedded bus.
    pub fn open(db: &::sled::Db) -> Result<Self, IndexError> {
        Ok(Self {
            local: SledIndex::open(db)?,
            shared: None,
            held: Arc::default(),
        })
    }

    /// The index with the cluster's rows in `kv` (a shared bus).
    pub fn with_shared(self, kv: Arc<dyn bus::kv::KvStore>) -> Self {
        Self {
            shared: Some(Arc::new(KvIndex::new(kv))),
            ..self
        }
    }

    /// The rows listings and readers use.
    fn rows(&self) -> &dyn IndexRows {
        match &self.shared {
            Some(shared) => shared.as_ref(),
            None => &self.local,
        }
    }

    /// The row of `key`, if the session exists.
    pub async fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        self.rows().get(key).await
    }

    /// Every session, optionally of one agent, most recently active first.
    pub async fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        self.rows().list(agent).await
    }

    /// This node's row for `key`, created with a fresh session id if there is none (a session
    /// opened here): it names this node's transcript file. With it, whether it was made now.
    pub(crate) fn get_or_create(
        &self,
        key: &str,
        agent: &str,
        now_ms: u64,
    ) -> Result<(SessionMeta, bool), IndexError> {
        let fresh = SessionMeta::new(key, agent, now_ms);
        let id = fresh.session_id;
        let meta = self.local.get_or_create(fresh)?;
        let made = meta.session_id == id;
        Ok((meta, made))
    }

    /// On a shared bus, enters session `key` in the cluster's rows: called by a run once it
    /// holds the session's lease, so every node lists it from then on. Nothing to do on the
    /// embedded bus, where opening the session made the row.
    ///
    /// The cluster's row is the session. When it has none, the session is this node's row if
    /// that row is new (`opened_new`: made when the session was opened here and not entered
    /// since) or carries counts from before the cluster had rows (they come along, once);
    /// otherwise the session this node knew was deleted on some node meanwhile, and a fresh
    /// one (a new session id, no runs) begins, this node's row following it. Answers whether
    /// that happened: the run must then read the shared transcript as it now stands.
    pub(crate) async fn enter(
        &self,
        key: &str,
        agent: &str,
        now_ms: u64,
        opened_new: bool,
    ) -> Result<bool, IndexError> {
        let Some(shared) = &self.shared else {
            return Ok(false);
        };
        let mine = self.local.row(key)?;
        let carried = mine.as_ref().is_some_and(|m| m.turns > 0);
        match (shared.get(key).await?, mine) {
            (Some(_), _) => {}
            (None, Some(mine)) if opened_new || carried => {
                shared.create(mine).await?;
            }
            (None, _) => {
                let row = shared.create(SessionMeta::new(key, agent, now_ms)).await?;
                self.local.put(&SessionMeta {
                    turns: 0,
                    tokens_in: 0,
                    tokens_out: 0,
                    ..row
                })?;
                return Ok(true);
            }
        }
        if carried {
            // Counted in the cluster's row from now on; kept here they would come back after
            // a delete.
            self.local.clear_counts(key)?;
        }
        Ok(false)
    }

    /// Archives (`Some(unix ms)`) or unarchives (`None`) session `key` in the rows listings
    /// use; the row after, or `None` when the session does not exist.
    pub async fn set_archived(
        &self,
        key: &str,
        archived_ms: Option<u64>,
    ) -> Result<Option<SessionMeta>, IndexError> {
        self.rows().set_archived(key, archived_ms).await
    }

    /// Removes session `key` from the index (the cluster's row and this node's): a message to
    /// it afterwards starts a fresh session. Whether the rows listings use had it.
    pub async fn remove(&self, key: &str) -> Result<bool, IndexError> {
        let had = self.rows().remove(key).await?;
        if self.shared.is_some() {
            self.local.remove(key).await?;
        }
        Ok(had)
    }

    /// The session id this node's row of `key` names (the transcript a live session of this
    /// node writes), if it has one.
    pub(crate) fn local_session_id(&self, key: &str) -> Result<Option<Uuid>, IndexError> {
        Ok(self.local.row(key)?.map(|m| m.session_id))
    }

    /// Records a finished run in the rows listings use. On a shared bus a count its rows cannot
    /// take now (their store unreachable) is held and recorded, in order, once they can (see
    /// `held`: one whose row is gone is dropped there); an error then only when the bound on
    /// held counts was reached. No read is added to a run's end while the store is away.
    pub(crate) async fn record_run(&self, key: &str, run: FinishedRun) -> Result<(), IndexError> {
        let Some(shared) = &self.shared else {
            return self.local.record_run(key, run).await;
        };
        let error = if self.held.any() {
            None
        } else {
            match shared.record_run(key, run).await {
                Ok(()) => return Ok(()),
                Err(e) => Some(e),
            }
        };
        if !self.held.hold(shared, key, run) {
            return Err(IndexError(format!(
                "session {key}: not counted: {} counts already wait for the cluster's index",
                held::MAX_HELD
            )));
        }
        tracing::warn!(session = %key, error = ?error.map(|e| e.to_string()), "Session count held until the cluster's index takes it.");
        Ok(())
    }
}
