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
use sled::IVec;
use std::collections::{BTreeSet, HashSet, VecDeque};
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
/// Bytes of recently written values kept in memory by default.
pub(super) const DEFAULT_CACHE_BYTES: usize = 2 * 1024 * 1024;

/// Where a key's value is: its offset in the journal's bytes (the file, then the bytes not yet
/// written to it), its length, and the value itself while it is among the recent ones.
struct Slot {
    at: u64,
    len: u32,
    value: Option<IVec>,
}

impl Slot {
    /// The bytes of this entry's frame.
    fn frame_len(&self, key: &[u8]) -> u64 {
        (FRAME_HEAD + BODY_HEAD + key.len()) as u64 + u64::from(self.len)
    }
}

/// One tree's keys: where each value is, and the keys in order (for scans by prefix).
#[derive(Default)]
struct Keys {
    slots: FastMap<IVec, Slot>,
    /// Every key of `slots`, ordered by its first 8 bytes (zero-padded, big-endian: a number
    /// compared at once, where most keys differ), then by all of them: byte order.
    order: BTreeSet<(u64, IVec)>,
}

/// The first 8 bytes of `key` as a big-endian number (zero-padded): comparing these, then the
/// whole keys, orders keys as their bytes do.
fn head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Keys {
    fn get(&self, key: &[u8]) -> Option<&Slot> {
        self.slots.get(key)
    }

    fn insert(&mut self, key: IVec, slot: Slot) -> Option<Slot> {
        match self.slots.get_mut(&key) {
            Some(old) => Some(std::mem::replace(old, slot)),
            None => {
                self.order.insert((head(&key), key.clone()));
                self.slots.insert(key, slot)
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Option<Slot> {
        let slot = self.slots.remove(key)?;
        self.order.remove(&(head(key), IVec::from(key)));
        Some(slot)
    }

    /// The keys starting with `prefix`, in byte order.
    fn with_prefix<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = &'a IVec> + 'a {
        self.order
            .range((head(prefix), IVec::default())..)
            .map(|(_, k)| k)
            .take_while(move |k| k.starts_with(prefix))
    }
}

struct State {
    trees: [Keys; TREES],
    file: Arc<File>,
    /// Frames appended since the last write to the file.
    pending: Vec<u8>,
    /// The offset `pending` starts at: where the frames written so far end.
    pending_at: u64,
    /// The file's length: frames, then zeros written ahead ([`GROW_BY`]).
    allocated: u64,
    /// Frame bytes of the live entries.
    live: u64,
    /// Values kept in memory, oldest first: tree, key, where the value was written, its length.
    recent: VecDeque<(u8, IVec, u64, usize)>,
    recent_bytes: usize,
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
    loop {
        let at = out.end;
        if len - at < FRAME_HEAD as u64 {
            break;
        }
        let mut head = [0u8; FRAME_HEAD];
        r.read_exact(&mut head)
            .map_err(|e| io_err(path, "read frame", e))?;
        let body_len = u32::from_le_bytes(head[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().unwrap_or_default());
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
        let key = IVec::from(&body[BODY_HEAD..BODY_HEAD + key_len]);
        let frame_len = (FRAME_HEAD + body_len) as u64;
        let removed = match op {
            OP_PUT => {
                let slot = Slot {
                    at: at + (FRAME_HEAD + BODY_HEAD + key_len) as u64,
                    len: (body_len - BODY_HEAD - key_len) as u32,
                    value: None,
                };
                out.live += frame_len;
                out.trees[tree].insert(key.clone(), slot)
            }
            _ => out.trees[tree].remove(&key),
        };
        if let Some(old) = removed {
            out.live -= old.frame_len(&key);
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
            file: Arc::new(file),
            pending: Vec::new(),
            pending_at: found.end,
            allocated,
            live: found.live,
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
        lock(&self.state).trees[tree as usize].slots.len()
    }

    /// The value of `key` in `tree`.
    pub(super) fn get(&self, tree: u8, key: &[u8]) -> std::io::Result<Option<IVec>> {
        let state = lock(&self.state);
        match state.trees[tree as usize].get(key) {
            Some(slot) => self.value(&state, slot).map(Some),
            None => Ok(None),
        }
    }

    /// The value `slot` points at: kept, not yet written, or read from the file.
    fn value(&self, state: &State, slot: &Slot) -> std::io::Result<IVec> {
        if let Some(v) = &slot.value {
            return Ok(v.clone());
        }
        let len = slot.len as usize;
        if slot.at >= state.pending_at {
            let from = (slot.at - state.pending_at) as usize;
            return Ok(IVec::from(&state.pending[from..from + len]));
        }
        let mut buf = vec![0u8; len];
        state
            .file
            .read_exact_at(&mut buf, slot.at)
            .map_err(|e| io_err(&self.path, "read", e))?;
        Ok(IVec::from(buf))
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
        let mut state = lock(&self.state);
        let current = match state.trees[tree as usize].get(key) {
            Some(slot) => Some(self.value(&state, slot)?),
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
        self.write(&mut state, tree, key, new);
        Ok(Ok(()))
    }

    /// Sets `key` in `tree` to `new` (removes it for `None`) whatever it was.
    pub(super) fn set(&self, tree: u8, key: &[u8], new: Option<IVec>) {
        let mut state = lock(&self.state);
        self.write(&mut state, tree, key, new);
    }

    fn write(&self, state: &mut State, tree: u8, key: &[u8], new: Option<IVec>) {
        let old = match new {
            Some(value) => {
                let value_at = push_frame(&mut state.pending, OP_PUT, tree, key, &value);
                let at = state.pending_at + value_at as u64;
                let slot = Slot {
                    at,
                    len: value.len() as u32,
                    value: Some(value.clone()),
                };
                state.live += slot.frame_len(key);
                state.recent_bytes += value.len();
                let key = IVec::from(key);
                state.recent.push_back((tree, key.clone(), at, value.len()));
                let old = state.trees[tree as usize].insert(key, slot);
                self.evict(state);
                old
            }
            None => {
                if state.trees[tree as usize].get(key).is_none() {
                    return;
                }
                push_frame(&mut state.pending, OP_REMOVE, tree, key, &[]);
                state.trees[tree as usize].remove(key)
            }
        };
        if let Some(old) = old {
            state.live -= old.frame_len(key);
        }
    }

    /// Drops the oldest kept values until they fit the budget.
    fn evict(&self, state: &mut State) {
        while state.recent_bytes > self.cache_bytes {
            let Some((tree, key, at, len)) = state.recent.pop_front() else {
                break;
            };
            state.recent_bytes -= len;
            if let Some(slot) = state.trees[tree as usize].slots.get_mut(&key)
                && slot.at == at
            {
                slot.value = None;
            }
        }
    }

    /// The keys and values of `tree` whose key starts with `prefix`, in key order.
    pub(super) fn scan_prefix(
        &self,
        tree: u8,
        prefix: &[u8],
    ) -> std::io::Result<Vec<(IVec, IVec)>> {
        let state = lock(&self.state);
        let mut out = Vec::new();
        let keys = &state.trees[tree as usize];
        for k in keys.with_prefix(prefix) {
            if let Some(slot) = keys.get(k) {
                out.push((k.clone(), self.value(&state, slot)?));
            }
        }
        Ok(out)
    }

    /// The keys of `tree`, in key order.
    pub(super) fn keys(&self, tree: u8) -> Vec<IVec> {
        lock(&self.state).trees[tree as usize]
            .order
            .iter()
            .map(|(_, k)| k.clone())
            .collect()
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
        if let Err(e) = self.sync(&file) {
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
                for (key, slot) in &keys.slots {
                    if slot.at < cut {
                        live.push((tree as u8, key.clone(), slot.at, slot.len));
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
        let (mut frame, mut value) = (Vec::new(), Vec::new());
        for (tree, key, at, len) in live {
            value.resize(len as usize, 0);
            file.read_exact_at(&mut value, at)
                .map_err(|e| io_err(&self.path, "read", e))?;
            frame.clear();
            let value_at = push_frame(&mut frame, OP_PUT, tree, &key, &value);
            out.write_all(&frame)
                .map_err(|e| io_err(&temp, "write", e))?;
            moved.push((tree, key, at, written + value_at as u64));
            written += frame.len() as u64;
        }
        out.flush().map_err(|e| io_err(&temp, "write", e))?;
        drop(out);
        new.sync_all().map_err(|e| io_err(&temp, "sync", e))?;
        // 3. The switch: a value written since step 1 is pending (no flush ran meanwhile), at
        // the same place after the new file's end as after the old one's.
        let mut state = lock(&self.state);
        std::fs::rename(&temp, &self.path).map_err(|e| io_err(&temp, "rename", e))?;
        sync_dir(&self.path).map_err(|e| io_err(&self.path, "sync folder", e))?;
        for (tree, key, old_at, new_at) in moved {
            if let Some(slot) = state.trees[tree as usize].slots.get_mut(&key)
                && slot.at == old_at
            {
                slot.at = new_at;
                slot.value = None;
            }
        }
        let mut live = written - MAGIC.len() as u64;
        let mut recent = VecDeque::new();
        let mut recent_bytes = 0;
        for (tree, keys) in state.trees.iter_mut().enumerate() {
            for (key, slot) in keys.slots.iter_mut() {
                if slot.at >= cut {
                    slot.at = slot.at - cut + written;
                    live += slot.frame_len(key);
                    if slot.value.is_some() {
                        recent.push_back((tree as u8, key.clone(), slot.at, slot.len as usize));
                        recent_bytes += slot.len as usize;
                    }
                }
            }
        }
        state.file = Arc::new(new);
        state.pending_at = written;
        state.allocated = written;
        state.live = live;
        state.recent = recent;
        state.recent_bytes = recent_bytes;
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

#[cfg(test)]
mod tests;
