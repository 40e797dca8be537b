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

/// One entry: a hyphenated task id (36 bytes), then ` r` for a refused retry, padded to a fixed
/// width, ending in a newline.
const SLOT: usize = 40;
/// What follows the task id of a refused retry's entry (the slot has room for two bytes more).
const RETRY_MARK: &str = "r";
/// How many refusals one outage can record (the admissions of the failing flushes; later ones
/// fail before their record is written, and need no entry).
const SLOTS: usize = 1024;

/// One refused admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The task whose admission was answered as failed.
    pub task_id: Uuid,
    /// It was a retry of a task that had ended (to end again), not a new task (to remove).
    pub retry: bool,
}

/// The journal file, allocated at open.
pub struct RefusalJournal {
    path: PathBuf,
    /// The file and the next free slot.
    file: Mutex<(File, usize)>,
}

impl RefusalJournal {
    /// Opens (allocating in full, zero-filled) the journal at `path`; returns it with the
    /// refusals it holds from an earlier run.
    pub fn open(path: &Path) -> std::io::Result<(Self, Vec<Refusal>)> {
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
            match std::str::from_utf8(slot).ok().and_then(parse_slot) {
                Some(refusal) => found.push(refusal),
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

    /// Records the refusal durably (written in place and synced).
    pub fn record(&self, refusal: Refusal) -> std::io::Result<()> {
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
        let entry = match refusal.retry {
            true => format!("{} {RETRY_MARK}", refusal.task_id),
            false => refusal.task_id.to_string(),
        };
        debug_assert!(entry.len() < SLOT, "a refusal entry overflows its slot");
        let mut slot = format!("{entry:<width$}", width = SLOT - 1).into_bytes();
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

/// One slot's refusal: a task id, and the retry mark or nothing (entries written before the mark
/// existed hold the task id alone).
fn parse_slot(slot: &str) -> Option<Refusal> {
    let mut words = slot
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .split_whitespace();
    let task_id = Uuid::parse_str(words.next()?).ok()?;
    let retry = match (words.next(), words.next()) {
        (None, _) => false,
        (Some(RETRY_MARK), None) => true,
        _ => return None,
    };
    Some(Refusal { task_id, retry })
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
        let new = |task_id| Refusal {
            task_id,
            retry: false,
        };
        let (a, b) = (
            new(Uuid::now_v7()),
            Refusal {
                task_id: Uuid::now_v7(),
                retry: true,
            },
        );
        j.record(a).unwrap();
        j.record(b).unwrap();
        drop(j);
        let (j, found) = RefusalJournal::open(&path).unwrap();
        assert_eq!(found, vec![a, b]);
        let c = new(Uuid::now_v7());
        j.record(c).unwrap();
        drop(j);
        let (j, found) = RefusalJournal::open(&path).unwrap();
        assert_eq!(found, vec![a, b, c], "appended after the earlier entries");
        j.clear().unwrap();
        drop(j);
        assert!(RefusalJournal::open(&path).unwrap().1.is_empty());
    }

    #[test]
    fn an_entry_written_before_the_retry_mark_reads_as_a_new_task() {
        let id = Uuid::now_v7();
        let old = format!("{id:<39}\n");
        assert_eq!(
            parse_slot(&old),
            Some(Refusal {
                task_id: id,
                retry: false
            })
        );
        assert_eq!(
            parse_slot(&format!("{id} r \n")).map(|r| r.retry),
            Some(true)
        );
        assert_eq!(parse_slot(&format!("{id} other\n")), None);
    }
}
