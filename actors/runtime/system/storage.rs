//! Storage health. sled 0.34 keeps the first I/O error of a write (a full disk) and refuses every
//! later write of that database until it is opened again; so the daemon watches for that state
//! and, once the state folder takes writes again, `clawbus up` restarts itself in place (see
//! [`crate::daemon::Daemon::storage_recovered`]), which opens the database afresh.

use std::io::Write as _;
use std::path::Path;

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
    /// opened again); `None` while it takes writes. Asked with a flush, which writes nothing
    /// of its own: sled answers the kept error for as long as a write it failed is not on
    /// disk, and with nothing waiting for the disk it returns at once (an idle daemon's probe
    /// touches no file; a probe that wrote a key every second had sled sync the database every
    /// second). Blocks while other writes wait for the disk (it syncs them): call it off the
    /// async threads.
    pub fn fault(&self) -> Option<String> {
        bus::commit::flush(&self.db).err().map(|e| e.to_string())
    }

    /// [`StorageProbe::fault`], asked on a blocking thread (a probe that did not finish counts
    /// as no fault: the next one asks again).
    pub async fn fault_off_thread(&self) -> Option<String> {
        let probe = self.clone();
        tokio::task::spawn_blocking(move || probe.fault())
            .await
            .ok()
            .flatten()
    }
}

/// Whether `dir` takes writes again: a file of 1 MiB is written, synced and
/// removed.
pub fn folder_takes_writes(dir: &Path) -> std::io::Result<()> {
    let mut file = tempfile::tempfile_in(dir)?;
    file.write_all(&vec![0; RECOVERY_PROBE_BYTES])?;
    file.sync_all()
}
