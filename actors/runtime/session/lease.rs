//! Session ownership across nodes: on a shared bus (NATS) a run takes its session's lease in
//! the key-value store `session_leases` before it starts, keeps it renewed while it runs and
//! releases it after; a message for a session whose lease another node holds waits for it
//! (bounded), so a session runs on one node at a time. A node that dies stops renewing; its
//! lease expires after the time to live and the redelivered task runs on another node.
//!
//! With the leases comes the shared transcript: each session's transcript is a log in the
//! cluster's log store (`log_name`), read whole by a node that takes the lease after another
//! node ran the session, so the session continues there with its whole history. Each append is
//! fenced on the log's last sequence and stamped with the revision the run took the lease at
//! (the log refuses a revision older than one it holds); lines written while the log store is
//! unreachable are held and appended, in order, before the run lets the lease go.
//!
//! The embedded bus (one process) has no leases at all: the session actor already runs one
//! run at a time, so nothing is added to its path, and transcripts stay files.

use bus::kv::{LeaseError, Leases};
use bus::log::LogStore;
use clawbus_core::ids::SessionKey;
use std::sync::Arc;
use std::time::Duration;

/// The kind of log (a JetStream stream on NATS) the shared transcripts live in.
pub const TRANSCRIPT_LOGS: &str = "tx";

/// The key-value store (a JetStream KV bucket on NATS) the leases live in.
pub const LEASE_STORE: &str = "session_leases";

/// How long a run waits for its session's lease when its task has no deadline of its own.
pub const DEFAULT_LEASE_WAIT: Duration = Duration::from_secs(300);

/// The session leases of this process and the shared transcripts they guard, shared by its
/// agents.
#[derive(Clone)]
pub struct SessionLeases {
    leases: Leases,
    wait: Duration,
    transcripts: Arc<dyn LogStore>,
}

impl std::fmt::Debug for SessionLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLeases")
            .field("leases", &self.leases)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl SessionLeases {
    /// Session leases taken through `leases`, guarding the transcripts in `transcripts`; a run
    /// waits at most `wait` for one held elsewhere (less when its task's deadline comes sooner).
    pub fn new(leases: Leases, wait: Duration, transcripts: Arc<dyn LogStore>) -> Self {
        Self {
            leases,
            wait,
            transcripts,
        }
    }

    /// The shared transcripts.
    pub fn transcripts(&self) -> &Arc<dyn LogStore> {
        &self.transcripts
    }

    /// The leases.
    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// The longest wait for a held lease.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Takes the lease of `session`, waiting at most `within`: held by a run of the session
    /// while it runs, and by whatever must not meet one (a compaction, a delete).
    pub async fn acquire(
        &self,
        session: &SessionKey,
        within: Duration,
    ) -> Result<bus::kv::Lease, LeaseError> {
        self.leases
            .acquire(&lease_key(session.as_str()), within)
            .await
    }
}

/// The longest name kept verbatim (escaped); a longer one is cut and a hash of the whole
/// appended.
const MAX_VERBATIM: usize = bus::kv::MAX_VERBATIM;

/// The lease key of a session: `s.` and the session key with every byte outside
/// `A-Z a-z 0-9 - _` written `=XX`; a very long one cut, with a hash of the whole.
pub fn lease_key(session: &str) -> String {
    bus::kv::escaped_key("s.", session)
}

/// The shared transcript of `session` of `agent`: `<agent>.<session>`, each with every byte
/// outside `A-Z a-z 0-9 -` written `_XX` (log names are dot-separated tokens of
/// `A-Z a-z 0-9 - _`); a very long one cut, with a hash of the whole.
pub fn log_name(agent: &str, session: &str) -> String {
    let token = |s: &str| {
        let mut out = String::with_capacity(s.len() + 8);
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("_{b:02X}"));
            }
        }
        if out.len() > MAX_VERBATIM / 2 {
            out.truncate(MAX_VERBATIM / 2);
            out.push_str(&format!("_h{:016x}", bus::kv::fnv1a(s.as_bytes())));
        }
        out
    };
    format!("{}.{}", token(agent), token(session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_keys_are_valid_store_keys_and_tell_sessions_apart() {
        let a = lease_key("agent:chat:api:session:s1");
        assert_eq!(a, "s.agent=3Achat=3Aapi=3Asession=3As1");
        assert!(bus::kv::check_key(&a).is_ok());
        let long_a = format!("agent:chat:telegram:dm:{}a", "x".repeat(400));
        let long_b = format!("agent:chat:telegram:dm:{}b", "x".repeat(400));
        for k in [&long_a, &long_b] {
            assert!(
                bus::kv::check_key(&lease_key(k)).is_ok(),
                "{}",
                lease_key(k)
            );
        }
        assert_ne!(lease_key(&long_a), lease_key(&long_b));
        assert_ne!(lease_key("a.b"), lease_key("a_b"));
        assert!(bus::kv::check_key(&lease_key("ü é/..")).is_ok());
    }

    #[test]
    fn log_names_are_valid_log_names_and_tell_sessions_apart() {
        let a = log_name("chat", "agent:chat:api:session:s_1");
        assert_eq!(a, "chat.agent_3Achat_3Aapi_3Asession_3As_5F1");
        assert!(bus::log::check_name(&a).is_ok());
        let long = format!("agent:chat:telegram:dm:{}", "x".repeat(400));
        assert!(bus::log::check_name(&log_name("chat", &long)).is_ok());
        assert_ne!(
            log_name("chat", &format!("{long}a")),
            log_name("chat", &format!("{long}b"))
        );
        assert_ne!(log_name("chat", "a.b"), log_name("chat", "a_b"));
    }
}
