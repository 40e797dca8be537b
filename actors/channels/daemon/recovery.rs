//! Recovery from a store that refuses writes. After a write error (a full state folder) sled
//! refuses every write of the database until it is opened again, and the parts of the system
//! hold it for as long as the process lives; so the daemon would answer 503 until a restart.
//! [`Daemon::storage_recovered`] watches for that state and for the folder taking writes again;
//! `clawbus up` then restarts itself in place (the same process id and port, see
//! `crate::cli::up`): what a restart after a crash does (unfinished tasks run again, admissions
//! answered 503 are rolled back), with no one to call.

use super::Daemon;
use clawbus_runtime::system::folder_takes_writes;
use std::time::Duration;

/// How often the store and the folder are probed.
const POLL: Duration = Duration::from_secs(1);

impl Daemon {
    /// Resolves once the store refuses writes after an error and the state folder takes writes
    /// again (a probe file of 1 MiB is written and synced); answers the error the store kept.
    /// Pending forever while the store is healthy.
    pub async fn storage_recovered(&self) -> String {
        let probe = self.system().storage();
        let dir = self.system().config().state_dir.clone();
        let mut reported = false;
        loop {
            tokio::time::sleep(POLL).await;
            let Some(fault) = probe.fault_off_thread().await else {
                continue;
            };
            if !reported {
                tracing::error!(error = %fault, "The store refuses writes; the daemon restarts itself once the state folder takes writes again.");
                reported = true;
            }
            let dir = dir.clone();
            match tokio::task::spawn_blocking(move || folder_takes_writes(&dir)).await {
                Ok(Ok(())) => return fault,
                Ok(Err(e)) => tracing::debug!(error = %e, "The state folder takes no writes yet."),
                Err(e) => tracing::warn!(error = %e, "The state folder probe did not finish."),
            }
        }
    }
}
