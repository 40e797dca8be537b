//! The conformance suite against the embedded backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod conformance;

use bus::{LocalBus, LocalOptions, ManualClock};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

struct Local;

impl conformance::Backend for Local {
    type Bus = LocalBus;
    fn open(dir: &Path, clock: Arc<ManualClock>, window: Duration) -> LocalBus {
        let opts = LocalOptions {
            dedup_window: window,
            max_attempts: 3,
            clock,
        };
        LocalBus::open(dir, opts).unwrap()
    }
}

conformance_suite!(Local);
