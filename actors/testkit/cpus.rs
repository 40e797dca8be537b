//! How far apart two of the machine's CPUs are, for benchmarks to print beside their figures.
//!
//! A virtual machine's two vCPUs may sit on cores that share a cache or on cores far apart, and
//! the host may move them while it runs: on the 2-vCPU build machines a cache line passed between
//! two threads took about 40 ns at some moments and about 380 ns at others, and the durable bus
//! figure halved with it (BENCHMARKS.md, "A machine with two speeds"). A benchmark that prints
//! [`cross_cpu_round_trip`] beside its figure says which of the two it ran on.

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long [`cross_cpu_round_trip`] bounces the line.
const PROBE_FOR: Duration = Duration::from_millis(50);

/// Round trips between two reads of the clock.
const BATCH: u64 = 256;

/// What the responder reads as "stop".
const STOP: u64 = u64::MAX;

/// A measured round trip between two CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossCpu {
    /// The two CPUs, by number: the first two this process may run on.
    pub cpus: (usize, usize),
    /// Nanoseconds for one cache line to go from the first CPU to the second and back (the mean
    /// over the probe's round trips).
    pub round_trip_ns: f64,
    /// Round trips made.
    pub round_trips: u64,
}

impl std::fmt::Display for CrossCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cross-CPU round trip (CPUs {} and {}, a cache line bounced between two threads): {:.0} ns",
            self.cpus.0, self.cpus.1, self.round_trip_ns
        )
    }
}

/// The round trip of a cache line between the first two CPUs this process may run on: one thread
/// pinned to each writes a counter the other waits for, for about 50 ms. `None` when the process
/// may run on fewer than two CPUs, or a thread could not be pinned.
pub fn cross_cpu_round_trip() -> Option<CrossCpu> {
    let allowed = sched_getaffinity(None).ok()?;
    let mut cpus = (0..CpuSet::MAX_CPU).filter(|&c| allowed.is_set(c));
    let (first, second) = (cpus.next()?, cpus.next()?);
    let line = Arc::new(AtomicU64::new(0));
    let theirs = line.clone();
    let responder = std::thread::Builder::new()
        .name("cross-cpu-probe".into())
        .spawn(move || -> bool {
            if pin(second).is_err() {
                return false;
            }
            loop {
                let now = theirs.load(Ordering::Acquire);
                if now == STOP {
                    return true;
                }
                // An odd count is a question; the answer is the next count.
                if now % 2 == 1 {
                    theirs.store(now + 1, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
        .ok()?;
    let measured = bounce(&line, first);
    line.store(STOP, Ordering::Release);
    let pinned = responder.join().unwrap_or(false);
    // This thread goes back to every CPU it was allowed before.
    let _ = sched_setaffinity(None, &allowed);
    let (round_trips, elapsed) = measured.filter(|_| pinned)?;
    Some(CrossCpu {
        cpus: (first, second),
        round_trip_ns: elapsed.as_nanos() as f64 / round_trips as f64,
        round_trips,
    })
}

/// Pins this thread to `cpu` and bounces `line` with the responder for [`PROBE_FOR`]: round
/// trips made and the time they took. `None` when this thread could not be pinned, or the
/// responder never answered (it could not be pinned, or never ran).
#[allow(
    clippy::disallowed_methods,
    reason = "a probe of the hardware measures real time"
)]
fn bounce(line: &AtomicU64, cpu: usize) -> Option<(u64, Duration)> {
    pin(cpu).ok()?;
    let started = Instant::now();
    let mut round_trips = 0u64;
    // The clock is read once a batch, not once a round trip (a read costs about as much as a
    // round trip between near CPUs).
    while started.elapsed() < PROBE_FOR {
        for _ in 0..BATCH {
            let ask = 2 * round_trips + 1;
            line.store(ask, Ordering::Release);
            let mut spins = 0u32;
            while line.load(Ordering::Acquire) != ask + 1 {
                spins = spins.wrapping_add(1);
                // A responder that could not pin itself has stopped: give up once the probe's
                // time is well over.
                if spins % 4096 == 0 && started.elapsed() > 2 * PROBE_FOR {
                    return None;
                }
                std::hint::spin_loop();
            }
            round_trips += 1;
        }
    }
    Some((round_trips, started.elapsed()))
}

fn pin(cpu: usize) -> rustix::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_bounces_between_two_distinct_allowed_cpus_and_gives_the_thread_back_its_cpus() {
        let before = sched_getaffinity(None).unwrap();
        let allowed = before.count();
        let probe = cross_cpu_round_trip();
        if allowed < 2 {
            assert_eq!(probe, None, "one CPU: nothing to measure");
            return;
        }
        let probe = probe.expect("two CPUs allowed: a figure");
        assert_ne!(probe.cpus.0, probe.cpus.1);
        assert!(before.is_set(probe.cpus.0) && before.is_set(probe.cpus.1));
        assert!(probe.round_trips > 0);
        assert!(probe.round_trip_ns.is_finite() && probe.round_trip_ns > 0.0);
        assert!(probe.to_string().contains("ns"));
        let after = sched_getaffinity(None).unwrap();
        assert_eq!(after.count(), allowed, "the caller's CPUs are restored");
    }
}
