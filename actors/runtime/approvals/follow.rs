//! On a shared store: the task that follows the requests' changes, so a run waiting on this
//! node learns an answer given on any node. It watches `req.` from before the first request is
//! asked; when the watch breaks (the link to NATS went down) it watches again and reads back the
//! requests still waited for here (and the entries approved with `always`), so an answer given
//! meanwhile is not missed. It stops with the
//! store (the handle's last clone dropped).

use super::{ApprovalRecord, Inner};
use bus::kv::{KvEvent, KvStore, KvWatch};
use futures::StreamExt as _;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The wait before watching again after the watch broke.
const REWATCH_AFTER: Duration = Duration::from_secs(1);

/// Starts following `watch` for the store behind `inner`.
pub(super) fn spawn(
    inner: Weak<Inner>,
    kv: Arc<dyn KvStore>,
    watch: KvWatch,
) -> tokio::task::AbortHandle {
    tokio::spawn(follow(inner, kv, watch)).abort_handle()
}

async fn follow(inner: Weak<Inner>, kv: Arc<dyn KvStore>, mut watch: KvWatch) {
    loop {
        while let Some(event) = watch.next().await {
            let Some(inner) = inner.upgrade() else {
                return;
            };
            match event {
                Ok(KvEvent::Put(entry)) => settle(&inner, &entry.value),
                Ok(KvEvent::Deleted { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "Approvals watch failed; watching again.");
                    break;
                }
            }
        }
        watch = loop {
            let Some(clock) = inner.upgrade().map(|i| i.clock.clone()) else {
                return;
            };
            clock.sleep(REWATCH_AFTER).await;
            match kv.watch(super::store::KV_PREFIX).await {
                Ok(w) => break w,
                Err(e) => tracing::warn!(error = %e, "Approvals not watched; trying again."),
            }
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        catch_up(&inner).await;
    }
}

/// Hands a changed request to its waiter here, if settled.
fn settle(inner: &Inner, value: &[u8]) {
    match serde_json::from_slice::<ApprovalRecord>(value) {
        Ok(rec) => {
            if let Err(e) = inner.answered(&rec) {
                tracing::warn!(approval = %rec.id, error = %e, "Approval answer not applied here.");
            }
        }
        Err(e) => tracing::warn!(error = %e, "Approval record unreadable; skipped."),
    }
}

/// Reads back every request waited for here, handing over those settled while unwatched, and
/// the entries approved with `always` meanwhile.
async fn catch_up(inner: &Inner) {
    if let Some(shared) = &inner.shared_rules
        && let Err(e) = shared.sync(&inner.rules).await
    {
        tracing::warn!(error = %e, "Entries approved with always not read back; read at the next break or start.");
    }
    let ids: Vec<String> = inner.waiting.iter().map(|w| w.key().clone()).collect();
    for id in ids {
        match inner.requests.get(&id).await {
            Ok(Some((rec, _))) => {
                if let Err(e) = inner.answered(&rec) {
                    tracing::warn!(approval = %id, error = %e, "Approval answer not applied here.");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(approval = %id, error = %e, "Approval not read back."),
        }
    }
}
