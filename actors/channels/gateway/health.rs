//! `GET /healthz`: 200 `ok` only while the daemon can accept work, else 503 with the reasons.
//!
//! Checked on every call: the system is not shutting down, the bus's link to its server is up
//! (on NATS: while it is down the answer says how many reconnection attempts were made), the
//! task store answers a read, the database takes a write (after a write error, such as a full
//! disk, it refuses every write until the daemon opens it again, which it does by itself once
//! the state folder has room), a file can be created in the state folder (it is writable and the
//! process has descriptors left), and the open descriptors leave some headroom under the soft
//! limit.

use super::api::{ApiState, error};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bus::RequestId;
use std::path::Path;

/// Fewer free descriptors than this under the soft limit and the daemon is not ready: the next
/// session, transcript or connection would fail to open.
const MIN_FREE_DESCRIPTORS: u64 = 16;

/// The readiness probe.
pub(super) async fn healthz(State(state): State<ApiState>) -> Response {
    let reasons = not_ready(&state).await;
    if reasons.is_empty() {
        return (StatusCode::OK, "ok").into_response();
    }
    tracing::warn!(reasons = ?reasons, "Health check failed.");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_ready",
        reasons.join("; "),
    )
}

/// Why the daemon cannot accept work now; empty when it can.
pub(super) async fn not_ready(state: &ApiState) -> Vec<String> {
    let mut reasons = Vec::new();
    if state.shutdown.is_shutdown() {
        reasons.push("draining: shutting down, no new work is accepted".to_string());
    }
    let link = state.bus.link();
    if let Some(link) = link.as_ref().filter(|l| !l.connected) {
        let error = link
            .last_error
            .as_deref()
            .map(|e| format!("; last error: {e}"))
            .unwrap_or_default();
        reasons.push(format!(
            "NATS at {} is unreachable: reconnecting with backoff (attempt {}, {} disconnect(s) so far); new tasks are refused until it is back; {} outcome(s) wait in the local outbox{error}",
            link.server, link.reconnect_attempt, link.disconnects, link.parked
        ));
    }
    let link_down = link.is_some_and(|l| !l.connected);
    match RequestId::parse("healthz-probe") {
        // Its store is on the server that is away: asking would only wait for a timeout.
        Ok(_) if link_down => {}
        Ok(probe) => {
            if let Err(e) = state.bus.lookup(&probe).await {
                reasons.push(format!("task store: {e}"));
            }
        }
        Err(e) => reasons.push(format!("task store: cannot build the probe: {e}")),
    }
    if let Some(e) = state.storage.fault_off_thread().await {
        reasons.push(format!(
            "the store refuses writes after an error ({e}); it reopens by itself once the state folder takes writes again"
        ));
    }
    let dir = state.config.state_dir.clone();
    match tokio::task::spawn_blocking(move || files(&dir)).await {
        Ok(found) => reasons.extend(found),
        Err(e) => reasons.push(format!("file probe did not finish: {e}")),
    }
    reasons
}

/// What keeps the process from opening files: the state folder, or too few descriptors left.
fn files(state_dir: &Path) -> Vec<String> {
    let mut reasons = Vec::new();
    // The folder's name stays out of the answer (callers need no token for /healthz).
    if let Err(e) = tempfile::tempfile_in(state_dir) {
        tracing::warn!(dir = %state_dir.display(), error = %e, "Health probe cannot create a file in the state folder.");
        reasons.push(format!("cannot create a file in the state folder: {e}"));
    }
    let short =
        descriptors().filter(|(open, limit)| limit.saturating_sub(*open) < MIN_FREE_DESCRIPTORS);
    if let Some((open, limit)) = short {
        reasons.push(format!(
            "{open} of {limit} file descriptors in use (fewer than {MIN_FREE_DESCRIPTORS} left)"
        ));
    }
    reasons
}

/// Open descriptors and the soft limit, where `/proc/self/fd` tells (`None` when unknown or
/// unlimited).
fn descriptors() -> Option<(u64, u64)> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current?;
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some((u64::try_from(open).ok()?, limit))
}
