//! The Telegram channel's lease on a shared bus: one node polls at a time.
//!
//! Telegram allows one `getUpdates` long poll per bot (a second one ends the first with `409
//! Conflict`), and a cluster must turn each update into one task, so on NATS the poller first
//! takes the lease `telegram.lease` in the shared store
//! [`CHANNEL_STORE`](super::offset::CHANNEL_STORE) (`bus::kv::Leases`: create with a time to
//! live, renewed every third of it, deleted by revision on a clean stop). The other nodes wait
//! for it, woken by its deletion or its expiry: a holder killed with SIGKILL stops renewing and
//! another node takes over after the time to live. A holder whose renewal finds another
//! revision, or that could not renew in time, stops polling and waits for the lease again.
//!
//! Should two nodes ever poll at once (a holder cut off from the store that has not noticed
//! yet), an update still becomes one task (its request id is `telegram:<update_id>`) and the
//! shared offset never moves back.

use bus::kv::{Lease, LeaseError, Leases};
use std::future::Future;
use std::time::Duration;
use tokio::sync::oneshot;

/// The lease's key in the channels' shared store.
pub(crate) const LEASE_KEY: &str = "telegram.lease";
/// The longest one wait for a held lease lasts before it is logged and begun again.
const TAKE_WAIT: Duration = Duration::from_secs(60);
/// The pause after a store error before the lease is tried again.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);
/// The longest a stop waits for the release to reach the store; past it the lease expires.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// How the keeper of a held lease ended.
#[derive(Debug)]
pub(crate) enum Kept {
    /// The lease is no longer this node's.
    Lost(LeaseError),
    /// It was released on request (a stop).
    Released,
}

/// The poller's side of the lease: taken, held, released.
pub(crate) struct Hold {
    leases: Leases,
    /// While held: asks the keeper to release the lease (and to say when it did).
    release: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

impl Hold {
    /// The lease of the channel, taken through `leases`.
    pub(crate) fn new(leases: Leases) -> Self {
        Self {
            leases,
            release: None,
        }
    }

    /// True while this node holds the lease.
    pub(crate) fn is_held(&self) -> bool {
        self.release.is_some()
    }

    /// Waits (bounded) for the lease; on failure, how long to pause before waiting again.
    pub(crate) fn wait(&self) -> impl Future<Output = Result<Lease, Duration>> + 'static {
        let leases = self.leases.clone();
        async move {
            match leases.acquire(LEASE_KEY, TAKE_WAIT).await {
                Ok(lease) => Ok(lease),
                Err(LeaseError::Busy { holder, .. }) => {
                    tracing::debug!(%holder, "Telegram channel polled by another node; standing by.");
                    Err(Duration::ZERO)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Telegram channel lease not taken; trying again.");
                    Err(RETRY_AFTER_ERROR)
                }
            }
        }
    }

    /// Holds `lease`: the returned keeper renews it until it is lost or [`Hold::release`]
    /// asks for it back. Dropping the keeper leaves the lease to expire.
    pub(crate) fn held(&mut self, mut lease: Lease) -> impl Future<Output = Kept> + 'static {
        let (tx, asked) = oneshot::channel::<oneshot::Sender<()>>();
        self.release = Some(tx);
        async move {
            let asked = tokio::select! {
                lost = lease.keep() => return Kept::Lost(lost),
                asked = asked => asked,
            };
            if let Err(e) = lease.release().await {
                tracing::warn!(error = %e, "Telegram channel lease not released; it expires instead.");
            }
            if let Ok(done) = asked {
                // The stop may have given up waiting.
                let _waiting = done.send(());
            }
            Kept::Released
        }
    }

    /// The keeper ended: the lease is no longer held.
    pub(crate) fn ended(&mut self) {
        self.release = None;
    }

    /// Releases the lease if held; the returned future ends once the store has it (bounded).
    pub(crate) fn release(&mut self) -> impl Future<Output = ()> + 'static {
        let keeper = self.release.take();
        async move {
            let Some(keeper) = keeper else { return };
            let (done, released) = oneshot::channel();
            if keeper.send(done).is_err() {
                return;
            }
            if tokio::time::timeout(RELEASE_WAIT, released).await.is_err() {
                tracing::warn!(
                    "Telegram channel lease release did not finish in time; it expires instead."
                );
            }
        }
    }
}
