//! The refusal journal: task ids of admissions that were answered as failed although their
//! record may have reached the disk.
//!
//! When the flush after an admission fails (a full disk), the client is told the task was not
//! admitted, yet part of the log may be on disk already, record included: a later open would
//! find it queued and run it. So before answering, the task id goes into this small file,
//! allocated in full when the store opens (overwriting allocated blocks needs no free space),
//! and the next open removes those records before anything reads the unfinished tasks.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use uuid::Uuid;

/// One entry: a hyphenated task id padded to a fixed width, ending in a newline.
const SLOT: usize = 40;
/// How many refusals one outage can record (the admissions of the failing flushes; later ones
/// fail before their record is written, and need no entry).
const SLOTS: usize = 1024;

/// The journal file, allocated at open.
pub struct RefusalJournal {
    path: PathBuf,
    /// The file and the next free slot.
    file: Mutex<(File, usize)>,
}

impl RefusalJournal {
    /// Opens (allocating in full, zero-filled) the journal at `path`; returns it with the task
    /// ids it holds from an earlier run.
    pub fn open(path: &Path) -> std::io::Result<(Self, Vec<Uuid>)> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut bytes = std::fs::read(path)?;
        bytes.resize(SLOT * SLOTS, 0);
        let mut found = Vec::new();
        let mut next = 0;
        for (i, slot) in bytes.chunks(SLOT).enumerate() {
            if slot.iter().all(|b| *b == 0) {
                continue;
            }
            next = i + 1;
            match std::str::from_utf8(slot).ok().and_then(|s| {
                Uuid::parse_str(s.trim_matches(|c: char| c.is_whitespace() || c == '\0')).ok()
            }) {
                Some(id) => found.push(id),
                None => {
                    tracing::warn!(path = %path.display(), slot = i, "Unreadable refusal entry skipped.")
                }
            }
        }
        if file.metadata()?.len() < (SLOT * SLOTS) as u64 {
            // Real zeros, not a hole: the blocks are allocated now, while there is room.
            file.write_all_at(&bytes, 0)?;
            file.flush()?;
            file.sync_all()?;
        }
        Ok((
            Self {
                path: path.to_path_buf(),
                file: Mutex::new((file, next)),
            },
            found,
        ))
    }

    /// Records `task_id` durably (written in place and synced).
    pub fn record(&self, task_id: Uuid) -> std::io::Result<()> {
        let mut guard = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("refusal journal lock poisoned"))?;
        let (file, next) = &mut *guard;
        if *next >= SLOTS {
            return Err(std::io::Error::other(format!(
                "refusal journal {} is full ({SLOTS} entries)",
                self.path.display()
            )));
        }
        let mut slot = format!("{task_id:<width$}", width = SLOT - 1).into_bytes();
        slot.push(b'\n');
        file.write_all_at(&slot, (*next * SLOT) as u64)?;
        file.sync_data()?;
        *next += 1;
        Ok(())
    }

    /// Empties the journal (once its entries are applied and flushed).
    pub fn clear(&self) -> std::io::Result<()> {
        let mut guard = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("refusal journal lock poisoned"))?;
        let (file, next) = &mut *guard;
        file.write_all_at(&vec![0; SLOT * SLOTS], 0)?;
        file.sync_data()?;
        *next = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_reopen_until_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refused");
        let (j, found) = RefusalJournal::open(&path).unwrap();
        assert!(found.is_empty());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (SLOT * SLOTS) as u64
        );
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        j.record(a).unwrap();
        j.record(b).unwrap();
        drop(j);
        let (j, found) = RefusalJournal::open(&path).unwrap();
        assert_eq!(found, vec![a, b]);
        let c = Uuid::now_v7();
        j.record(c).unwrap();
        drop(j);
        let (j, found) = RefusalJournal::open(&path).unwrap();
        assert_eq!(found, vec![a, b, c], "appended after the earlier entries");
        j.clear().unwrap();
        drop(j);
        assert!(RefusalJournal::open(&path).unwrap().1.is_empty());
    }
}
