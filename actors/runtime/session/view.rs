//! Reading sessions from outside their actors: the index row, the live state and the transcript
//! on disk. Shared by the HTTP API (`/v1/sessions`) and the `sessions_*` tools.

use super::index::{IndexError, SessionIndex, SessionMeta};
use super::transcript::{Entry, Transcript};
use super::{LiveInfo, LiveSessions, SessionState};
use std::path::PathBuf;

/// Where a session stands, as listings show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ListedState {
    /// Live and waiting for work.
    Idle,
    /// Live with a run in progress.
    Processing,
    /// Not live: only on disk.
    Stopped,
}

impl ListedState {
    /// `idle`, `processing` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Processing => "processing",
            Self::Stopped => "stopped",
        }
    }

    /// The state of a session and the runs waiting in its lane, from its live entry (`None`:
    /// not live).
    pub fn of(live: Option<LiveInfo>) -> (Self, usize) {
        match live {
            Some(LiveInfo {
                state: SessionState::Processing,
                queued,
            }) => (Self::Processing, queued),
            Some(LiveInfo { queued, .. }) => (Self::Idle, queued),
            None => (Self::Stopped, 0),
        }
    }
}

/// Read access to every session of the process: the index, the live states, the transcripts.
#[derive(Clone)]
pub struct SessionReader {
    /// The session index.
    pub index: SessionIndex,
    /// Live sessions and their state.
    pub live: LiveSessions,
    /// The state directory the transcripts live under.
    pub state_dir: PathBuf,
}

impl std::fmt::Debug for SessionReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionReader")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl SessionReader {
    /// Every session, optionally of one agent, most recently active first.
    pub fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        self.index.list(agent)
    }

    /// The index entry of `key`, if the session exists.
    pub fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        self.index.get(key)
    }

    /// The live state of `key` and the runs waiting in its lane.
    pub fn state(&self, key: &str) -> (ListedState, usize) {
        ListedState::of(self.live.get(key).map(|l| *l))
    }

    /// The transcript file of a session.
    pub fn transcript_path(&self, meta: &SessionMeta) -> PathBuf {
        Transcript::path_for(&self.state_dir, &meta.agent, &meta.session_id)
    }

    /// The transcript of a session as raw JSON lines, without repairing it (the session actor
    /// owns repairs): unreadable lines come back in place as `{"type":"unreadable"}`. A session
    /// that has no file yet has no entries.
    pub fn raw_entries(&self, meta: &SessionMeta) -> std::io::Result<Vec<serde_json::Value>> {
        Ok(read_lines(&self.transcript_path(meta))?
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|_| serde_json::json!({ "type": "unreadable", "text": l }))
            })
            .collect())
    }

    /// The intact entries of a session's transcript, in order (unreadable lines skipped).
    pub fn entries(&self, meta: &SessionMeta) -> std::io::Result<Vec<Entry>> {
        Ok(read_lines(&self.transcript_path(meta))?
            .lines()
            .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
            .collect())
    }
}

/// The text of a file, empty when it does not exist.
fn read_lines(path: &std::path::Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    }
}
