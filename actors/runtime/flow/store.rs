//! Flow runs in the store, behind [`FlowStore`]: the run records, the request ids that started
//! them, and the sticky cancels (apart from the record, so the run's writer never overwrites one).
//! [`SledFlows`] keeps them in trees of the system's sled database.

use super::run::FlowRun;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A store failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowStoreError {
    /// The storage failed.
    #[error("flow store: {0}")]
    Storage(String),
    /// A record could not be read back.
    #[error("flow store: corrupt record {key}: {reason}")]
    Corrupt {
        /// The record's key.
        key: String,
        /// Why.
        reason: String,
    },
}

fn storage(e: impl std::fmt::Display) -> FlowStoreError {
    FlowStoreError::Storage(e.to_string())
}

/// Where flow runs live. One writer per run (its driver) writes its record; cancels and request
/// ids are compare-and-swap, so several drivers and handles may share a store.
pub trait FlowStore: Send + Sync + 'static {
    /// Writes a run's record.
    fn put(&self, run: &FlowRun) -> Result<(), FlowStoreError>;
    /// A run by id.
    fn get(&self, id: &str) -> Result<Option<FlowRun>, FlowStoreError>;
    /// Every run, oldest first.
    fn list(&self) -> Result<Vec<FlowRun>, FlowStoreError>;
    /// Ties `request_id` to `run_id` unless it is tied already: the run id it is tied to.
    fn claim(&self, request_id: &str, run_id: &str) -> Result<String, FlowStoreError>;
    /// The run id `request_id` is tied to, if any.
    fn claimed(&self, request_id: &str) -> Result<Option<String>, FlowStoreError>;
    /// Records a cancel (the first reason stays): the reason that holds.
    fn cancel(&self, run_id: &str, reason: &str) -> Result<String, FlowStoreError>;
    /// The cancel of a run, if any.
    fn cancelled(&self, run_id: &str) -> Result<Option<String>, FlowStoreError>;
    /// Makes every write so far durable.
    fn sync(&self) -> Result<(), FlowStoreError>;
}

/// The flow trees `flow.runs`, `flow.defs` (each run's flow, written once), `flow.requests`,
/// `flow.cancels` of a sled database.
#[derive(Clone)]
pub struct SledFlows {
    db: sled::Db,
    runs: sled::Tree,
    defs: sled::Tree,
    requests: sled::Tree,
    cancels: sled::Tree,
}

impl std::fmt::Debug for SledFlows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SledFlows")
    }
}

impl SledFlows {
    /// Opens (creating) the flow trees of `db`.
    pub fn open(db: &sled::Db) -> Result<Self, FlowStoreError> {
        Ok(Self {
            db: db.clone(),
            runs: db.open_tree("flow.runs").map_err(storage)?,
            defs: db.open_tree("flow.defs").map_err(storage)?,
            requests: db.open_tree("flow.requests").map_err(storage)?,
            cancels: db.open_tree("flow.cancels").map_err(storage)?,
        })
    }
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, FlowStoreError> {
    serde_json::to_vec(v).map_err(storage)
}

fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T, FlowStoreError> {
    serde_json::from_slice(bytes).map_err(|e| FlowStoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

/// Stores `value` under `key` unless a value is there: the value that holds.
fn first_wins(tree: &sled::Tree, key: &str, value: &str) -> Result<String, FlowStoreError> {
    let swapped = tree
        .compare_and_swap(key.as_bytes(), None::<&[u8]>, Some(value.as_bytes()))
        .map_err(storage)?;
    Ok(match swapped {
        Ok(()) => value.to_string(),
        Err(e) => e
            .current
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_else(|| value.to_string()),
    })
}

/// A run's record without its flow (stored once, apart): every step rewrites only this.
#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    request_id: &'a Option<String>,
    inputs: &'a serde_json::Map<String, serde_json::Value>,
    state: super::run::RunState,
    created_ms: u64,
    deadline_ms: Option<u64>,
    ended_ms: Option<u64>,
    cancelled: &'a Option<String>,
    nodes: &'a std::collections::BTreeMap<String, super::run::NodeRun>,
}

/// [`Row`] read back.
#[derive(serde::Deserialize)]
struct OwnedRow {
    id: String,
    request_id: Option<String>,
    inputs: serde_json::Map<String, serde_json::Value>,
    state: super::run::RunState,
    created_ms: u64,
    deadline_ms: Option<u64>,
    ended_ms: Option<u64>,
    cancelled: Option<String>,
    nodes: std::collections::BTreeMap<String, super::run::NodeRun>,
}

impl SledFlows {
    fn read(&self, key: &[u8], row: &[u8]) -> Result<FlowRun, FlowStoreError> {
        let r: OwnedRow = decode(key, row)?;
        let def = match self.defs.get(key).map_err(storage)? {
            Some(d) => decode(key, &d)?,
            None => {
                return Err(FlowStoreError::Corrupt {
                    key: String::from_utf8_lossy(key).into_owned(),
                    reason: "the run's flow is missing".into(),
                });
            }
        };
        Ok(FlowRun {
            id: r.id,
            request_id: r.request_id,
            def,
            inputs: r.inputs,
            state: r.state,
            created_ms: r.created_ms,
            deadline_ms: r.deadline_ms,
            ended_ms: r.ended_ms,
            cancelled: r.cancelled,
            nodes: r.nodes,
        })
    }
}

impl FlowStore for SledFlows {
    fn put(&self, run: &FlowRun) -> Result<(), FlowStoreError> {
        let key = run.id.as_bytes();
        if !self.defs.contains_key(key).map_err(storage)? {
            self.defs.insert(key, encode(&run.def)?).map_err(storage)?;
        }
        let row = Row {
            id: &run.id,
            request_id: &run.request_id,
            inputs: &run.inputs,
            state: run.state,
            created_ms: run.created_ms,
            deadline_ms: run.deadline_ms,
            ended_ms: run.ended_ms,
            cancelled: &run.cancelled,
            nodes: &run.nodes,
        };
        self.runs.insert(key, encode(&row)?).map_err(storage)?;
        Ok(())
    }

    fn get(&self, id: &str) -> Result<Option<FlowRun>, FlowStoreError> {
        match self.runs.get(id.as_bytes()).map_err(storage)? {
            Some(v) => self.read(id.as_bytes(), &v).map(Some),
            None => Ok(None),
        }
    }

    fn list(&self) -> Result<Vec<FlowRun>, FlowStoreError> {
        self.runs
            .iter()
            .map(|kv| {
                let (k, v) = kv.map_err(storage)?;
                self.read(&k, &v)
            })
            .collect()
    }

    fn claim(&self, request_id: &str, run_id: &str) -> Result<String, FlowStoreError> {
        first_wins(&self.requests, request_id, run_id)
    }

    fn claimed(&self, request_id: &str) -> Result<Option<String>, FlowStoreError> {
        Ok(self
            .requests
            .get(request_id.as_bytes())
            .map_err(storage)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    fn cancel(&self, run_id: &str, reason: &str) -> Result<String, FlowStoreError> {
        first_wins(&self.cancels, run_id, reason)
    }

    fn cancelled(&self, run_id: &str) -> Result<Option<String>, FlowStoreError> {
        Ok(self
            .cancels
            .get(run_id.as_bytes())
            .map_err(storage)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    fn sync(&self) -> Result<(), FlowStoreError> {
        bus::commit::flush(&self.db).map_err(storage)?;
        Ok(())
    }
}
