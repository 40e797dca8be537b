//! Where the embedded task store keeps its records: the task journal (the daemon's, see
//! [`super::journal`]) or two sled trees of the process's database (a store opened on a database
//! alone). One set of operations over both, so the store's rules are written once.

use super::journal::{self, Journal};
use crate::error::BusError;
use sled::IVec;
use std::sync::Arc;

/// The records and the task-id index, in sled or in the journal.
pub(super) enum Records {
    /// Trees of a sled database, made durable by its flush.
    Sled {
        db: sled::Db,
        tasks: sled::Tree,
        task_ids: sled::Tree,
    },
    /// The task journal, made durable by its flush.
    Journal(Arc<Journal>),
}

fn journal_err(what: &str, e: std::io::Error) -> BusError {
    BusError::storage(what.to_string(), e)
}

impl Records {
    /// The bytes of record `key`.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<IVec>, BusError> {
        match self {
            Self::Sled { tasks, .. } => tasks
                .get(key)
                .map_err(|e| BusError::storage("read task", e)),
            Self::Journal(j) => j
                .get(journal::RECORDS, key)
                .map_err(|e| journal_err("read task", e)),
        }
    }

    /// Sets record `key` to `new` (removes it for `None`) if it is `old` (absent for `None`);
    /// else answers what it is. `what` names the write in an error.
    pub(super) fn swap(
        &self,
        key: &[u8],
        old: Option<IVec>,
        new: Option<IVec>,
        what: &str,
    ) -> Result<Result<(), Option<IVec>>, BusError> {
        match self {
            Self::Sled { tasks, .. } => Ok(tasks
                .compare_and_swap(key, old, new)
                .map_err(|e| BusError::storage(what.to_string(), e))?
                .map_err(|lost| lost.current)),
            Self::Journal(j) => j
                .compare_and_swap(journal::RECORDS, key, old.as_deref(), new)
                .map_err(|e| journal_err(what, e)),
        }
    }

    /// Calls `each` with every record's key and bytes (in key order in sled, in no particular
    /// order in the journal), stopping at its first error.
    pub(super) fn for_each(
        &self,
        mut each: impl FnMut(IVec, IVec) -> Result<(), BusError>,
    ) -> Result<(), BusError> {
        match self {
            Self::Sled { tasks, .. } => {
                for item in tasks.iter() {
                    let (k, v) = item.map_err(|e| BusError::storage("scan tasks", e))?;
                    each(k, v)?;
                }
            }
            Self::Journal(j) => j.for_each(
                journal::RECORDS,
                |e| journal_err("scan tasks", e),
                &mut each,
            )?,
        }
        Ok(())
    }

    /// The records whose key starts with `prefix`.
    pub(super) fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(IVec, IVec)>, BusError> {
        match self {
            Self::Sled { tasks, .. } => tasks
                .scan_prefix(prefix)
                .map(|item| item.map_err(|e| BusError::storage("scan task records", e)))
                .collect(),
            Self::Journal(j) => j
                .scan_prefix(journal::RECORDS, prefix)
                .map_err(|e| journal_err("scan task records", e)),
        }
    }

    /// The request id indexed for `task_id`.
    pub(super) fn indexed(&self, task_id: &[u8]) -> Result<Option<IVec>, BusError> {
        match self {
            Self::Sled { task_ids, .. } => task_ids
                .get(task_id)
                .map_err(|e| BusError::storage("read task id", e)),
            Self::Journal(j) => j
                .get(journal::TASK_IDS, task_id)
                .map_err(|e| journal_err("read task id", e)),
        }
    }

    /// Indexes `task_id` to `request_id` (`None`: removes its entry).
    pub(super) fn index(&self, task_id: &[u8], request_id: Option<&[u8]>) -> Result<(), BusError> {
        match self {
            Self::Sled { task_ids, .. } => match request_id {
                Some(r) => task_ids
                    .insert(task_id, r)
                    .map(|_| ())
                    .map_err(|e| BusError::storage("write task id", e)),
                None => task_ids
                    .remove(task_id)
                    .map(|_| ())
                    .map_err(|e| BusError::storage("remove task id", e)),
            },
            Self::Journal(j) => j
                .set(journal::TASK_IDS, task_id, request_id.map(IVec::from))
                .map_err(|e| journal_err("write task id", e)),
        }
    }

    /// Makes every write so far durable (outside the commit thread: while opening).
    pub(super) fn flush(&self, what: &str) -> Result<(), BusError> {
        match self {
            Self::Sled { db, .. } => crate::commit::flush(db)
                .map(|_| ())
                .map_err(|e| BusError::storage(what.to_string(), e)),
            Self::Journal(j) => j.flush().map_err(|e| journal_err(what, e)),
        }
    }

    /// The flush the commit thread runs. With the journal it flushes the database `db` first:
    /// writers of other trees of it (the outbox's staged replies, the session rows) count on the
    /// task store's next flush to make what they wrote before it durable.
    pub(super) fn flusher(&self, db: &sled::Db) -> crate::commit::Flush {
        let mut sled = crate::commit::sled_flush(db.clone());
        match self {
            Self::Sled { .. } => sled,
            Self::Journal(j) => {
                let j = j.clone();
                Box::new(move || {
                    sled()?;
                    j.flush()
                        .map_err(|e| Arc::new(e) as crate::commit::FlushError)
                })
            }
        }
    }
}
