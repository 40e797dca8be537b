//! The vendored sled (vendor/README.md) wakes one idle thread of its pool per job: a flush's log
//! write wakes one `sled-io` thread, not all seven that wait (each a sleep and a wake-up). Linux
//! only (it reads the threads' context switches in /proc); alone in its binary, as the pool is
//! the process's.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::time::{Duration, Instant};

/// Flushes measured.
const FLUSHES: u64 = 200;

/// The `sled-io` threads of this process: (state letter, times it gave up its CPU so far) each.
/// Voluntary switches only: a sleep counts, being pushed off the CPU by a busy machine does not.
fn pool_threads() -> Vec<(char, u64)> {
    let mut out = Vec::new();
    for task in fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(name) = fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended
        };
        if !name.starts_with("sled-io") {
            continue;
        }
        let (Ok(stat), Ok(status)) = (
            fs::read_to_string(dir.join("stat")),
            fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        // The state follows the name in parentheses.
        let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
        let switches = status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches"))
            .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
            .sum();
        out.push((state, switches));
    }
    out
}

#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "waits, bounded, for threads the pool starts"
)]
fn a_flush_wakes_one_thread_of_the_pool_not_every_idle_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new()
        .path(dir.path())
        .flush_every_ms(None)
        .open()
        .unwrap();
    db.insert(b"warm", b"up").unwrap();
    db.flush().unwrap();
    // The pool starts seven threads on its first job; wait until every one of them waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let threads = pool_threads();
        if threads.len() >= 7 && threads.iter().all(|(state, _)| *state == 'S') {
            break;
        }
        assert!(Instant::now() < deadline, "pool threads: {threads:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let total = || pool_threads().iter().map(|(_, n)| n).sum::<u64>();
    let before = total();
    for i in 0..FLUSHES {
        db.insert(i.to_be_bytes(), b"value").unwrap();
        db.flush().unwrap();
    }
    let per_flush = (total() - before) as f64 / FLUSHES as f64;
    // One thread woken: its sleep after the write and the write's own waits, about 2 a flush
    // (2.0-2.7 measured); every idle one woken: 9 and more (9.1-9.4 with sled's own pool).
    assert!(
        per_flush < 5.0,
        "the pool's threads slept {per_flush:.1} times a flush: more than one was woken"
    );
}
