//! A thread's deferred frees in sled reach the collector while the thread still lives once it
//! calls `release_deferred` (or flushes through `bus::commit::flush`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// How many times the test thread tries to advance the epoch and collect: each try takes up to
/// eight bags, and other threads' brief pins can hold an advance back, so many tries, no waiting.
const TRIES: usize = 200_000;

/// Defers a free the way sled does (its re-export of the collector it uses), on a thread that
/// then stays alive; `release` says whether that thread hands its bag on. Returns whether the
/// free was made while the thread lived.
fn freed_while_alive(release: impl FnOnce() + Send + 'static) -> bool {
    let freed = Arc::new(AtomicBool::new(false));
    let (deferred_tx, deferred_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let flag = freed.clone();
    let thread = std::thread::spawn(move || {
        let guard = sled::crossbeam_pin();
        guard.defer(move || flag.store(true, Ordering::SeqCst));
        drop(guard);
        release();
        deferred_tx.send(()).unwrap();
        // A thread that ends hands its bag on anyway: this one lives until the test is done.
        let _ = end_rx.recv();
    });
    deferred_rx.recv().unwrap();
    for _ in 0..TRIES {
        if freed.load(Ordering::SeqCst) {
            break;
        }
        bus::commit::release_deferred();
    }
    let was_freed = freed.load(Ordering::SeqCst);
    drop(end_tx);
    thread.join().unwrap();
    was_freed
}

#[test]
fn a_released_free_is_made_while_its_thread_lives() {
    assert!(freed_while_alive(bus::commit::release_deferred));
}

#[test]
fn a_flush_releases_the_flushing_threads_frees() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    db.insert("k", "v").unwrap();
    assert!(freed_while_alive(move || {
        bus::commit::flush(&db).unwrap();
    }));
}

#[test]
fn an_unreleased_free_stays_with_its_live_thread() {
    // Why the release is needed: without it the free waits in the thread's bag.
    assert!(!freed_while_alive(|| {}));
}
