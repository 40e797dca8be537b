//! Replay protection inside the tolerance: the delivery id is not signed, so a captured delivery
//! resent with a new id would carry a valid signature. Each accepted signature is remembered
//! (per hook, in the sled tree `gateway.webhook_signatures`) with the delivery id that used it
//! first, until its timestamp leaves the tolerance; the same signature under another delivery id
//! is a replay. The entry is written before the task is admitted, and the admission's flush makes
//! both durable together, so a restart remembers every signature that started a task.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The tree of used signatures.
pub const SIGNATURES_TREE: &str = "gateway.webhook_signatures";

/// How often expired entries are purged at most.
const PURGE_EVERY_MS: u64 = 60_000;

/// What a used signature is remembered with.
#[derive(Debug, Serialize, Deserialize)]
struct Used {
    /// The delivery id that used it first.
    delivery: String,
    /// Clock time (Unix ms) after which its timestamp is out of the tolerance anyway.
    expires_ms: u64,
}

/// Why a signature cannot be used for this delivery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// Another delivery id used this signature already.
    #[error(
        "this signature was already used by delivery {first:?}: a replayed delivery is refused (sign every delivery anew, with its own timestamp)"
    )]
    Replayed {
        /// The delivery that used it first.
        first: String,
    },
    /// The store could not be read or written.
    #[error("the store of used webhook signatures failed: {0}")]
    Storage(String),
}

/// The used signatures of every hook.
pub struct ReplayGuard {
    tree: sled::Tree,
    next_purge_ms: AtomicU64,
}

impl ReplayGuard {
    /// Opens the tree in `db`.
    pub fn open(db: &sled::Db) -> Result<Self, sled::Error> {
        Ok(Self {
            tree: db.open_tree(SIGNATURES_TREE)?,
            next_purge_ms: AtomicU64::new(0),
        })
    }

    /// Claims `signature` of `hook` for `delivery`: fine when it is new or when this very
    /// delivery claimed it before (a redelivery, answered by the task store as a duplicate);
    /// [`ClaimError::Replayed`] when another delivery id claimed it. `timestamp_s` is the signed
    /// time, `tolerance` the hook's.
    pub fn claim(
        &self,
        hook: &str,
        signature: &[u8],
        delivery: &str,
        timestamp_s: u64,
        tolerance: Duration,
        now_ms: u64,
    ) -> Result<(), ClaimError> {
        self.purge_if_due(now_ms);
        let key = key(hook, signature);
        let used = Used {
            delivery: delivery.to_string(),
            expires_ms: timestamp_s
                .saturating_mul(1000)
                .saturating_add(tolerance.as_millis() as u64),
        };
        let value = serde_json::to_vec(&used).map_err(|e| ClaimError::Storage(e.to_string()))?;
        let storage = |e: sled::Error| ClaimError::Storage(e.to_string());
        loop {
            let old = self.tree.get(&key).map_err(storage)?;
            if let Some(bytes) = &old {
                let first = serde_json::from_slice::<Used>(bytes).ok();
                match first {
                    Some(f) if f.expires_ms >= now_ms && f.delivery != delivery => {
                        return Err(ClaimError::Replayed { first: f.delivery });
                    }
                    Some(f) if f.expires_ms >= now_ms => return Ok(()),
                    // Expired (its timestamp is out of the tolerance) or unreadable: take it.
                    _ => {}
                }
            }
            let swapped = self
                .tree
                .compare_and_swap(&key, old, Some(value.clone()))
                .map_err(storage)?;
            if swapped.is_ok() {
                return Ok(());
            }
        }
    }

    /// Removes the entries whose timestamps left the tolerance, at most once a minute.
    fn purge_if_due(&self, now_ms: u64) {
        let due = self.next_purge_ms.load(Ordering::SeqCst);
        if now_ms < due
            || self
                .next_purge_ms
                .compare_exchange(
                    due,
                    now_ms + PURGE_EVERY_MS,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
        {
            return;
        }
        let mut purged = 0usize;
        for item in self.tree.iter() {
            let Ok((k, v)) = item else { continue };
            let expired =
                serde_json::from_slice::<Used>(&v).map_or(true, |u| u.expires_ms < now_ms);
            if expired
                && self
                    .tree
                    .compare_and_swap(&k, Some(v), None as Option<&[u8]>)
                    .is_ok_and(|r| r.is_ok())
            {
                purged += 1;
            }
        }
        if purged > 0 {
            tracing::debug!(purged, "Expired webhook signatures forgotten.");
        }
    }
}

fn key(hook: &str, signature: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(hook.len() + 1 + signature.len());
    k.extend_from_slice(hook.as_bytes());
    k.push(0);
    k.extend_from_slice(signature);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(300);
    const NOW_S: u64 = 1_800_000_000;

    fn guard() -> (tempfile::TempDir, ReplayGuard) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        (dir, ReplayGuard::open(&db).unwrap())
    }

    #[test]
    fn a_signature_serves_one_delivery_id_until_it_expires() {
        let (_dir, g) = guard();
        let now_ms = NOW_S * 1000;
        g.claim("deploys", b"sig", "d-1", NOW_S, T, now_ms).unwrap();
        // The same delivery again: fine (the task store answers the duplicate).
        g.claim("deploys", b"sig", "d-1", NOW_S, T, now_ms).unwrap();
        let replay = g.claim("deploys", b"sig", "d-2", NOW_S, T, now_ms + 1000);
        assert!(
            matches!(&replay, Err(ClaimError::Replayed { first }) if first == "d-1"),
            "{replay:?}"
        );
        // Another hook's signature space is its own.
        g.claim("builds", b"sig", "d-2", NOW_S, T, now_ms).unwrap();
        // Past the tolerance the timestamp check refuses it anyway; the entry is forgotten.
        let later = now_ms + T.as_millis() as u64 + PURGE_EVERY_MS + 1;
        g.claim("deploys", b"other", "d-3", NOW_S, T, later)
            .unwrap();
        assert!(
            g.tree.get(key("deploys", b"sig")).unwrap().is_none(),
            "purged"
        );
    }
}
