//! The HTTP server loop under the router: HTTP/1.1 (with upgrades, for the WebSocket gateway) on
//! every accepted connection, with the limits axum's `serve` leaves unset.
//!
//! - A request head must arrive within [`HEADER_READ_TIMEOUT`] of the connection opening or of
//!   the previous answer on it: a silent or slow-header connection, or an idle keep-alive one, is
//!   closed.
//! - At most [`max_connections`] are open (about half the descriptor limit, so sessions,
//!   transcripts and the health probe keep descriptors). At the cap the oldest connection that has
//!   not sent a request yet is closed for the new one; when every one is serving a request,
//!   accepting waits for one to end. So a flood of idle connections cannot keep `/healthz` out.
//! - On stop the listener closes, open connections finish their answers (for at most the given
//!   drain time), then the rest are dropped.

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

/// How long a connection may take to send a request head (from its opening, or from the last
/// answer on it).
pub(super) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long accepting pauses after an accept error (out of descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// The most HTTP connections open at once: half the descriptor limit, 32 to 16384.
pub(super) fn max_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit
        .and_then(|l| usize::try_from(l / 2).ok())
        .unwrap_or(16384)
        .clamp(32, 16384)
}

/// One open connection: whether it has sent a request, and how to close it.
struct Open {
    started: Arc<AtomicBool>,
    abort: tokio::task::AbortHandle,
}

/// The open connections, by the order they were accepted in.
#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Open>,
}

#[derive(Clone, Default)]
struct Shared {
    table: Arc<Mutex<Table>>,
    /// Signalled when a connection ends.
    closed: Arc<Notify>,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when a connection may be accepted now, after closing the oldest idle one if the
    /// table is full.
    fn make_room(&self, max: usize) -> bool {
        let mut table = self.table();
        if table.open.len() < max {
            return true;
        }
        let idle = table
            .open
            .iter()
            .find(|(_, c)| !c.started.load(Ordering::SeqCst))
            .map(|(id, _)| *id);
        match idle.and_then(|id| table.open.remove(&id)) {
            Some(shed) => {
                tracing::warn!(
                    max,
                    "HTTP connections at the cap; closing the oldest that sent no request."
                );
                shed.abort.abort();
                true
            }
            None => false,
        }
    }
}

/// Takes a connection out of the table when its task ends (or is aborted).
struct Leave {
    shared: Shared,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.shared.table().open.remove(&self.id);
        self.shared.closed.notify_one();
    }
}

/// Serves `app` on `listener` until `stop` turns true, then lets open connections finish for at
/// most `drain`.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    max: usize,
    mut stop: watch::Receiver<bool>,
    drain: Duration,
) {
    let shared = Shared::default();
    loop {
        if !shared.make_room(max) {
            tokio::select! {
                () = shared.closed.notified() => continue,
                () = stopping(&mut stop) => break,
            }
        }
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot accept an HTTP connection.");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = stopping(&mut stop) => break,
        };
        // No Nagle delay: a WebSocket answer followed at once by events (or an SSE chunk) must
        // not wait for the peer's delayed ACK (≈40 ms per turn otherwise).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "Cannot set TCP_NODELAY on a connection.");
        }
        let started = Arc::new(AtomicBool::new(false));
        let mut table = shared.table();
        let id = table.next;
        table.next += 1;
        let leave = Leave {
            shared: shared.clone(),
            id,
        };
        let task = tokio::spawn(connection(
            tcp,
            app.clone(),
            started.clone(),
            stop.clone(),
            leave,
        ));
        let abort = task.abort_handle();
        table.open.insert(id, Open { started, abort });
    }
    drop(listener);
    let drained = tokio::time::timeout(drain, async {
        while !shared.table().open.is_empty() {
            shared.closed.notified().await;
        }
    });
    if drained.await.is_err() {
        tracing::warn!("HTTP requests still open after the drain; closing them.");
        for (_, c) in std::mem::take(&mut shared.table().open) {
            c.abort.abort();
        }
    }
}

/// Serves one connection; on stop, finishes the answer in progress and closes.
async fn connection(
    tcp: tokio::net::TcpStream,
    app: Router,
    started: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
    _leave: Leave,
) {
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        started.store(true, Ordering::SeqCst);
        let mut app = app.clone();
        async move { tower_service::Service::call(&mut app, req).await }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let conn = builder
        .serve_connection(TokioIo::new(tcp), service)
        .with_upgrades();
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = stopping(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "HTTP connection ended with an error.");
    }
}

/// Waits until `stop` turns true (or its sender is gone).
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
