//! Search results remembered for [`CACHE_TTL`] per (provider, query, count), on an injected clock.

use super::{Hit, ProviderKind};
use bus::Clock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long results are reused.
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// Most entries kept; the one expiring first goes when a new one does not fit.
const MAX_ENTRIES: usize = 512;

type Key = (ProviderKind, String, usize);
/// Key → (expiry in Unix ms, results).
type Entries = HashMap<Key, (u64, Vec<Hit>)>;

/// A shared, clock-driven result cache.
#[derive(Clone)]
pub(super) struct Cache {
    clock: Arc<dyn Clock>,
    entries: Arc<Mutex<Entries>>,
}

impl Cache {
    pub(super) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            entries: Arc::default(),
        }
    }

    /// The results stored for this key, unless they expired.
    pub(super) fn get(
        &self,
        provider: ProviderKind,
        query: &str,
        count: usize,
    ) -> Option<Vec<Hit>> {
        let now = self.clock.now_ms();
        let entries = self.entries.lock().ok()?;
        let (expires, hits) = entries.get(&(provider, query.to_string(), count))?;
        (now < *expires).then(|| hits.clone())
    }

    /// Stores results for [`CACHE_TTL`].
    pub(super) fn put(&self, provider: ProviderKind, query: &str, count: usize, hits: Vec<Hit>) {
        let now = self.clock.now_ms();
        let Ok(mut entries) = self.entries.lock() else {
            return; // a poisoned cache only costs a repeated request
        };
        entries.retain(|_, (expires, _)| *expires > now);
        if entries.len() >= MAX_ENTRIES
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (expires, _))| *expires)
                .map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        let expires = now.saturating_add(CACHE_TTL.as_millis() as u64);
        entries.insert((provider, query.to_string(), count), (expires, hits));
    }
}
