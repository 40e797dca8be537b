//! Reading sessions from outside their actors: the index row, the live state and the transcript
//! (the file on disk; on a shared bus the session's log in the cluster, which holds every
//! node's lines). Shared by the HTTP API (`/v1/sessions`, `chat.history`) and the `sessions_*`
//! tools.

use super::index::{IndexError, SessionIndex, SessionMeta};
use super::transcript::{Entry, Transcript};
use super::{LiveInfo, LiveSessions, SessionState};
use bus::log::{LogRecord, LogStore};
use std::path::PathBuf;
use std::sync::Arc;

/// Where a session stands, as listings show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ListedState {
    /// Live and waiting for work.
    Idle,
    /// Live with a run in progress.
    Processing,
    /// Not live, only on disk (evicted, or not used since a restart): it takes work as an idle
    /// one does, so it is shown as `idle` (with `live: false`).
    #[serde(rename = "idle")]
    Unloaded,
}

impl ListedState {
    /// `idle` or `processing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle | Self::Unloaded => "idle",
            Self::Processing => "processing",
        }
    }

    /// Whether the session is live (its actor in memory).
    pub fn is_live(self) -> bool {
        self != Self::Unloaded
    }

    /// The state of a session and the runs waiting in its lane, from its live entry (`None`:
    /// not live).
    pub fn of(live: Option<LiveInfo>) -> (Self, usize) {
        match live {
            Some(LiveInfo {
                state: SessionState::Processing,
                queued,
                ..
            }) => (Self::Processing, queued),
            Some(LiveInfo { queued, .. }) => (Self::Idle, queued),
            None => (Self::Unloaded, 0),
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
    /// On a shared bus (NATS): the cluster's transcripts, read instead of this node's copy
    /// (which holds only the lines this node wrote). `None` on the embedded bus.
    pub shared: Option<Arc<dyn LogStore>>,
}

impl std::fmt::Debug for SessionReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionReader")
            .field("state_dir", &self.state_dir)
            .field("shared", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl SessionReader {
    /// Every session, optionally of one agent, most recently active first.
    pub async fn list(&self, agent: Option<&str>) -> Result<Vec<SessionMeta>, IndexError> {
        self.index.list(agent).await
    }

    /// The index entry of `key`, if the session exists.
    pub async fn get(&self, key: &str) -> Result<Option<SessionMeta>, IndexError> {
        self.index.get(key).await
    }

    /// The live state of `key` and the runs waiting in its lane.
    pub fn state(&self, key: &str) -> (ListedState, usize) {
        ListedState::of(self.live.get(key).map(|l| *l))
    }

    /// The transcript file of a session.
    pub fn transcript_path(&self, meta: &SessionMeta) -> PathBuf {
        Transcript::path_for(&self.state_dir, &meta.agent, &meta.session_id)
    }

    /// Where the transcript of a session is read from, for logs: its file, or its shared log.
    pub fn transcript_source(&self, meta: &SessionMeta) -> String {
        match &self.shared {
            Some(_) => format!("log {}", super::lease::log_name(&meta.agent, &meta.key)),
            None => self.transcript_path(meta).display().to_string(),
        }
    }

    /// The transcript's lines as stored: the shared log's records on a shared bus, else the
    /// file's bytes (none when it does not exist). The one place transcripts are read from
    /// outside their session.
    async fn raw_lines(&self, meta: &SessionMeta) -> std::io::Result<RawLines> {
        match &self.shared {
            Some(log) => log
                .read(&super::lease::log_name(&meta.agent, &meta.key))
                .await
                .map(RawLines::Shared)
                .map_err(std::io::Error::other),
            None => read_bytes(&self.transcript_path(meta)).map(RawLines::File),
        }
    }

    /// The transcript of a session as raw JSON lines, without repairing it (the session actor
    /// owns repairs): unreadable lines (not JSON, not UTF-8) come back in place as
    /// `{"type":"unreadable","line":N,"error":…,"text":…}` and are logged. A session that has no
    /// file (or shared log) yet has no entries.
    pub async fn raw_entries(&self, meta: &SessionMeta) -> std::io::Result<Vec<serde_json::Value>> {
        let raw = self.raw_lines(meta).await?;
        Ok(raw
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let read = std::str::from_utf8(line)
                    .map_err(|e| format!("not UTF-8: {e}"))
                    .and_then(|l| serde_json::from_str(l).map_err(|e| e.to_string()));
                read.unwrap_or_else(|error| {
                    tracing::warn!(source = %self.transcript_source(meta), line = i + 1, %error, "Transcript line unreadable; skipped.");
                    serde_json::json!({
                        "type": "unreadable",
                        "line": i + 1,
                        "error": error,
                        "text": String::from_utf8_lossy(line),
                    })
                })
            })
            .collect())
    }

    /// The intact entries of a session's transcript, in order (unreadable lines skipped).
    pub async fn entries(&self, meta: &SessionMeta) -> std::io::Result<Vec<Entry>> {
        let raw = self.raw_lines(meta).await?;
        Ok(raw
            .lines()
            .filter_map(|l| serde_json::from_slice::<Entry>(l).ok())
            .collect())
    }
}

/// A transcript's lines as stored.
enum RawLines {
    /// A file's bytes, lines separated by newlines.
    File(Vec<u8>),
    /// A shared log's records, one line each.
    Shared(Vec<LogRecord>),
}

impl RawLines {
    /// The lines, without their newlines.
    fn lines(&self) -> Box<dyn Iterator<Item = &[u8]> + '_> {
        match self {
            Self::File(bytes) => Box::new(lines(bytes)),
            Self::Shared(records) => Box::new(records.iter().map(|r| r.data.as_slice())),
        }
    }
}

/// The lines of a file's bytes, without their newlines; an empty last line is no line.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes
        .split(|&b| b == b'\n')
        .filter(move |_| !bytes.is_empty())
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// The bytes of a file (a transcript may hold a line that is not UTF-8), empty when it does not
/// exist.
fn read_bytes(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
