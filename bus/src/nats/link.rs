//! The link to the server: reconnecting with backoff, said in the log, kept for `/healthz`.
//!
//! The client reconnects by itself, without end; this module picks the backoff, logs each
//! change, counts them, and lets the parts that must wait for the server (the outbox of
//! outcomes, see `outbox.rs`) wait for it without polling.

use crate::backend::LinkStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// The first pause before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What the connection's events told about the link.
#[derive(Debug)]
pub(crate) struct Link {
    url: String,
    connected: watch::Sender<bool>,
    disconnects: AtomicU64,
    attempts: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Link {
    /// A link to `url`, not connected yet.
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.to_string(),
            connected: watch::channel(false).0,
            disconnects: AtomicU64::new(0),
            attempts: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    /// Records a connection event (from the client's event callback) and logs it.
    pub(crate) fn on_event(&self, event: async_nats::Event) {
        match event {
            async_nats::Event::Connected => {
                let was_down = self.disconnects.load(Ordering::SeqCst) > 0;
                self.attempts.store(0, Ordering::SeqCst);
                self.connected.send_replace(true);
                if was_down {
                    tracing::info!(url = %self.url, disconnects = self.disconnects.load(Ordering::SeqCst), "NATS connection is back; parked outcomes are published now.");
                }
            }
            async_nats::Event::Disconnected => {
                self.disconnects.fetch_add(1, Ordering::SeqCst);
                self.connected.send_replace(false);
                tracing::warn!(url = %self.url, "NATS connection lost; reconnecting with backoff. New tasks are refused (503) until it is back.");
            }
            async_nats::Event::ClientError(e) => self.note_error(e.to_string()),
            async_nats::Event::ServerError(e) => self.note_error(e.to_string()),
            other => tracing::debug!(url = %self.url, event = %other, "NATS connection event."),
        }
    }

    fn note_error(&self, error: String) {
        tracing::warn!(url = %self.url, error = %error, "NATS connection error.");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error);
        }
    }

    /// The pause before reconnection attempt `attempt` (1-based), logged: 100 ms doubling up to
    /// 2 s.
    pub(crate) fn backoff(&self, attempt: usize) -> Duration {
        self.attempts.store(attempt as u64, Ordering::SeqCst);
        let doublings = u32::try_from(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(8);
        let delay = FIRST_BACKOFF
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF);
        if attempt > 0 {
            tracing::info!(url = %self.url, attempt, delay_ms = delay.as_millis() as u64, "Reconnecting to NATS.");
        }
        delay
    }

    /// Whether the client is connected now.
    pub(crate) fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// Resolves once the client is connected (at once when it is).
    pub(crate) async fn connected(&self) {
        let mut rx = self.connected.subscribe();
        // An error means the sender is gone, which it is not while `self` lives.
        let _ = rx.wait_for(|up| *up).await;
    }

    /// The link as `/healthz` and `clawbus nodes` show it.
    pub(crate) fn status(&self) -> LinkStatus {
        LinkStatus {
            server: self.url.clone(),
            connected: self.is_connected(),
            disconnects: self.disconnects.load(Ordering::SeqCst),
            reconnect_attempt: self.attempts.load(Ordering::SeqCst),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
            parked: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100_ms_up_to_2_s() {
        let link = Link::new("nats://x");
        let delays: Vec<u128> = (1..=7).map(|a| link.backoff(a).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(link.status().reconnect_attempt, 7);
    }

    #[test]
    fn a_disconnect_is_counted_and_a_connect_clears_the_attempts() {
        let link = Link::new("nats://x");
        link.on_event(async_nats::Event::Connected);
        assert!(link.is_connected());
        link.on_event(async_nats::Event::Disconnected);
        link.backoff(3);
        let down = link.status();
        assert!(!down.connected);
        assert_eq!((down.disconnects, down.reconnect_attempt), (1, 3));
        link.on_event(async_nats::Event::Connected);
        let up = link.status();
        assert!(up.connected);
        assert_eq!((up.disconnects, up.reconnect_attempt), (1, 0));
    }
}
