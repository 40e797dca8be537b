//! Replay protection inside the tolerance: the delivery id is not signed, so a captured delivery
//! resent with a new id would carry a valid signature. Each accepted signature is remembered
//! (per hook, in the key-value store `webhook_signatures` of the bus's backend: a sled tree, or a
//! JetStream KV bucket every node shares) with the delivery id that used it first, for as long as
//! its timestamp is inside the tolerance (the entry's time to live); the same signature under
//! another delivery id is a replay. On the embedded backend the entry is written before the task
//! is admitted, and the admission's flush makes both durable together, so a restart remembers
//! every signature that started a task.

use bus::KvOpener;
use bus::kv::{KvError, KvStore};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// The key-value store of used signatures.
pub(crate) const SIGNATURES_STORE: &str = "webhook_signatures";

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
    opener: KvOpener,
    store: OnceCell<Arc<dyn KvStore>>,
}

impl ReplayGuard {
    /// The guard over the store `webhook_signatures` that `opener` opens (on first use).
    pub fn new(opener: KvOpener) -> Self {
        Self {
            opener,
            store: OnceCell::new(),
        }
    }

    async fn store(&self) -> Result<&Arc<dyn KvStore>, ClaimError> {
        self.store
            .get_or_try_init(|| self.opener.open(SIGNATURES_STORE))
            .await
            .map_err(|e| ClaimError::Storage(e.to_string()))
    }

    /// Claims `signature` of `hook` for `delivery`: fine when it is new or when this very
    /// delivery claimed it before (a redelivery, answered by the task store as a duplicate);
    /// `ClaimError::Replayed` when another delivery id claimed it. `timestamp_s` is the signed
    /// time, `tolerance` the hook's; the claim lives until the timestamp leaves the tolerance
    /// (at least one second).
    pub async fn claim(
        &self,
        hook: &str,
        signature: &[u8],
        delivery: &str,
        timestamp_s: u64,
        tolerance: Duration,
        now_ms: u64,
    ) -> Result<(), ClaimError> {
        let store = self.store().await?;
        let key = key(hook, signature);
        let expires_ms = timestamp_s
            .saturating_mul(1000)
            .saturating_add(tolerance.as_millis() as u64);
        let ttl = Duration::from_secs(expires_ms.saturating_sub(now_ms).div_ceil(1000).max(1));
        let storage = |e: KvError| ClaimError::Storage(e.to_string());
        loop {
            match store
                .create(&key, delivery.as_bytes().to_vec(), Some(ttl))
                .await
            {
                Ok(_) => return Ok(()),
                Err(KvError::Exists { .. }) => {}
                Err(e) => return Err(storage(e)),
            }
            // Someone claimed it: this delivery again, or another. Gone meanwhile: try again.
            if let Some(first) = store.get(&key).await.map_err(storage)? {
                let first = String::from_utf8_lossy(&first.value).into_owned();
                if first == delivery {
                    return Ok(());
                }
                return Err(ClaimError::Replayed { first });
            }
        }
    }
}

/// `<hook>.<signature in hex>`, the hook name escaped to the key alphabet (`_XX` for a byte
/// outside `A-Z a-z 0-9 -`).
fn key(hook: &str, signature: &[u8]) -> String {
    let mut k = String::with_capacity(hook.len() + 1 + signature.len() * 2);
    for b in hook.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            k.push(char::from(b));
        } else {
            k.push_str(&format!("_{b:02X}"));
        }
    }
    k.push('.');
    for b in signature {
        k.push_str(&format!("{b:02x}"));
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::{Clock, ManualClock};

    const T: Duration = Duration::from_secs(300);
    const NOW_S: u64 = 1_800_000_000;

    fn guard() -> (tempfile::TempDir, Arc<ManualClock>, ReplayGuard) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let clock = ManualClock::new(NOW_S * 1000);
        let opener = KvOpener::sled(db, clock.clone());
        (dir, clock, ReplayGuard::new(opener))
    }

    #[tokio::test]
    async fn a_signature_serves_one_delivery_id_until_it_expires() {
        let (_dir, clock, g) = guard();
        let now_ms = clock.now_ms();
        g.claim("deploys", b"sig", "d-1", NOW_S, T, now_ms)
            .await
            .unwrap();
        // The same delivery again: fine (the task store answers the duplicate).
        g.claim("deploys", b"sig", "d-1", NOW_S, T, now_ms)
            .await
            .unwrap();
        let replay = g
            .claim("deploys", b"sig", "d-2", NOW_S, T, now_ms + 1000)
            .await;
        assert!(
            matches!(&replay, Err(ClaimError::Replayed { first }) if first == "d-1"),
            "{replay:?}"
        );
        // Another hook's signature space is its own.
        g.claim("builds", b"sig", "d-2", NOW_S, T, now_ms)
            .await
            .unwrap();
        // Past the tolerance the timestamp check refuses it anyway; the entry is forgotten.
        clock.advance(T + Duration::from_secs(1));
        let store = g.store().await.unwrap();
        assert!(
            store.get(&key("deploys", b"sig")).await.unwrap().is_none(),
            "expired"
        );
        g.claim("deploys", b"sig", "d-3", NOW_S, T, clock.now_ms())
            .await
            .unwrap();
    }

    #[test]
    fn keys_stay_in_the_key_alphabet() {
        assert_eq!(key("my hook", &[0xab, 0x01]), "my_20hook.ab01");
        assert!(bus::kv::check_key(&key("a.b:c", &[0; 32])).is_ok());
    }
}
