//! The durable record of the lines a shared transcript holds while its log store is
//! unreachable: `<sessionId>.jsonl.held` beside this node's copy. Its first line names what the
//! held lines were written for (the sequence they follow and the lease revision they are
//! stamped with), each line after it is one held line. It is synced before a held write
//! returns and removed once the lines are in the log (or refused by it), so a node killed while
//! holding lines finds them when it opens the session again.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What the held lines were written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct HeldFor {
    /// The log's sequence the first of them follows (`u64::MAX`: not known).
    pub after: u64,
    /// The lease revision they are stamped with (0: none).
    pub lease: u64,
}

/// The record file of one transcript's held lines.
#[derive(Debug)]
pub(super) struct HeldFile {
    path: PathBuf,
}

impl HeldFile {
    /// The record beside this node's copy `copy`.
    pub(super) fn beside(copy: &Path) -> Self {
        let mut path = copy.as_os_str().to_owned();
        path.push(".held");
        Self {
            path: PathBuf::from(path),
        }
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the record anew, whole or not at all (a new file renamed over the old one):
    /// `lines` held for `held`.
    pub(super) fn start(&self, held: HeldFor, lines: &[Vec<u8>]) -> io::Result<()> {
        let mut buf = serde_json::to_vec(&held).map_err(io::Error::other)?;
        buf.push(b'\n');
        for line in lines {
            buf.extend_from_slice(line);
            buf.push(b'\n');
        }
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let mut file = File::create(&tmp)?;
        file.write_all(&buf)?;
        file.sync_data()?;
        std::fs::rename(&tmp, &self.path)?;
        sync_dir(&self.path)
    }

    /// Adds `lines` after those recorded, synced; on failure the file is cut back to where it
    /// was, recording none of them.
    pub(super) fn add(&self, lines: &[Vec<u8>]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            buf.extend_from_slice(line);
            buf.push(b'\n');
        }
        let mut file = OpenOptions::new().append(true).open(&self.path)?;
        let len = file.metadata()?.len();
        let written = file.write_all(&buf).and_then(|()| file.sync_data());
        if let Err(e) = written {
            if let Err(cut) = file.set_len(len).and_then(|()| file.sync_data()) {
                tracing::error!(file = %self.path.display(), error = %cut, "Could not cut a failed record of held lines back.");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Removes the record (nothing is held any more).
    pub(super) fn clear(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => sync_dir(&self.path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The lines recorded and what they were held for; `None` when nothing is. A last line cut
    /// short (a crash while it was written: its write never returned) is not one of them.
    pub(super) fn load(&self) -> io::Result<Option<(HeldFor, Vec<Vec<u8>>)>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut whole = bytes.split_inclusive(|&b| b == b'\n').filter_map(|l| {
            let line = l.strip_suffix(b"\n")?;
            serde_json::from_slice::<serde::de::IgnoredAny>(line)
                .is_ok()
                .then(|| line.to_vec())
        });
        let Some(header) = whole.next() else {
            return Ok(None);
        };
        let held: HeldFor = serde_json::from_slice(&header).map_err(io::Error::other)?;
        Ok(Some((held, whole.collect())))
    }
}

/// Syncs the folder holding `path`, making a new or removed entry in it durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_torn_by_a_crash_loads_its_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = HeldFile::beside(&dir.path().join("s.jsonl"));
        assert_eq!(file.load().unwrap(), None);
        let held = HeldFor { after: 4, lease: 7 };
        file.start(held, &[b"{\"n\":1}".to_vec()]).unwrap();
        file.add(&[b"{\"n\":2}".to_vec()]).unwrap();
        let whole = [b"{\"n\":1}".to_vec(), b"{\"n\":2}".to_vec()];
        // A crash while a third line was written (its write never returned): cut in the
        // middle, or before its newline.
        for torn in [&b"{\"n\":"[..], &b"3}"[..]] {
            let mut f = OpenOptions::new().append(true).open(file.path()).unwrap();
            f.write_all(torn).unwrap();
            let (found, lines) = file.load().unwrap().unwrap();
            assert_eq!(found, held);
            assert_eq!(lines, whole);
        }
        file.clear().unwrap();
        assert_eq!(file.load().unwrap(), None);
    }
}
