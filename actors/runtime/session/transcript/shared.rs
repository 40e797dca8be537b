//! The shared side of a transcript: the session's log in the cluster's log store, appended to
//! fenced on the last sequence this node knows and stamped with the run's lease revision, and
//! the lines held while the store is unreachable until they reach it.

use super::held::{HeldFile, HeldFor};
use super::{Entry, Transcript};
use bus::log::{Fence, LogError};
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The session's log in the cluster's log store.
pub(crate) struct SharedLog {
    pub(super) log: Arc<dyn bus::log::LogStore>,
    pub(super) name: String,
    /// The log's last sequence as this node last wrote or read it (each append is fenced on
    /// it); [`UNREAD`] until the log is read.
    pub(super) last: std::sync::atomic::AtomicU64,
    /// The revision of the session lease the run writing now took (each append is stamped
    /// with it); [`NO_LEASE`] between runs.
    pub(super) lease: std::sync::atomic::AtomicU64,
    /// Serialises this process's appends, so each names the sequence the one before left, and
    /// holds the lines written while the log store was unreachable.
    pub(super) writing: tokio::sync::Mutex<Unsent>,
}

/// The last sequence of a shared log never read.
const UNREAD: u64 = u64::MAX;

/// No lease held: appends are not stamped.
const NO_LEASE: u64 = 0;

/// The most lines held for an unreachable log store; a write past it fails.
pub(crate) const MAX_UNSENT_LINES: usize = 10_000;

/// The most bytes of lines held for an unreachable log store; a write past it fails. Held lines
/// go as one append, so they fit one with their line breaks: more would be refused by the store
/// every time (not unreachable: too large), and held for ever. So a line over an append's limit
/// fails its write too, instead of being held.
pub(crate) const MAX_UNSENT_BYTES: usize = bus::log::MAX_APPEND_BYTES - MAX_UNSENT_LINES;

/// The first wait before sending held lines again, doubled up to [`UNSENT_RETRY_MAX`].
const UNSENT_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);

/// The longest wait between two tries to send held lines.
const UNSENT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Lines written while the log store was unreachable, in order: in this node's copy (synced),
/// not yet in the shared log, and recorded durably beside it ([`HeldFile`]). They go to it,
/// fenced and before any later line, at the next write, and at the latest before the run lets
/// its lease go ([`Transcript::send_unsent`]); bounded by [`MAX_UNSENT_BYTES`] and
/// [`MAX_UNSENT_LINES`]. Lines found in the record when the session is opened again (the node
/// was killed holding them) are sent when the next run takes the lease, fenced and stamped as
/// they were written, before any of its lines.
#[derive(Debug)]
pub(crate) struct Unsent {
    lines: Vec<Vec<u8>>,
    bytes: usize,
    /// The sequence the first of them follows: what their first try was fenced on
    /// ([`UNREAD`]: not known, looked up).
    after: u64,
    /// The lease revision they are stamped with, the run's when they were held.
    lease: u64,
    /// True for lines held by an earlier life of this process, found in the record.
    recovered: bool,
    file: HeldFile,
}

impl Unsent {
    /// Nothing held, recorded in `file`.
    fn empty(file: HeldFile) -> Self {
        Self {
            lines: Vec::new(),
            bytes: 0,
            after: UNREAD,
            lease: NO_LEASE,
            recovered: false,
            file,
        }
    }

    /// What the record `file` holds: lines held by an earlier life of this process.
    fn recover(file: HeldFile) -> Self {
        let found = match file.load() {
            Ok(found) => found,
            Err(e) => {
                tracing::error!(file = %file.path().display(), error = %e, "Record of held transcript lines unreadable; they stay in this node's copy only.");
                None
            }
        };
        let mut unsent = Self::empty(file);
        if let Some((held, lines)) = found {
            unsent.bytes = lines.iter().map(Vec::len).sum();
            unsent.lines = lines;
            unsent.after = held.after;
            unsent.lease = held.lease;
            unsent.recovered = !unsent.lines.is_empty();
        }
        unsent
    }

    /// Holds `lines` after those held already, the first of them following sequence `after`,
    /// stamped with `lease`, once they are recorded durably; an error, holding nothing, past the
    /// bounds or when they could not be recorded.
    fn hold(&mut self, lines: &[Vec<u8>], after: u64, lease: u64) -> io::Result<()> {
        let bytes = lines.iter().map(Vec::len).sum::<usize>();
        if self.lines.len() + lines.len() > MAX_UNSENT_LINES
            || self.bytes + bytes > MAX_UNSENT_BYTES
        {
            return Err(io::Error::other(format!(
                "the shared transcript is unreachable and {} lines ({} bytes) already wait for it, the most held",
                self.lines.len(),
                self.bytes
            )));
        }
        if self.lines.is_empty() {
            self.file.start(HeldFor { after, lease }, lines)?;
            self.after = after;
            self.lease = lease;
        } else {
            self.file.add(lines)?;
        }
        self.lines.extend_from_slice(lines);
        self.bytes += bytes;
        Ok(())
    }

    /// Forgets the first `n` lines (in the log now), the rest following sequence `after`.
    fn sent(&mut self, n: usize, after: u64) {
        let n = n.min(self.lines.len());
        self.bytes -= self.lines[..n].iter().map(Vec::len).sum::<usize>();
        self.lines.drain(..n);
        self.after = after;
        let recorded = if self.lines.is_empty() {
            self.file.clear()
        } else {
            let held = HeldFor {
                after,
                lease: self.lease,
            };
            self.file.start(held, &self.lines)
        };
        if let Err(e) = recorded {
            // Sent again later they are found in the log after `after` (the fence), never
            // appended twice.
            tracing::warn!(file = %self.file.path().display(), error = %e, "Record of held transcript lines not updated after they were sent.");
        }
    }

    /// Forgets every held line (the log will never take them).
    fn clear(&mut self) {
        if let Err(e) = self.file.clear() {
            tracing::error!(file = %self.file.path().display(), error = %e, "Record of held transcript lines not removed.");
        }
        self.lines.clear();
        self.bytes = 0;
        self.after = UNREAD;
        self.lease = NO_LEASE;
        self.recovered = false;
    }

    /// How many lines are held.
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }
}

/// True for an append the log refused because another writer moved it on or holds a newer
/// lease: the run is no longer the session's writer.
fn fenced_off(e: &LogError) -> bool {
    matches!(e, LogError::Fenced { .. } | LogError::LeaseBehind { .. })
}

/// The fence of an append following sequence `after`, stamped with lease revision `lease`
/// (none for [`NO_LEASE`]).
fn fence(after: u64, lease: u64) -> Fence {
    let fence = Fence::at(after);
    match lease {
        NO_LEASE => fence,
        revision => fence.with_lease(revision),
    }
}

impl Transcript {
    /// Makes the log `name` of `log` the transcript (the file stays as this node's copy); it is
    /// read whole before the first write ([`Transcript::load_if_changed`]).
    pub(crate) fn with_shared(mut self, log: Arc<dyn bus::log::LogStore>, name: String) -> Self {
        self.shared = Some(SharedLog {
            log,
            name,
            last: std::sync::atomic::AtomicU64::new(UNREAD),
            lease: std::sync::atomic::AtomicU64::new(NO_LEASE),
            writing: tokio::sync::Mutex::new(Unsent::recover(HeldFile::beside(&self.path))),
        });
        self
    }

    /// Stamps the run's appends from now on with the revision its session lease was taken at
    /// (`None` when the run let it go or lost it). Lines still held are dropped: they were
    /// written under a lease that ended, and are never appended after it. Lines an earlier life
    /// of this process held (it was killed before the log store came back) are sent first, as
    /// they were written: fenced on the sequence they follow and stamped with their lease, so
    /// the log refuses them when another holder went on meanwhile.
    pub(crate) async fn set_lease(&self, revision: Option<u64>) {
        let Some(shared) = &self.shared else {
            return;
        };
        let mut unsent = shared.writing.lock().await;
        if unsent.recovered {
            self.send_recovered(shared, &mut unsent).await;
        }
        self.drop_unsent(
            shared,
            &mut unsent,
            "the lease they were written under ended",
        );
        shared
            .lease
            .store(revision.unwrap_or(NO_LEASE), Ordering::SeqCst);
    }

    /// Sends the lines an earlier life of this process held, once; refused (or not sent) they
    /// are dropped, staying in this node's copy. The next run reads the log whole.
    async fn send_recovered(&self, shared: &SharedLog, unsent: &mut Unsent) {
        let lines = unsent.len();
        if unsent.after == UNREAD {
            // Where they go is not known: a try that went in before the crash could not be
            // told from the log's own lines, and they are never appended twice.
            self.drop_unsent(shared, unsent, "the sequence they follow is not known");
            return;
        }
        match self.send_held(shared, unsent).await {
            Ok(()) => {
                tracing::info!(log = %shared.name, lines, "Lines held before this node restarted appended to the shared transcript.");
            }
            Err(e) => {
                let why = format!("held before this node restarted and not appended: {e}");
                self.drop_unsent(shared, unsent, &why);
            }
        }
        unsent.recovered = false;
        shared.last.store(UNREAD, Ordering::SeqCst);
    }

    /// How many lines wait for the shared log (0 for a file).
    #[cfg(test)]
    pub(crate) async fn unsent(&self) -> usize {
        match &self.shared {
            Some(shared) => shared.writing.lock().await.len(),
            None => 0,
        }
    }

    /// Drops the held lines (never appended: the log went on without them); they stay in this
    /// node's copy. The next run reads the log again.
    fn drop_unsent(&self, shared: &SharedLog, unsent: &mut Unsent, why: &str) {
        if unsent.lines.is_empty() {
            return;
        }
        tracing::error!(log = %shared.name, lines = unsent.lines.len(), copy = %self.path.display(), why, "Lines written while the shared transcript was unreachable are not appended to it; they stay in this node's copy only.");
        unsent.clear();
        shared.last.store(UNREAD, Ordering::SeqCst);
    }

    /// Appends the lines held while the log store was unreachable, waiting for it (tries again
    /// with a growing pause) as long as it takes: the run calls it before it lets its lease go,
    /// under the lease's keeping, which bounds the wait. An error when the log went on without
    /// them (another writer, or a newer lease): they are dropped, never appended after another
    /// writer's lines. Nothing to do for a file.
    pub(crate) async fn send_unsent(&self) -> io::Result<()> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let mut pause = UNSENT_RETRY_FIRST;
        loop {
            {
                let mut unsent = shared.writing.lock().await;
                match self.send_held(shared, &mut unsent).await {
                    Ok(()) => return Ok(()),
                    Err(e) if fenced_off(&e) => {
                        self.drop_unsent(shared, &mut unsent, "the log went on without them");
                        return Err(io::Error::other(e));
                    }
                    Err(e) => {
                        tracing::debug!(log = %shared.name, lines = unsent.len(), error = %e, "Shared transcript still unreachable; held lines sent later.");
                    }
                }
            }
            self.clock.sleep(pause).await;
            pause = (pause * 2).min(UNSENT_RETRY_MAX);
        }
    }

    /// Appends the held lines as one batch, fenced on the sequence they follow. When that is
    /// refused because an earlier try went in though its answer was lost, the log holds exactly
    /// the first held lines after that sequence: those are known sent, and the rest go again.
    async fn send_held(&self, shared: &SharedLog, unsent: &mut Unsent) -> Result<(), LogError> {
        for _ in 0..3 {
            if unsent.lines.is_empty() {
                return Ok(());
            }
            let after = match unsent.after {
                UNREAD => shared.log.last(&shared.name).await?,
                known => known,
            };
            let tried = shared
                .log
                .append(
                    &shared.name,
                    unsent.lines.clone(),
                    fence(after, unsent.lease),
                )
                .await;
            match tried {
                Ok(now) => {
                    tracing::info!(log = %shared.name, lines = unsent.len(), "Lines held while the shared transcript was unreachable appended.");
                    shared.last.store(now, Ordering::SeqCst);
                    unsent.sent(unsent.len(), now);
                    return Ok(());
                }
                Err(e @ LogError::Fenced { .. }) if unsent.after != UNREAD => {
                    let records = shared.log.read(&shared.name).await?;
                    let newer: Vec<_> = records.iter().filter(|r| r.seq > after).collect();
                    let ours = !newer.is_empty()
                        && newer.len() <= unsent.len()
                        && newer.iter().zip(&unsent.lines).all(|(r, l)| r.data == *l);
                    if !ours {
                        return Err(e);
                    }
                    let now = records.last().map_or(after, |r| r.seq);
                    shared.last.store(now, Ordering::SeqCst);
                    unsent.sent(newer.len(), now);
                }
                Err(e) => return Err(e),
            }
        }
        Err(LogError::storage(
            format!("send held lines to {}", shared.name),
            "the log kept moving",
        ))
    }

    /// The fence of an append following sequence `after`, stamped with the run's lease.
    fn fence(&self, shared: &SharedLog, after: u64) -> Fence {
        fence(after, shared.lease.load(Ordering::SeqCst))
    }

    /// True when the transcript is a shared log.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Forgets where the shared log stood, so the next run reads it again (after a run whose
    /// lines are not all known here).
    pub(crate) fn forget(&self) {
        if let Some(shared) = &self.shared {
            shared.last.store(UNREAD, Ordering::SeqCst);
        }
    }

    /// The shared log's entries when it changed since this node last wrote or read it (another
    /// node ran the session meanwhile, or it was never read); `None` when it did not, or the
    /// transcript is a file.
    pub(crate) async fn load_if_changed(&self) -> io::Result<Option<Vec<Entry>>> {
        let Some(shared) = &self.shared else {
            return Ok(None);
        };
        let _writing = shared.writing.lock().await;
        let last = shared
            .log
            .last(&shared.name)
            .await
            .map_err(io::Error::other)?;
        if last == shared.last.load(Ordering::SeqCst) {
            return Ok(None);
        }
        Ok(Some(self.read_shared(shared).await?))
    }

    pub(super) async fn read_shared(&self, shared: &SharedLog) -> io::Result<Vec<Entry>> {
        let records = shared
            .log
            .read(&shared.name)
            .await
            .map_err(io::Error::other)?;
        let last = records.last().map_or(0, |r| r.seq);
        shared.last.store(last, Ordering::SeqCst);
        Ok(records
            .iter()
            .filter_map(|r| serde_json::from_slice::<Entry>(&r.data).ok())
            .collect())
    }

    /// Appends to the file, or to the shared log and (with `copy`) this node's copy.
    pub(super) async fn record_in(
        &self,
        entries: &[Entry],
        sync: bool,
        copy: bool,
    ) -> io::Result<()> {
        let Some(shared) = &self.shared else {
            return self.write(entries, sync);
        };
        if entries.is_empty() {
            return Ok(());
        }
        let lease = match shared.lease.load(Ordering::SeqCst) {
            NO_LEASE => None,
            revision => Some(revision),
        };
        let lines = self.stamp(entries, lease)?;
        let mut unsent = shared.writing.lock().await;
        let appended = match self.send_held(shared, &mut unsent).await {
            Ok(()) => self.append_shared(shared, &lines).await,
            Err(e) => Err(e),
        };
        let local_sync = match appended {
            Ok(()) => {
                if !copy {
                    return Ok(());
                }
                false
            }
            Err(e) if fenced_off(&e) => {
                self.drop_unsent(shared, &mut unsent, "the log went on without them");
                return Err(io::Error::other(e));
            }
            Err(e) => {
                // The log store is unreachable (or its answer was lost): the run goes on with
                // its lines held, and in this node's copy, synced, as on the embedded bus; they
                // go to the log, fenced and in order, before any later line.
                unsent.hold(
                    &lines,
                    shared.last.load(Ordering::SeqCst),
                    lease.unwrap_or(NO_LEASE),
                )?;
                tracing::warn!(log = %shared.name, held = unsent.len(), error = %e, "Shared transcript unreachable; lines held for it and kept in this node's copy.");
                if !copy {
                    return Ok(());
                }
                true
            }
        };
        // This node's copy: what local readers show; the log is the transcript.
        let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            buf.extend_from_slice(&line);
            buf.push(b'\n');
        }
        match self.write_bytes(&buf, local_sync) {
            Err(e) if local_sync => return Err(e),
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "This node's copy of a shared transcript not written.");
            }
            Ok(()) => {}
        }
        Ok(())
    }

    /// Appends `lines` to the shared log fenced on the last sequence known here (read first
    /// when unknown), and keeps where the log stands now.
    ///
    /// Refused as fenced while the run holds a lease, it is tried once more on the log's last
    /// sequence read afresh: the lines that got in between are an earlier holder's last ones,
    /// written after this run read the log and before its first stamped line (once one is in,
    /// an earlier holder's append is refused by its older lease). The retry is stamped too, so
    /// a newer holder's lines still refuse it. After such a retry the log holds lines this run
    /// did not read: the next run reads it again.
    async fn append_shared(&self, shared: &SharedLog, lines: &[Vec<u8>]) -> Result<(), LogError> {
        let mut last = shared.last.load(Ordering::SeqCst);
        if last == UNREAD {
            // Not read since a write was lost or the log was never read (a cancel record after
            // a run that did not start): fence on what the log holds now.
            last = shared.log.last(&shared.name).await?;
        }
        let tried = shared
            .log
            .append(&shared.name, lines.to_vec(), self.fence(shared, last))
            .await;
        match tried {
            Ok(now) => {
                shared.last.store(now, Ordering::SeqCst);
                Ok(())
            }
            Err(LogError::Fenced { .. }) if shared.lease.load(Ordering::SeqCst) != NO_LEASE => {
                let fresh = shared.log.last(&shared.name).await?;
                tracing::warn!(log = %shared.name, expected = last, actual = fresh, "Lines of an earlier holder reached the shared transcript after this run read it; appending after them.");
                shared
                    .log
                    .append(&shared.name, lines.to_vec(), self.fence(shared, fresh))
                    .await?;
                shared.last.store(UNREAD, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
