//! The task journal: the embedded task store's records in one append-only file, indexed in
//! memory.
//!
//! In sled's tree a record write cloned the leaf it lands in, logged a delta and split a leaf
//! every few inserts: about half of a bus task's instructions. Here a write is a frame appended
//! to a buffer and an entry in an in-memory index (key → where its value is); the commit thread
//! writes the buffer and `fdatasync`s the file ([`Journal::flush`]). When dead frames outweigh
//! live ones the file is rewritten with the live ones only, under a temporary name renamed over
//! it, so a crash leaves the old file or the new one, each whole.
//!
//! The file: [`MAGIC`] (16 bytes), then frames: the body's length (u32 LE), the body's CRC-32
//! (u32 LE), the body: op (1 put, 2 remove), tree (u8), key length (u16 LE), key, value (a put's).
//! A frame cut short or failing its CRC ends what is read: a crash mid-write leaves one at the
//! tail. Whatever follows it is copied to a side file (`<journal>.cut-<offset>`) before the
//! journal is truncated there, and the cut is logged with its offset, so nothing goes unseen.
//!
//! The index holds keys and positions; values are read from the file when asked, except the
//! most recently written ones (up to a byte budget), which stay in memory: a task's next write
//! compares against them without a read.

use crate::fast_map::FastMap;
use index::{Keys, Loc, head};
use sled::IVec;
use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The first bytes of a journal file.
pub(super) const MAGIC: &[u8; 16] = b"clawbus-tasks-1\n";
/// How many trees (key spaces) a journal holds.
const TREES: usize = 2;
/// The tree of task records.
pub(super) const RECORDS: u8 = 0;
/// The tree of task ids that do not carry their request id's bits (task id → request id).
pub(super) const TASK_IDS: u8 = 1;
/// A frame's length and CRC.
const FRAME_HEAD: usize = 8;
/// A body's op, tree and key length.
const BODY_HEAD: usize = 4;
const OP_PUT: u8 = 1;
const OP_REMOVE: u8 = 2;
/// The longest body a frame may declare (a task record is bounded far below this).
const MAX_BODY: usize = 256 * 1024 * 1024;
/// The file is rewritten when it is larger than this and than twice its live frames.
const COMPACT_MIN_BYTES: u64 = 8 * 1024 * 1024;
/// The file is grown by this much at a time, zero-filled, so most flushes write into blocks
/// the file has already (a data sync, no metadata: a growing file's `fdatasync` commits the
/// file system's journal on every flush).
const GROW_BY: u64 = 4 * 1024 * 1024;
/// How many keys read lately the recovery keeps, to find the frame a later one replaces without
/// reading it again (a task's frames lie close together).
const SEEN_KEYS: usize = 1 << 16;
/// Bytes of recently written values kept in memory by default.
pub(super) const DEFAULT_CACHE_BYTES: usize = 2 * 1024 * 1024;

/// A value kept in memory: where it was written, and the value.
struct Kept {
    loc: Loc,
    value: IVec,
}

struct State {
    trees: [Keys; TREES],
    /// The values written most recently, by key, while they are the key's latest.
    kept: [FastMap<IVec, Kept>; TREES],
    /// The kept values, oldest first: tree, key, where the value was written, its length.
    recent: VecDeque<(u8, IVec, u64, usize)>,
    recent_bytes: usize,
    file: Arc<File>,
    /// Frames appended since the last write to the file.
    pending: Vec<u8>,
    /// The offset `pending` starts at: where the frames written so far end.
    pending_at: u64,
    /// The file's length: frames, then zeros written ahead ([`GROW_BY`]).
    allocated: u64,
    /// Frame bytes of the live entries.
    live: u64,
    /// A compaction renamed the new file over the journal but the folder's sync failed: the
    /// next flush syncs it before it answers.
    dir_unsynced: bool,
}

impl State {
    /// The journal's bytes from `at`, `len` of them: pending, or read from the file.
    fn read(&self, path: &Path, at: u64, len: usize) -> std::io::Result<IVec> {
        if at >= self.pending_at {
            let from = (at - self.pending_at) as usize;
            return Ok(IVec::from(&self.pending[from..from + len]));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, at)
            .map_err(|e| io_err(path, "read", e))?;
        Ok(IVec::from(buf))
    }

    /// The key a location's frame holds.
    fn key_of(&self, path: &Path, loc: &Loc) -> std::io::Result<IVec> {
        self.read(path, loc.key_at(), usize::from(loc.key_len))
    }

    /// Where `key`'s latest value is in `tree`, and the value when it is kept.
    fn find(
        &self,
        path: &Path,
        tree: u8,
        key: &[u8],
    ) -> std::io::Result<Option<(Loc, Option<IVec>)>> {
        if let Some(k) = self.kept[tree as usize].get(key) {
            return Ok(Some((k.loc, Some(k.value.clone()))));
        }
        for loc in self.trees[tree as usize].at_head(head(key)) {
            if usize::from(loc.key_len) == key.len() && *self.key_of(path, loc)? == *key {
                return Ok(Some((*loc, None)));
            }
        }
        Ok(None)
    }

    /// The value at `loc` (`kept` when the caller has it).
    fn value(&self, path: &Path, loc: &Loc, kept: Option<IVec>) -> std::io::Result<IVec> {
        match kept {
            Some(v) => Ok(v),
            None => self.read(path, loc.at, loc.len as usize),
        }
    }
}

/// Journals open in this process: a second handle on one file would interleave its frames.
static OPEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// An open task journal (see the module's doc).
pub(super) struct Journal {
    path: PathBuf,
    state: Mutex<State>,
    /// Held by a flush (and the compaction after it): one at a time.
    flushing: Mutex<()>,
    cache_bytes: usize,
    /// Makes the next sync fail (tests).
    #[cfg(test)]
    fail_sync: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An I/O error naming the journal and what failed.
fn io_err(path: &Path, what: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("task journal {}: {what}: {e}", path.display()),
    )
}

fn corrupt(path: &Path, what: String) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("task journal {}: {what}", path.display()),
    )
}

/// Whether a frame of `key` and `value` is one the journal reads back: a key of at most 65,535
/// bytes, a body of at most [`MAX_BODY`].
fn fits(key: &[u8], value: Option<&[u8]>) -> std::io::Result<()> {
    let body = BODY_HEAD + key.len() + value.map_or(0, <[u8]>::len);
    if key.len() > usize::from(u16::MAX) || body > MAX_BODY {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a task journal entry of {} bytes of key and {body} in all is over the limits ({} and {MAX_BODY})",
                key.len(),
                u16::MAX
            ),
        ));
    }
    Ok(())
}

/// Appends one frame to `out`; answers the offset of its value inside `out`.
fn push_frame(out: &mut Vec<u8>, op: u8, tree: u8, key: &[u8], value: &[u8]) -> usize {
    let body_len = BODY_HEAD + key.len() + value.len();
    let start = out.len();
    out.reserve(FRAME_HEAD + body_len);
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(op);
    out.push(tree);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    let value_at = out.len();
    out.extend_from_slice(value);
    let crc = crc32fast::hash(&out[start + FRAME_HEAD..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    value_at
}

/// What reading a journal file found.
struct Recovered {
    trees: [Keys; TREES],
    live: u64,
    /// Where the last whole frame ends.
    end: u64,
}

/// Reads the frames of `file` (whose header is checked), up to the first that is cut short or
/// fails its check.
fn recover(path: &Path, file: &File, len: u64) -> std::io::Result<Recovered> {
    let mut r = BufReader::with_capacity(256 * 1024, file);
    let mut magic = [0u8; MAGIC.len()];
    r.read_exact(&mut magic)
        .map_err(|e| io_err(path, "read header", e))?;
    if &magic != MAGIC {
        return Err(corrupt(
            path,
            "not a task journal (its first 16 bytes are not the journal's header)".into(),
        ));
    }
    let mut out = Recovered {
        trees: Default::default(),
        live: 0,
        end: MAGIC.len() as u64,
    };
    let mut body = Vec::new();
    // The keys of the frames read lately, by head (see below).
    let mut seen: [FastMap<u64, (u64, IVec)>; TREES] = Default::default();
    loop {
        let at = out.end;
        if len - at < FRAME_HEAD as u64 {
            break;
        }
        let mut frame_head = [0u8; FRAME_HEAD];
        r.read_exact(&mut frame_head)
            .map_err(|e| io_err(path, "read frame", e))?;
        let body_len = u32::from_le_bytes(frame_head[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(frame_head[4..].try_into().unwrap_or_default());
        if !(BODY_HEAD..=MAX_BODY).contains(&body_len)
            || (len - at - FRAME_HEAD as u64) < body_len as u64
        {
            break;
        }
        body.resize(body_len, 0);
        r.read_exact(&mut body)
            .map_err(|e| io_err(path, "read frame", e))?;
        if crc32fast::hash(&body) != crc {
            break;
        }
        let (op, tree) = (body[0], body[1] as usize);
        let key_len = u16::from_le_bytes([body[2], body[3]]) as usize;
        if tree >= TREES || BODY_HEAD + key_len > body_len || !matches!(op, OP_PUT | OP_REMOVE) {
            return Err(corrupt(
                path,
                format!(
                    "frame at offset {at}: op {op}, tree {tree}, key length {key_len} make no sense although its checksum holds"
                ),
            ));
        }
        let key = &body[BODY_HEAD..BODY_HEAD + key_len];
        let h = head(key);
        // The location this frame replaces: found under the key's head, the candidate's key
        // read from the file unless its frame was read lately.
        let mut old = None;
        for loc in out.trees[tree].at_head(h) {
            if usize::from(loc.key_len) != key_len {
                continue;
            }
            let same = match seen[tree].get(&h) {
                Some((seen_at, k)) if *seen_at == loc.at => **k == *key,
                _ => {
                    let mut buf = vec![0u8; key_len];
                    file.read_exact_at(&mut buf, loc.key_at())
                        .map_err(|e| io_err(path, "read key", e))?;
                    buf == key
                }
            };
            if same {
                old = Some(*loc);
                break;
            }
        }
        let frame_len = (FRAME_HEAD + body_len) as u64;
        if op == OP_PUT {
            let loc = Loc {
                at: at + (FRAME_HEAD + BODY_HEAD + key_len) as u64,
                len: (body_len - BODY_HEAD - key_len) as u32,
                key_len: key_len as u16,
            };
            out.trees[tree].replace(h, old, Some(loc));
            out.live += frame_len;
            if seen[tree].len() >= SEEN_KEYS {
                seen[tree].clear();
            }
            seen[tree].insert(h, (loc.at, IVec::from(key)));
        } else if old.is_some() {
            out.trees[tree].replace(h, old, None);
        }
        if let Some(old) = old {
            out.live -= old.frame_len();
        }
        out.end = at + frame_len;
    }
    Ok(out)
}

/// Syncs the folder holding `path`, so a rename or creation in it is durable.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

impl Journal {
    /// Opens (or creates) the journal at `path`, reading its index back, keeping up to
    /// `cache_bytes` of recently written values in memory. A tail cut short by a crash is moved
    /// to a side file and cut off; a file that is not a journal is an error naming it.
    pub(super) fn open(path: &Path, cache_bytes: usize) -> std::io::Result<Self> {
        {
            let mut open = lock(&OPEN);
            if !open.get_or_insert_default().insert(path.to_path_buf()) {
                return Err(io_err(
                    path,
                    "open",
                    std::io::Error::other("already open in this process"),
                ));
            }
        }
        let opened = Self::open_file(path, cache_bytes);
        if opened.is_err() {
            lock(&OPEN).get_or_insert_default().remove(path);
        }
        opened
    }

    fn open_file(path: &Path, cache_bytes: usize) -> std::io::Result<Self> {
        // A compaction that did not finish left its temporary file: the journal is the old one.
        let temp = Self::temp_path(path);
        if temp.exists() {
            std::fs::remove_file(&temp).map_err(|e| io_err(&temp, "remove", e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_err(path, "open", e))?;
        let mut len = file.metadata().map_err(|e| io_err(path, "stat", e))?.len();
        if len == 0 {
            file.write_all_at(MAGIC, 0)
                .map_err(|e| io_err(path, "write header", e))?;
            file.sync_all().map_err(|e| io_err(path, "sync", e))?;
            sync_dir(path).map_err(|e| io_err(path, "sync folder", e))?;
            len = MAGIC.len() as u64;
        }
        let found = recover(path, &file, len)?;
        let mut allocated = len;
        if found.end < len && !Self::zeros_after(path, &file, found.end, len)? {
            Self::cut_tail(path, &file, found.end, len)?;
            allocated = found.end;
        }
        let state = State {
            trees: found.trees,
            kept: Default::default(),
            file: Arc::new(file),
            pending: Vec::new(),
            pending_at: found.end,
            allocated,
            live: found.live,
            dir_unsynced: false,
            recent: VecDeque::new(),
            recent_bytes: 0,
        };
        Ok(Self {
            path: path.to_path_buf(),
            state: Mutex::new(state),
            flushing: Mutex::new(()),
            cache_bytes,
            #[cfg(test)]
            fail_sync: Default::default(),
        })
    }

    /// Whether the bytes from `end` to `len` are all zero: the room a flush grew the file by.
    fn zeros_after(path: &Path, file: &File, end: u64, len: u64) -> std::io::Result<bool> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut at = end;
        while at < len {
            let n = ((len - at) as usize).min(buf.len());
            file.read_exact_at(&mut buf[..n], at)
                .map_err(|e| io_err(path, "read tail", e))?;
            if buf[..n].iter().any(|b| *b != 0) {
                return Ok(false);
            }
            at += n as u64;
        }
        Ok(true)
    }

    /// Copies the bytes from `end` to `len` (a frame cut short, or garbage) to a side file and
    /// cuts the journal at `end`.
    fn cut_tail(path: &Path, file: &File, end: u64, len: u64) -> std::io::Result<()> {
        let mut tail = vec![0u8; (len - end) as usize];
        file.read_exact_at(&mut tail, end)
            .map_err(|e| io_err(path, "read cut tail", e))?;
        // The zeros a flush wrote ahead are not part of what was cut.
        let zeros = tail.iter().rev().take_while(|b| **b == 0).count();
        tail.truncate(tail.len() - zeros);
        let mut side = path.as_os_str().to_owned();
        side.push(format!(".cut-{end}"));
        let side = PathBuf::from(side);
        std::fs::write(&side, &tail).map_err(|e| io_err(&side, "write", e))?;
        File::open(&side)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err(&side, "sync", e))?;
        file.set_len(end)
            .map_err(|e| io_err(path, "cut torn tail", e))?;
        file.sync_all().map_err(|e| io_err(path, "sync", e))?;
        tracing::warn!(
            journal = %path.display(),
            offset = end,
            bytes = tail.len(),
            kept_in = %side.display(),
            "Task journal ended in a frame cut short or failing its check (a crash mid-write); cut there."
        );
        Ok(())
    }

    fn temp_path(path: &Path) -> PathBuf {
        let mut temp = path.as_os_str().to_owned();
        temp.push(".compacting");
        PathBuf::from(temp)
    }

    /// How many keys `tree` holds.
    #[cfg(test)]
    pub(super) fn len(&self, tree: u8) -> usize {
        lock(&self.state).trees[tree as usize].len()
    }

    /// The value of `key` in `tree`.
    pub(super) fn get(&self, tree: u8, key: &[u8]) -> std::io::Result<Option<IVec>> {
        let state = lock(&self.state);
        match state.find(&self.path, tree, key)? {
            Some((loc, kept)) => state.value(&self.path, &loc, kept).map(Some),
            None => Ok(None),
        }
    }

    /// Sets `key` in `tree` to `new` (removes it for `None`) when its value is `old` (absent for
    /// `None`); else answers the value it has. Written in memory: durable with the next
    /// [`Journal::flush`].
    pub(super) fn compare_and_swap(
        &self,
        tree: u8,
        key: &[u8],
        old: Option<&[u8]>,
        new: Option<IVec>,
    ) -> std::io::Result<Result<(), Option<IVec>>> {
        fits(key, new.as_deref())?;
        let mut state = lock(&self.state);
        let found = state.find(&self.path, tree, key)?;
        let current = match &found {
            Some((loc, kept)) => Some(state.value(&self.path, loc, kept.clone())?),
            None => None,
        };
        let same = match (current.as_deref(), old) {
            // The bytes the caller kept are most often the very ones kept here: no compare.
            (Some(c), Some(o)) => std::ptr::eq(c, o) || c == o,
            (c, o) => c == o,
        };
        if !same {
            return Ok(Err(current));
        }
        self.write(&mut state, tree, key, found.map(|f| f.0), new);
        Ok(Ok(()))
    }

    /// Sets `key` in `tree` to `new` (removes it for `None`) whatever it was.
    pub(super) fn set(&self, tree: u8, key: &[u8], new: Option<IVec>) -> std::io::Result<()> {
        fits(key, new.as_deref())?;
        let mut state = lock(&self.state);
        let old = state.find(&self.path, tree, key)?.map(|f| f.0);
        self.write(&mut state, tree, key, old, new);
        Ok(())
    }

    /// Appends the frame setting `key` (at `old` until now) to `new`, and indexes it.
    fn write(&self, state: &mut State, tree: u8, key: &[u8], old: Option<Loc>, new: Option<IVec>) {
        let h = head(key);
        let t = tree as usize;
        match new {
            Some(value) => {
                let value_at = push_frame(&mut state.pending, OP_PUT, tree, key, &value);
                let loc = Loc {
                    at: state.pending_at + value_at as u64,
                    len: value.len() as u32,
                    key_len: key.len() as u16,
                };
                state.trees[t].replace(h, old, Some(loc));
                state.live += loc.frame_len();
                state.recent_bytes += value.len();
                let key = IVec::from(key);
                state
                    .recent
                    .push_back((tree, key.clone(), loc.at, value.len()));
                state.kept[t].insert(key, Kept { loc, value });
                self.evict(state);
            }
            None => {
                if old.is_none() {
                    return;
                }
                push_frame(&mut state.pending, OP_REMOVE, tree, key, &[]);
                state.trees[t].replace(h, old, None);
                state.kept[t].remove(key);
            }
        }
        if let Some(old) = old {
            state.live -= old.frame_len();
        }
    }

    /// Drops the oldest kept values until they fit the budget.
    fn evict(&self, state: &mut State) {
        while state.recent_bytes > self.cache_bytes {
            let Some((tree, key, at, len)) = state.recent.pop_front() else {
                break;
            };
            state.recent_bytes -= len;
            let kept = &mut state.kept[tree as usize];
            if kept.get(&key).is_some_and(|k| k.loc.at == at) {
                kept.remove(&key);
            }
        }
    }

    /// The keys and values of `tree` whose key starts with `prefix`, in byte order.
    pub(super) fn scan_prefix(
        &self,
        tree: u8,
        prefix: &[u8],
    ) -> std::io::Result<Vec<(IVec, IVec)>> {
        let state = lock(&self.state);
        let keys = &state.trees[tree as usize];
        // A prefix of 8 bytes or more names one head; a shorter one, any.
        let locs: Vec<Loc> = if prefix.len() >= 8 {
            keys.at_head(head(prefix)).to_vec()
        } else {
            keys.all().map(|(_, l)| *l).collect()
        };
        let mut out = Vec::new();
        for loc in locs {
            let key = state.key_of(&self.path, &loc)?;
            if key.starts_with(prefix) {
                let value = state.read(&self.path, loc.at, loc.len as usize)?;
                out.push((key, value));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Calls `each` with every key and value of `tree`, in no particular order, stopping at
    /// its first error. Each head's keys are read under the lock; `each` runs without it (it
    /// may write). A key written meanwhile may be seen as it was or as it is.
    pub(super) fn for_each<E>(
        &self,
        tree: u8,
        io: impl Fn(std::io::Error) -> E,
        mut each: impl FnMut(IVec, IVec) -> Result<(), E>,
    ) -> Result<(), E> {
        let heads = lock(&self.state).trees[tree as usize].heads();
        let mut found = Vec::new();
        for h in heads {
            {
                let state = lock(&self.state);
                for loc in state.trees[tree as usize].at_head(h) {
                    let key = state.key_of(&self.path, loc).map_err(&io)?;
                    let value = state
                        .read(&self.path, loc.at, loc.len as usize)
                        .map_err(&io)?;
                    found.push((key, value));
                }
            }
            for (k, v) in found.drain(..) {
                each(k, v)?;
            }
        }
        Ok(())
    }

    /// Writes what was appended since the last flush to the file and syncs it: every write made
    /// before the call is durable when this returns `Ok`. On a failure the file is cut back to
    /// where it was and the frames stay pending, for the next flush to write again.
    pub(super) fn flush(&self) -> std::io::Result<()> {
        let _one = lock(&self.flushing);
        let (file, at, written) = {
            let mut state = lock(&self.state);
            if state.pending.is_empty() {
                return Ok(());
            }
            // The next batch likely needs as much room as this one.
            let room = state.pending.len();
            let pending = std::mem::replace(&mut state.pending, Vec::with_capacity(room));
            let at = state.pending_at;
            let end = at + pending.len() as u64;
            let mut written = state.file.write_all_at(&pending, at);
            if written.is_ok() && end > state.allocated {
                let grown = end.div_ceil(GROW_BY) * GROW_BY;
                let zeros = vec![0u8; (grown - end) as usize];
                written = state.file.write_all_at(&zeros, end);
                if written.is_ok() {
                    state.allocated = grown;
                }
            }
            if let Err(e) = written {
                // Zeros where the frames were: what a later flush finds ahead of it.
                let _ = Self::unwrite(&state, at);
                state.pending = pending;
                return Err(io_err(&self.path, "write", e));
            }
            state.pending_at = end;
            (state.file.clone(), at, pending)
        };
        if let Err(e) = self.sync(&file).and_then(|()| self.sync_dir_if_due()) {
            // What the kernel held for the file may be gone: written again by the next flush.
            let mut state = lock(&self.state);
            let _ = Self::unwrite(&state, at);
            let mut again = written;
            again.extend_from_slice(&state.pending);
            state.pending = again;
            state.pending_at = at;
            return Err(io_err(&self.path, "sync", e));
        }
        self.compact_if_due();
        Ok(())
    }

    /// Syncs the journal's folder when a compaction's rename is not known durable yet.
    fn sync_dir_if_due(&self) -> std::io::Result<()> {
        if !lock(&self.state).dir_unsynced {
            return Ok(());
        }
        sync_dir(&self.path).map_err(|e| io_err(&self.path, "sync folder", e))?;
        lock(&self.state).dir_unsynced = false;
        Ok(())
    }

    fn sync(&self, file: &File) -> std::io::Result<()> {
        #[cfg(test)]
        if self
            .fail_sync
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(std::io::Error::other("injected sync failure"));
        }
        file.sync_data()
    }

    /// Zeros the file from `at` to where it is allocated: frames a failed flush may have left
    /// there would be read back at the next open, and the next flush writes them again anyway.
    fn unwrite(state: &State, at: u64) -> std::io::Result<()> {
        let zeros = vec![0u8; state.allocated.saturating_sub(at) as usize];
        state.file.write_all_at(&zeros, at)
    }

    /// Rewrites the file with its live frames only, when dead ones outweigh them. Runs after a
    /// flush, holding the flush lock (no flush meanwhile); writers go on but for two short
    /// moments: while it lists the live values, and while it switches files.
    fn compact_if_due(&self) {
        if let Err(e) = self.compact(false) {
            tracing::warn!(journal = %self.path.display(), error = %e, "Task journal not compacted; tried again after a later flush.");
            let _ = std::fs::remove_file(Self::temp_path(&self.path));
        }
    }

    /// Compacts now, whatever the dead frames (for tests).
    #[cfg(test)]
    fn compact_now(&self) -> std::io::Result<()> {
        let _one = lock(&self.flushing);
        self.compact(true)
    }

    fn compact(&self, always: bool) -> std::io::Result<()> {
        // 1. What is live, and where the file's frames end (the rest is pending, kept as it is).
        let (file, cut, live) = {
            let state = lock(&self.state);
            let size = state.pending_at + state.pending.len() as u64;
            if !always && (size < COMPACT_MIN_BYTES || size < 2 * state.live) {
                return Ok(());
            }
            let cut = state.pending_at;
            let mut live = Vec::new();
            for (tree, keys) in state.trees.iter().enumerate() {
                for (h, loc) in keys.all() {
                    if loc.at < cut {
                        live.push((tree as u8, h, *loc));
                    }
                }
            }
            (state.file.clone(), cut, live)
        };
        // 2. The new file, written and synced without the lock.
        let temp = Self::temp_path(&self.path);
        let new = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(|e| io_err(&temp, "create", e))?;
        let mut out = BufWriter::with_capacity(256 * 1024, &new);
        out.write_all(MAGIC)
            .map_err(|e| io_err(&temp, "write", e))?;
        let mut written = MAGIC.len() as u64;
        let mut moved = Vec::with_capacity(live.len());
        let (mut frame, mut bytes) = (Vec::new(), Vec::new());
        for (tree, h, loc) in live {
            // The key and the value, which follow each other.
            bytes.resize(usize::from(loc.key_len) + loc.len as usize, 0);
            file.read_exact_at(&mut bytes, loc.key_at())
                .map_err(|e| io_err(&self.path, "read", e))?;
            let (key, value) = bytes.split_at(usize::from(loc.key_len));
            frame.clear();
            let value_at = push_frame(&mut frame, OP_PUT, tree, key, value);
            out.write_all(&frame)
                .map_err(|e| io_err(&temp, "write", e))?;
            let to = Loc {
                at: written + value_at as u64,
                ..loc
            };
            moved.push((tree, h, loc.at, to));
            written += frame.len() as u64;
        }
        out.flush().map_err(|e| io_err(&temp, "write", e))?;
        drop(out);
        new.sync_all().map_err(|e| io_err(&temp, "sync", e))?;
        // 3. The switch: a value written since step 1 is pending (no flush ran meanwhile), at
        // the same place after the new file's end as after the old one's.
        let mut state = lock(&self.state);
        std::fs::rename(&temp, &self.path).map_err(|e| io_err(&temp, "rename", e))?;
        // From here the path names the new file: the switch goes ahead whatever the folder's
        // sync says (a failed one is done again before the next flush answers).
        for (tree, h, old_at, to) in moved {
            // Unless the key was written again since step 1 (then its location is pending).
            // Before the pending ones are shifted: shifted, one could take a moved one's offset.
            state.trees[tree as usize].moved(h, old_at, to);
        }
        let shift = |at: u64| at - cut + written;
        for keys in state.trees.iter_mut() {
            for loc in keys.all_mut() {
                if loc.at >= cut {
                    loc.at = shift(loc.at);
                }
            }
        }
        // Values kept from before the cut are in the file; the pending ones stay kept.
        let mut recent = VecDeque::new();
        let mut recent_bytes = 0;
        for (tree, kept) in state.kept.iter_mut().enumerate() {
            kept.retain(|key, k| {
                if k.loc.at < cut {
                    return false;
                }
                k.loc.at = shift(k.loc.at);
                recent.push_back((tree as u8, key.clone(), k.loc.at, k.loc.len as usize));
                recent_bytes += k.loc.len as usize;
                true
            });
        }
        let live = state
            .trees
            .iter()
            .flat_map(|keys| keys.all().map(|(_, l)| l.frame_len()))
            .sum();
        state.file = Arc::new(new);
        state.pending_at = written;
        state.allocated = written;
        state.live = live;
        state.recent = recent;
        state.recent_bytes = recent_bytes;
        if let Err(e) = sync_dir(&self.path) {
            // Until the rename is durable nothing written to the new file is: no flush
            // answers before the folder is synced (see `flush`).
            tracing::error!(journal = %self.path.display(), error = %e, "Task journal's folder not synced after compaction; flushes wait for it.");
            state.dir_unsynced = true;
        }
        drop(state);
        tracing::info!(journal = %self.path.display(), bytes = written, "Task journal compacted.");
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        lock(&OPEN).get_or_insert_default().remove(&self.path);
    }
}

mod index;
#[cfg(test)]
mod tests;
