//! The shutdown signal: fired once by the system, heard by every channel (as mini-redis does it).

use tokio::sync::watch;

/// The sending side, owned by the system.
pub struct ShutdownSignal {
    tx: watch::Sender<bool>,
}

impl Default for ShutdownSignal {
    fn default() -> Self {
        Self::new()
    }
}

impl ShutdownSignal {
    /// A signal not yet fired.
    pub fn new() -> Self {
        Self {
            tx: watch::channel(false).0,
        }
    }

    /// A new listener.
    pub fn listener(&self) -> Shutdown {
        Shutdown {
            rx: self.tx.subscribe(),
        }
    }

    /// Tells every listener, present and future, that the system is shutting down.
    pub fn fire(&self) {
        self.tx.send_replace(true);
    }
}

/// Heard by a channel: resolves once the system is shutting down.
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// True once fired.
    pub fn is_shutdown(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until the signal fires (at once if it already has, or if the system is gone).
    pub async fn recv(&mut self) {
        let _ = self.rx.wait_for(|fired| *fired).await;
    }
}
