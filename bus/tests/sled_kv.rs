//! The key-value store conformance suite against sled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod kv;

use bus::ManualClock;
use bus::kv::{KvStore, SledKv};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Sled;

/// The database of each test's folder: sled lets one opener per folder hold it.
static DBS: Mutex<BTreeMap<PathBuf, sled::Db>> = Mutex::new(BTreeMap::new());

impl kv::Opener for Sled {
    async fn open(dir: &Path, clock: Arc<ManualClock>) -> Arc<dyn KvStore> {
        let db = sled::open(dir).unwrap();
        DBS.lock().unwrap().insert(dir.to_path_buf(), db.clone());
        Arc::new(SledKv::open(&db, "kv", clock).unwrap())
    }
    async fn again(fx: &kv::Fixture) -> Arc<dyn KvStore> {
        // The same database (sled allows one opener per folder); a new handle on it.
        let db = DBS.lock().unwrap().get(fx.dir.path()).cloned().unwrap();
        Arc::new(SledKv::open(&db, "kv", fx.clock.clone()).unwrap())
    }
    async fn outlive(fx: &kv::Fixture, _key: &str, ttl: Duration) {
        fx.clock.advance(ttl);
    }
}

kv_suite!(Sled);
