//! Session shards: session actors spread over one arbiter (thread) per core, so turns of
//! different sessions run in parallel while each session keeps its own order.

use super::SessionActor;
use actix::{Actor, Addr, Arbiter, ArbiterHandle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Starts session actors on a fixed set of arbiters, round robin.
///
/// A session actor and the runs it spawns stay on its arbiter for its whole life, so the order
/// of one session's runs is its mailbox order; sessions on different arbiters share nothing but
/// the stores.
#[derive(Clone)]
pub struct SessionShards {
    inner: Arc<Inner>,
}

struct Inner {
    arbiters: Vec<ArbiterHandle>,
    /// The threads of our own, stopped by [`SessionShards::stop`] or on drop.
    owned: Mutex<Vec<Arbiter>>,
    next: AtomicUsize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(owned) = self.owned.get_mut() {
            for a in owned.iter() {
                a.stop();
            }
        }
    }
}

impl SessionShards {
    /// `count` arbiters of their own (at least 1). Must be called inside an actix `System`.
    pub fn start(count: usize) -> Self {
        let owned: Vec<Arbiter> = (0..count.max(1)).map(|_| Arbiter::new()).collect();
        let arbiters = owned.iter().map(Arbiter::handle).collect();
        Self {
            inner: Arc::new(Inner {
                arbiters,
                owned: Mutex::new(owned),
                next: AtomicUsize::new(0),
            }),
        }
    }

    /// One arbiter per core this process may run on (`taskset` is respected).
    pub(crate) fn per_core() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        tracing::info!(shards = cores, "Session shards started, one per core.");
        Self::start(cores)
    }

    /// Stops the arbiters of our own and waits for their threads: the session actors on them
    /// are gone (and the stores they held released) when this returns.
    pub async fn stop(&self) {
        let owned: Vec<Arbiter> = match self.inner.owned.lock() {
            Ok(mut o) => o.drain(..).collect(),
            Err(_) => return,
        };
        let joined = tokio::task::spawn_blocking(move || {
            for a in owned {
                a.stop();
                if a.join().is_err() {
                    tracing::warn!("A session shard thread ended abnormally.");
                }
            }
        })
        .await;
        if let Err(e) = joined {
            tracing::warn!(error = %e, "Session shards not joined.");
        }
    }

    /// Starts a session actor on the next arbiter.
    pub(crate) fn start_session(&self, actor: SessionActor) -> Addr<SessionActor> {
        let i = self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.arbiters.len();
        SessionActor::start_in_arbiter(&self.inner.arbiters[i], move |_| actor)
    }
}
