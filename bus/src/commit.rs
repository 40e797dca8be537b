//! Group commit: one thread owns the store's flush (`sled::Db::flush`, or the task journal's),
//! batching every waiting writer behind one flush.
//!
//! Concurrent `flush_async` calls can deadlock in sled 0.34, and a blocking flush inside an actor
//! stalls its arbiter; so writers insert on their own thread and then wait here for durability.
//! A flush starts as soon as a waiter arrives (a lone commit never waits for company) and takes
//! every waiter queued by then; the waiters that arrive during a flush share the next one. Under
//! load the flushing thread gives way once before taking them, so the flush carries more (see
//! `gather`).
//!
//! Every flush of a sled database goes through [`flush`], which also hands the flushing thread's
//! deferred frees on ([`release_deferred`]).

use crate::error::BusError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use tokio::sync::oneshot;

/// A switch that makes every flush fail while it is on, without flushing: a store fault for
/// tests (a full disk without filling one). Off unless a test turns it on.
#[derive(Debug, Default)]
pub struct FlushFault(AtomicBool);

impl FlushFault {
    /// A switch, off.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Turns the fault on or off.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::SeqCst);
    }

    fn is_on(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the flushing thread has done so far: how well commits were grouped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Flushes made (failed ones too).
    pub flushes: u64,
    /// Commits answered by those flushes.
    pub commits: u64,
}

/// The counters behind [`CommitStats`].
#[derive(Debug, Default)]
struct Counters {
    flushes: AtomicU64,
    commits: AtomicU64,
}

/// Why a flush failed, shared by every waiter of its batch.
#[derive(Debug, Clone, thiserror::Error)]
enum FlushFailed {
    /// The test switch ([`FlushFault`]) is on.
    #[error("injected fault (FlushFault)")]
    Injected,
    /// The store's flush failed.
    #[error(transparent)]
    Store(FlushError),
}

/// Why a store's flush failed.
pub type FlushError = Arc<dyn std::error::Error + Send + Sync>;

/// A store's flush: every write made before the call is durable when it returns `Ok`.
pub type Flush = Box<dyn FnMut() -> Result<(), FlushError> + Send>;

/// [`flush`] of `db`, as the commit thread runs it.
pub fn sled_flush(db: sled::Db) -> Flush {
    Box::new(move || {
        flush(&db)
            .map(|_| ())
            .map_err(|e| Arc::new(e) as FlushError)
    })
}

type Waiter = oneshot::Sender<Result<(), FlushFailed>>;

/// Handle to the flushing thread; dropping it stops the thread and waits for it, so the database
/// is released (and can be reopened) once the handle is gone.
pub struct Committer {
    tx: Option<mpsc::Sender<Waiter>>,
    counters: Arc<Counters>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the flushing thread running `flush`; while `fault` is on, flushes fail.
    pub fn start_flushing(
        mut flush: Flush,
        fault: Option<Arc<FlushFault>>,
    ) -> Result<Self, BusError> {
        let (tx, rx) = mpsc::channel::<Waiter>();
        let counters = Arc::new(Counters::default());
        let counted = counters.clone();
        let thread = std::thread::Builder::new()
            .name("clawbus-commit".into())
            .spawn(move || {
                let mut last_batch = 0;
                while let Ok(first) = rx.recv() {
                    let batch = gather(first, &rx, last_batch, std::thread::yield_now);
                    last_batch = batch.len();
                    let res = match &fault {
                        Some(f) if f.is_on() => Err(FlushFailed::Injected),
                        _ => flush().map_err(FlushFailed::Store),
                    };
                    // Counted before the answers, so a waiter sees its own flush counted.
                    counted.flushes.fetch_add(1, Ordering::Relaxed);
                    counted
                        .commits
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    if let Err(e) = &res {
                        tracing::error!(error = %e, waiters = batch.len(), "Flush to disk failed.");
                    }
                    for w in batch {
                        // A waiter that gave up is fine to skip.
                        let _ = w.send(res.clone());
                    }
                }
            })
            .map_err(|e| BusError::storage("start commit thread", e))?;
        Ok(Self {
            tx: Some(tx),
            counters,
            thread: Some(thread),
        })
    }

    /// What the flushing thread has done so far.
    pub fn stats(&self) -> CommitStats {
        CommitStats {
            flushes: self.counters.flushes.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
        }
    }

    /// Returns once every write made before the call is on disk.
    pub async fn commit(&self) -> Result<(), BusError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| BusError::Closed("commit thread stopped".into()))?
            .send(tx)
            .map_err(|_| BusError::Closed("commit thread stopped".into()))?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(BusError::storage("flush", e)),
            Err(_) => Err(BusError::Closed("commit thread stopped".into())),
        }
    }
}

/// How many commits the last flush carried for the next one to give way first (see [`gather`]):
/// a load that one request at a time does not make.
const GIVE_WAY_AFTER: usize = 8;

/// The waiters one flush answers: `first` and every waiter queued behind it.
///
/// Under load (the last flush carried `last_batch` ≥ [`GIVE_WAY_AFTER`] commits) the flushing
/// thread first gives way once (`give_way`: a yield of its CPU in production), so the threads about
/// to commit as well run first and queue theirs, and the flush carries them too: fewer flushes,
/// each a log write that wakes every idle `sled-io` thread. On the bus bench (2 cores) that made
/// flushes carry 2–3 times as many commits. Below that load a commit is flushed at once: giving way
/// would make it wait for whatever else is running.
fn gather(
    first: Waiter,
    rx: &mpsc::Receiver<Waiter>,
    last_batch: usize,
    give_way: impl FnOnce(),
) -> Vec<Waiter> {
    let mut batch = vec![first];
    if last_batch >= GIVE_WAY_AFTER {
        give_way();
    }
    batch.extend(rx.try_iter());
    batch
}

/// Flushes `db` to disk (sled's `Db::flush`: every write made before the call is durable when it
/// returns) and then hands this thread's deferred frees on ([`release_deferred`]): a flush seals
/// sled's current log buffer, and the old buffer's free is deferred on the flushing thread.
pub fn flush(db: &sled::Db) -> sled::Result<usize> {
    let flushed = db.flush();
    release_deferred();
    flushed
}

/// Hands the frees this thread deferred in sled (old tree nodes, and each 512 KiB log buffer a
/// flush or a full segment sealed) to the process's one collector, which makes them once no
/// thread can still be reading them.
///
/// sled defers its frees through crossbeam-epoch, whose per-thread bag is only handed on when 64
/// frees are in it or the thread ends. A thread that flushes now and then (the storage probe and
/// the flow store's sync, each on whichever blocking thread is free) so kept each buffer its
/// flushes sealed for as long as it lived: 15 log buffers (7.5 MiB) alive after 30,000 tasks,
/// one more every couple of seconds under load, up to 64 per blocking thread. Called after
/// every flush ([`flush`]); threads that write without flushing (the tokio workers, the session
/// shards) defer often enough that their bags turn over. Releasing on every park of those too
/// cost 25,000 instructions a turn (the collector's scan of every thread) for no measured gain.
pub fn release_deferred() {
    crossbeam_epoch::pin().flush();
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("Commit thread panicked.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter() -> Waiter {
        oneshot::channel().0
    }

    #[test]
    fn under_load_the_flush_gives_way_first_and_carries_what_was_queued_meanwhile() {
        let (tx, rx) = mpsc::channel();
        tx.send(waiter()).unwrap();
        // What the threads that ran while the flusher gave way queued.
        let meanwhile = || {
            tx.send(waiter()).unwrap();
            tx.send(waiter()).unwrap();
        };
        let batch = gather(waiter(), &rx, GIVE_WAY_AFTER, meanwhile);
        assert_eq!(
            batch.len(),
            4,
            "the first, the one queued before, two queued meanwhile"
        );
        assert!(rx.try_recv().is_err(), "nothing left behind");
    }

    #[test]
    fn below_that_load_a_commit_is_flushed_at_once_with_what_is_queued() {
        let (tx, rx) = mpsc::channel();
        tx.send(waiter()).unwrap();
        let gave_way = std::cell::Cell::new(false);
        let batch = gather(waiter(), &rx, GIVE_WAY_AFTER - 1, || gave_way.set(true));
        assert_eq!(batch.len(), 2);
        assert!(
            !gave_way.get(),
            "a lone commit does not wait for others to run"
        );
        let batch = gather(waiter(), &rx, 0, || gave_way.set(true));
        assert_eq!(batch.len(), 1);
        assert!(!gave_way.get());
    }
}
