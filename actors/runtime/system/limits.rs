//! Process limits the daemon adjusts at start.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard limit and logs the
/// figure: every session, transcript, socket and sled file takes descriptors, and the soft
/// default (often 1024) runs out long before the machine does. Answers the soft limit in force
/// afterwards (`None` = unlimited). A failure to raise it is logged and otherwise ignored.
pub fn raise_nofile() -> Option<u64> {
    let before = getrlimit(Resource::Nofile);
    if before.current == before.maximum {
        tracing::info!(
            nofile = ?before.current,
            "Open-file limit already at its hard limit."
        );
        return before.current;
    }
    let raised = Rlimit {
        current: before.maximum,
        maximum: before.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            let now = getrlimit(Resource::Nofile).current;
            tracing::info!(from = ?before.current, to = ?now, "Raised the open-file limit to its hard limit.");
            now
        }
        Err(e) => {
            tracing::warn!(nofile = ?before.current, hard = ?before.maximum, error = %e, "Cannot raise the open-file limit; keeping it.");
            before.current
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let after = raise_nofile();
        let now = getrlimit(Resource::Nofile);
        assert_eq!(after, now.current);
        // Raising the soft limit up to the hard one needs no privilege.
        assert_eq!(now.current, now.maximum);
    }
}
