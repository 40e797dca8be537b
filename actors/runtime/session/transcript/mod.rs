//! Append-only JSONL transcripts: `<state-dir>/sessions/<agentId>/<sessionId>.jsonl`.
//!
//! One JSON entry per line. Lines are written and synced to disk before the run's reply is
//! acknowledged. The file is never rewritten: compaction appends a record, and the only change to
//! existing bytes is cutting a torn last line (a crash mid-write), which is first kept aside in
//! `<sessionId>.jsonl.corrupt`.
//!
//! On a shared bus the file is this node's copy of a shared log; lines held for that log while
//! its store is unreachable are recorded in `<sessionId>.jsonl.held` until they reach it.

use crate::model::ChatMessage;
use bus::{Clock, SystemClock};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

mod held;
mod shared;

/// The buffer a transcript is read through when a session opens.
const READ_BUFFER: usize = 16 * 1024;

use shared::SharedLog;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique id of the entry (UUIDv7, so ids sort by time).
    pub id: Uuid,
    /// Unix milliseconds.
    pub ts: u64,
    /// On a shared transcript: the revision of the session lease the writing run took (what
    /// its append was stamped with in the log, which refuses appends of older holders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
    /// What the line records.
    #[serde(flatten)]
    pub body: EntryBody,
}

/// What a transcript line records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryBody {
    /// The session's first line.
    Session {
        /// Format version.
        version: u32,
        /// The session key.
        key: String,
        /// The agent.
        agent: String,
    },
    /// A message of the conversation (user, assistant with tool calls, tool result).
    Message {
        /// The message as the model saw it.
        message: ChatMessage,
        /// The request that produced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// True for silent turns (memory flush) that stay out of the model's view.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        silent: bool,
        /// For a model's reply: the model that answered, as `provider/model`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// For a model's reply: the output-token limit cut it off (`finish_reason: "length"`);
        /// a cut-off reply's tool calls are never run.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// A model call moved from one model to the next (the agent's `fallbacks`), before the reply
    /// of the model that answered.
    ModelFellOver {
        /// The request.
        request_id: String,
        /// The model left, as `provider/model`.
        from: String,
        /// The model tried next.
        to: String,
        /// Why: the error of the failed call, or the open circuit breaker.
        reason: String,
    },
    /// Older turns replaced in the model's view by a summary, or cut from it.
    Compaction {
        /// The summary the model sees instead; empty when the older turns were cut without one
        /// (a compaction asked to keep the last messages only).
        summary: String,
        /// The first message entry still shown verbatim.
        first_kept: Option<Uuid>,
        /// Estimated tokens before compaction.
        tokens_before: u64,
    },
    /// A tool call is about to run: written (and synced) before it has any effect, so a turn
    /// interrupted by a crash knows which calls may have acted.
    ToolCallStarted {
        /// The request.
        request_id: String,
        /// The model's id of the call.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// An interrupted run picked up where its last durable step left it.
    RunResumed {
        /// The request.
        request_id: String,
        /// The delivery attempt that resumed it.
        attempt: u32,
        /// Calls that had started but recorded no result: their effects are unknown; they were
        /// answered as interrupted unless their tool is idempotent (then they ran again).
        interrupted: Vec<String>,
    },
    /// On a shared bus: the session lease a run held (taken at `first_revision`, last renewed at
    /// `last_revision`), written when the run has left its session. Revisions only grow across
    /// the cluster's lease store, so the runs of a session never overlapped when, in the order
    /// they were taken, each run's first revision is above the last one's last.
    RunLease {
        /// The request.
        request_id: String,
        /// The holder: `<node>/<process life>`.
        holder: String,
        /// The revision the lease was taken at.
        first_revision: u64,
        /// The revision of its last renewal.
        last_revision: u64,
    },
    /// A run ended without a normal answer.
    RunEnded {
        /// The request.
        request_id: String,
        /// `cancelled`, `failed`, `timed_out`.
        outcome: bus::TaskState,
        /// Why.
        reason: String,
    },
}

impl Entry {
    /// A new entry; [`Transcript::append`] stamps it with its clock's time when it is written.
    pub fn new(body: EntryBody) -> Self {
        Self {
            id: Uuid::now_v7(),
            ts: UNSTAMPED,
            lease: None,
            body,
        }
    }

    /// A message entry.
    pub fn message(message: ChatMessage, request_id: Option<&str>, silent: bool) -> Self {
        Self::new(EntryBody::Message {
            message,
            request_id: request_id.map(str::to_string),
            silent,
            model: None,
            truncated: false,
        })
    }

    /// A model's reply to request `request_id`, answered by `model` (`provider/model`);
    /// `truncated` when the output-token limit cut it off.
    pub(crate) fn model_reply(
        message: ChatMessage,
        request_id: &str,
        model: &str,
        truncated: bool,
    ) -> Self {
        Self::new(EntryBody::Message {
            message,
            request_id: Some(request_id.to_string()),
            silent: false,
            model: Some(model.to_string()),
            truncated,
        })
    }
}

/// The `ts` of an entry not yet written.
const UNSTAMPED: u64 = 0;

/// An entry as its line is written: stamped with the time of the write when it has no `ts`
/// yet. Serialises exactly as an [`Entry`] with that `ts` (the same fields in the same order),
/// borrowing the entry instead of copying it.
#[derive(Serialize)]
struct Stamped<'a> {
    id: &'a Uuid,
    ts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<u64>,
    #[serde(flatten)]
    body: &'a EntryBody,
}

impl<'a> Stamped<'a> {
    /// `entry` stamped with `now` if unstamped, and with `lease` when given.
    fn of(entry: &'a Entry, now: u64, lease: Option<u64>) -> Self {
        Self {
            id: &entry.id,
            ts: if entry.ts == UNSTAMPED { now } else { entry.ts },
            lease: lease.or(entry.lease),
            body: &entry.body,
        }
    }
}

/// What loading a transcript found.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Every intact entry, in order.
    pub entries: Vec<Entry>,
    /// Bytes of a torn last line that were moved to the `.corrupt` file.
    pub torn_bytes: usize,
}

/// What reading a transcript entry by entry found ([`Transcript::open_each`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Read {
    /// Intact entries handed on.
    pub entries: usize,
    /// Bytes of a torn last line that were moved to the `.corrupt` file.
    pub torn_bytes: usize,
}

/// The writer of one transcript file.
///
/// The file is opened for each append and closed after it, so a live session holds no
/// descriptor: thousands of live sessions stay far below the process's descriptor limit.
///
/// On a shared bus the transcript is the session's log in the cluster's log store
/// ([`SharedLog`]): every node reads it whole when it takes the session's lease and appends to
/// it fenced on the last sequence it knows, so another node continues the session with its
/// whole history; the file stays as this node's copy of the lines it wrote (what local readers
/// show). The run path writes through the async methods ([`Transcript::record`] and the rest),
/// which pick the backing.
pub(crate) struct Transcript {
    path: PathBuf,
    /// Serialises appends (and the cut-back of a failed one) within the process.
    lock: Mutex<()>,
    clock: Arc<dyn Clock>,
    shared: Option<SharedLog>,
}

impl Transcript {
    /// The file for a session.
    pub(crate) fn path_for(state_dir: &Path, agent: &str, session_id: &Uuid) -> PathBuf {
        state_dir
            .join("sessions")
            .join(agent)
            .join(format!("{session_id}.jsonl"))
    }

    /// Opens (creating) the transcript and loads its entries, setting a torn last line aside.
    /// A new file (and any folder made for it) is synced into its folder, so a transcript whose
    /// lines were synced does not vanish with its directory entry in a power loss.
    #[cfg(test)]
    pub(crate) fn open(path: &Path) -> io::Result<(Self, Loaded)> {
        let mut entries = Vec::new();
        let (transcript, read) = Self::open_each(path, |e| entries.push(e))?;
        Ok((
            transcript,
            Loaded {
                entries,
                torn_bytes: read.torn_bytes,
            },
        ))
    }

    /// [`Transcript::open`], handing each intact entry to `each` as it is read instead of
    /// keeping them all: a session that rebuilds its view from the file holds one line at a
    /// time beside the view, not the file's bytes and every entry as well.
    pub(crate) fn open_each(path: &Path, each: impl FnMut(Entry)) -> io::Result<(Self, Read)> {
        if let Some(dir) = path.parent() {
            create_dirs(dir)?;
        }
        let created = !path.try_exists()?;
        let read = repair_and_read(path, each)?;
        if created {
            OpenOptions::new().create(true).append(true).open(path)?;
            sync_parent(path)?;
        }
        Ok((
            Self {
                path: path.to_path_buf(),
                lock: Mutex::new(()),
                clock: Arc::new(SystemClock),
                shared: None,
            },
            read,
        ))
    }

    /// Every entry now: the shared log's, else the file's.
    pub(crate) async fn read_entries(&self) -> io::Result<Vec<Entry>> {
        match &self.shared {
            Some(shared) => {
                let _writing = shared.writing.lock().await;
                self.read_shared(shared).await
            }
            None => self.entries(),
        }
    }

    /// Appends entries durably: synced to disk, or appended to the shared log.
    pub(crate) async fn record(&self, entries: &[Entry]) -> io::Result<()> {
        self.record_with(entries, true).await
    }

    /// Appends entries; to a file without waiting for the disk (they survive a crash of the
    /// process, the kernel has them, but not a power loss until the next [`Transcript::flush`]
    /// or synced append); to the shared log durably.
    pub(crate) async fn record_unsynced(&self, entries: &[Entry]) -> io::Result<()> {
        self.record_with(entries, false).await
    }

    /// Appends the first line of a shared log that has none (this node's copy has its own).
    pub(crate) async fn start_shared(&self, first: &Entry) -> io::Result<()> {
        self.record_in(std::slice::from_ref(first), true, false)
            .await
    }

    async fn record_with(&self, entries: &[Entry], sync: bool) -> io::Result<()> {
        self.record_in(entries, sync, true).await
    }

    /// Makes what was appended durable: syncs the file (off the async thread); the shared log
    /// is durable once appended.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        if self.shared.is_some() {
            return Ok(());
        }
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            OpenOptions::new().append(true).open(&path)?.sync_data()
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
    }

    /// Stamps entries with `clock` (the process's one clock) rather than the system clock.
    pub(crate) fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Every intact entry on disk now (a torn last line is skipped, not repaired).
    pub(crate) fn entries(&self) -> io::Result<Vec<Entry>> {
        let _guard = self
            .lock
            .lock()
            .map_err(|_| io::Error::other("transcript lock poisoned"))?;
        let bytes = std::fs::read(&self.path)?;
        Ok(bytes
            .split(|&b| b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Entry>(line).ok())
            .collect())
    }

    /// Appends entries and syncs them to disk; returns once they are durable.
    pub(crate) fn append(&self, entries: &[Entry]) -> io::Result<()> {
        self.write(entries, true)
    }

    /// Each entry as a JSON line (no newline), stamped with the clock's time if unstamped, and
    /// with `lease` when given.
    fn stamp(&self, entries: &[Entry], lease: Option<u64>) -> io::Result<Vec<Vec<u8>>> {
        let now = self.clock.now_ms();
        entries
            .iter()
            .map(|e| serde_json::to_vec(&Stamped::of(e, now, lease)).map_err(io::Error::other))
            .collect()
    }

    fn write(&self, entries: &[Entry], sync: bool) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let now = self.clock.now_ms();
        let mut buf = Vec::with_capacity(entries.len() * 256);
        for e in entries {
            serde_json::to_writer(&mut buf, &Stamped::of(e, now, None))
                .map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        self.write_bytes(&buf, sync)
    }

    fn write_bytes(&self, buf: &[u8], sync: bool) -> io::Result<()> {
        let _guard = self
            .lock
            .lock()
            .map_err(|_| io::Error::other("transcript lock poisoned"))?;
        let mut file = OpenOptions::new().append(true).open(&self.path)?;
        let len = file.metadata()?.len();
        let written = file
            .write_all(buf)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // A part of a line (disk full) would glue the next append onto it and lose that
            // entry too: cut the file back to where this append started.
            let cut = file.set_len(len).and_then(|()| file.sync_data());
            if let Err(cut) = cut {
                tracing::error!(file = %self.path.display(), error = %cut, "Could not cut a failed transcript append back.");
            }
            return Err(e);
        }
        Ok(())
    }
}

/// Reads every line, handing each intact entry to `each`; a last line that is cut short or
/// unparsable is moved to `.corrupt` and cut. A bad line in the middle is kept in place,
/// skipped, and reported: it was not torn by a crash. The file is read a buffer at a time:
/// one line is held, not the whole file.
fn repair_and_read(path: &Path, mut each: impl FnMut(Entry)) -> io::Result<Read> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Read::default()),
        Err(e) => return Err(e),
    };
    let mut reader = io::BufReader::with_capacity(READ_BUFFER, file);
    let mut read = Read::default();
    // Where the line being read starts in the file.
    let mut offset: u64 = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let terminated = line.last() == Some(&b'\n');
        let text = if terminated {
            &line[..n - 1]
        } else {
            &line[..]
        };
        let parsed = serde_json::from_slice::<Entry>(text);
        // A terminated line with more after it is in the middle; an unterminated one is last.
        let last = !terminated || reader.fill_buf()?.is_empty();
        match (terminated, parsed) {
            (true, Ok(entry)) => {
                each(entry);
                read.entries += 1;
            }
            (true, Err(e)) if !last => {
                tracing::error!(file = %path.display(), offset, error = %e, "Transcript line unreadable; skipped.");
            }
            (false, Ok(entry)) => {
                // Complete JSON whose newline never made it: keep it, terminate the line.
                each(entry);
                read.entries += 1;
                let mut f = OpenOptions::new().append(true).open(path)?;
                f.write_all(b"\n")?;
                f.sync_all()?;
                break;
            }
            (_, Err(_)) => {
                // The last line: torn by a crash mid-write (no newline, or cut JSON).
                set_aside(path, &line)?;
                let file = OpenOptions::new().write(true).open(path)?;
                file.set_len(offset)?;
                file.sync_all()?;
                read.torn_bytes = n;
                tracing::warn!(
                    file = %path.display(),
                    torn_bytes = read.torn_bytes,
                    kept_entries = read.entries,
                    "Torn last transcript line set aside in .corrupt; the session continues."
                );
                break;
            }
        }
        offset += n as u64;
    }
    Ok(read)
}

fn set_aside(path: &Path, torn: &[u8]) -> io::Result<()> {
    let mut corrupt = path.as_os_str().to_owned();
    corrupt.push(".corrupt");
    let corrupt = PathBuf::from(corrupt);
    let created = !corrupt.try_exists()?;
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&corrupt)?;
    f.write_all(torn)?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    if created {
        sync_parent(&corrupt)?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents, syncing each new folder into its parent.
fn create_dirs(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
        if d.try_exists()? {
            break;
        }
        missing.push(d);
        at = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    for d in missing.iter().rev() {
        sync_parent(d)?;
    }
    Ok(())
}

/// Syncs the folder holding `path`, making a new entry in it durable.
fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
