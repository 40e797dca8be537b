//! HTTP clients built when first used: building a `reqwest::Client` loads and parses every TLS
//! root certificate of the machine (most of what a start would cost), which a daemon whose agents
//! never open a TLS connection should not pay.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Builds the client of a [`LazyClient`].
type Build = dyn Fn() -> reqwest::Result<reqwest::Client> + Send + Sync;

/// A `reqwest::Client` built on the first [`LazyClient::get`], then shared by every clone of this
/// handle (a client is a pool of connections: one per set of settings is enough).
#[derive(Clone)]
pub struct LazyClient {
    cell: Arc<OnceLock<Result<reqwest::Client, Arc<reqwest::Error>>>>,
    build: Arc<Build>,
}

impl fmt::Debug for LazyClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyClient")
            .field("built", &self.cell.get().is_some())
            .finish_non_exhaustive()
    }
}

impl LazyClient {
    /// A client `build` makes when first needed.
    pub fn new(
        build: impl Fn() -> reqwest::Result<reqwest::Client> + Send + Sync + 'static,
    ) -> Self {
        Self {
            cell: Arc::new(OnceLock::new()),
            build: Arc::new(build),
        }
    }

    /// The process's client with reqwest's default settings, shared by every model provider and
    /// channel that wants no other: built once, on its first use.
    pub fn shared() -> Self {
        static SHARED: OnceLock<LazyClient> = OnceLock::new();
        SHARED
            .get_or_init(|| Self::new(|| reqwest::Client::builder().build()))
            .clone()
    }

    /// The client, built now if this is the first call; a failed build is remembered and
    /// answered to every later call.
    pub fn get(&self) -> Result<&reqwest::Client, Arc<reqwest::Error>> {
        self.cell
            .get_or_init(|| (self.build)().map_err(Arc::new))
            .as_ref()
            .map_err(Arc::clone)
    }

    /// Whether the client was built (for tests of what a start loads).
    pub fn is_built(&self) -> bool {
        self.cell.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lazy_client_is_built_on_first_use_once_and_shared_by_clones() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let client = LazyClient::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            reqwest::Client::builder()
                .tls_certs_only(std::iter::empty())
                .build()
        });
        let clone = client.clone();
        assert!(!client.is_built());
        assert_eq!(builds.load(Ordering::SeqCst), 0);
        client.get().unwrap();
        clone.get().unwrap();
        assert!(clone.is_built());
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_shared_client_is_one_client() {
        let a = LazyClient::shared();
        let b = LazyClient::shared();
        assert!(Arc::ptr_eq(&a.cell, &b.cell));
    }
}
