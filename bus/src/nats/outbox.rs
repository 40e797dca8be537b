//! The bounded local outbox: writes a node could not make while the server was out of reach
//! (a task's outcome and its ack; the undoing of an admission whose task never reached the
//! stream), kept in memory in order and made once the link is back.
//!
//! Bounded: when it is full, [`Outbox::park`] refuses, and the caller reports the error as it
//! would have without an outbox (a task's message then comes back after its ack wait).

use super::link::Link;
use crate::error::BusError;
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The most writes kept waiting.
pub(crate) const OUTBOX_CAP: usize = 1024;
/// The pause after a retry that failed while the link looked up (the server answering errors).
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// One write that waits for the server.
#[async_trait]
pub(crate) trait Parked: Send + Sync {
    /// Makes the write; an error keeps it parked for the next try.
    async fn retry(&self) -> Result<(), BusError>;
    /// What it is, for the log.
    fn what(&self) -> String;
}

/// The queue and its flusher.
pub(crate) struct Outbox {
    queue: Mutex<VecDeque<Box<dyn Parked>>>,
    cap: usize,
    wake: Arc<Notify>,
}

impl Outbox {
    /// An empty outbox of `cap` writes whose flusher (spawned on the current runtime) waits on
    /// `link`.
    pub(crate) fn start(link: Arc<Link>, cap: usize) -> Arc<Self> {
        let outbox = Arc::new(Self {
            queue: Mutex::new(VecDeque::new()),
            cap,
            wake: Arc::new(Notify::new()),
        });
        tokio::spawn(flusher(Arc::downgrade(&outbox), link));
        outbox
    }

    /// Keeps `write` for when the link is back; refuses (naming `cause`) when full.
    pub(crate) fn park(&self, write: Box<dyn Parked>, cause: &BusError) -> Result<(), BusError> {
        let Ok(mut queue) = self.queue.lock() else {
            return Err(BusError::Closed("the NATS outbox is poisoned".into()));
        };
        if queue.len() >= self.cap {
            tracing::error!(what = %write.what(), cap = self.cap, error = %cause, "NATS outbox full; this write is not kept.");
            return Err(BusError::Closed(format!(
                "the local outbox is full ({} writes wait for NATS): {cause}",
                self.cap
            )));
        }
        tracing::warn!(what = %write.what(), waiting = queue.len() + 1, error = %cause, "NATS unreachable; kept in the local outbox until it is back.");
        queue.push_back(write);
        drop(queue);
        self.wake.notify_one();
        Ok(())
    }

    /// Writes waiting now.
    pub(crate) fn len(&self) -> usize {
        self.queue.lock().map(|q| q.len()).unwrap_or(0)
    }

    fn front_ready(&self) -> Option<Box<dyn Parked>> {
        self.queue.lock().ok()?.pop_front()
    }

    fn put_back(&self, write: Box<dyn Parked>) {
        if let Ok(mut q) = self.queue.lock() {
            q.push_front(write);
        }
    }
}

/// Makes the parked writes in order, each once the link is up; ends with the outbox. A write
/// stays in the queue (counted by [`Outbox::len`]) until it is taken to be made.
async fn flusher(outbox: std::sync::Weak<Outbox>, link: Arc<Link>) {
    loop {
        let Some(strong) = outbox.upgrade() else {
            return;
        };
        if strong.len() == 0 {
            let wake = strong.wake.clone();
            drop(strong);
            // A park since the look above left a permit: this returns at once.
            wake.notified().await;
            continue;
        }
        drop(strong);
        link.connected().await;
        let Some(strong) = outbox.upgrade() else {
            return;
        };
        let Some(write) = strong.front_ready() else {
            continue;
        };
        match write.retry().await {
            Ok(()) => {
                tracing::info!(what = %write.what(), left = strong.len(), "Parked write made on NATS.");
            }
            Err(e) => {
                tracing::debug!(what = %write.what(), error = %e, "Parked write failed again; retrying.");
                strong.put_back(write);
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// True for the errors that say the server was out of reach, not that the write was wrong.
pub(crate) fn unreachable(e: &BusError) -> bool {
    matches!(
        e,
        BusError::Transport { .. } | BusError::Storage { .. } | BusError::TimedOut { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Count(Arc<AtomicUsize>, usize);

    #[async_trait]
    impl Parked for Count {
        async fn retry(&self) -> Result<(), BusError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn what(&self) -> String {
            format!("write {}", self.1)
        }
    }

    fn cause() -> BusError {
        BusError::transport("NATS at nats://x", "down")
    }

    #[tokio::test]
    async fn parked_writes_wait_for_the_link_and_the_outbox_is_bounded() {
        let link = Arc::new(Link::new("nats://x"));
        let outbox = Outbox::start(link.clone(), 2);
        let made = Arc::new(AtomicUsize::new(0));
        for i in 0..2 {
            outbox
                .park(Box::new(Count(made.clone(), i)), &cause())
                .unwrap();
        }
        let full = outbox.park(Box::new(Count(made.clone(), 2)), &cause());
        assert!(
            full.unwrap_err().to_string().contains("outbox is full"),
            "the third write is refused"
        );
        tokio::task::yield_now().await;
        assert_eq!(made.load(Ordering::SeqCst), 0, "nothing is made while down");
        link.on_event(async_nats::Event::Connected);
        while outbox.len() > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }
}
