//! Storage health. sled 0.34 keeps the first I/O error of a write (a full disk) and refuses every
//! later write of that database until it is opened again; so the daemon watches for that state
//! and, once the state folder takes writes again, `clawbus up` restarts itself in place (see
//! [`crate::daemon::Daemon::storage_recovered`]), which opens the database afresh.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The key written to probe the database (in sled's default tree; its value a counter).
const PROBE_KEY: &[u8] = b"clawbus.storage-probe";

/// The probe's next value: sled skips a write of the value a key already has (no write, no
/// error), so every probe writes a new one.
static PROBES: AtomicU64 = AtomicU64::new(0);

/// How much a recovery probe writes (and syncs) in the state folder before the database is
/// opened again: room for a new sled segment and the next writes.
const RECOVERY_PROBE_BYTES: usize = 1 << 20;

/// Probes a database's writes.
#[derive(Clone)]
pub struct StorageProbe {
    db: sled::Db,
}

impl StorageProbe {
    /// A probe of `db`.
    pub fn new(db: &sled::Db) -> Self {
        Self { db: db.clone() }
    }

    /// The write error the database keeps, if it took one (every write fails until it is
    /// opened again); `None` while it takes writes. The probe writes 8 bytes in memory; they
    /// reach the disk with the next flush.
    pub fn fault(&self) -> Option<String> {
        let value = PROBES.fetch_add(1, Ordering::Relaxed).to_be_bytes();
        self.db
            .insert(PROBE_KEY, &value[..])
            .err()
            .map(|e| e.to_string())
    }
}

/// Whether `dir` takes writes again: a file of 1 MiB is written, synced and
/// removed.
pub fn folder_takes_writes(dir: &Path) -> std::io::Result<()> {
    let mut file = tempfile::tempfile_in(dir)?;
    file.write_all(&vec![0; RECOVERY_PROBE_BYTES])?;
    file.sync_all()
}
