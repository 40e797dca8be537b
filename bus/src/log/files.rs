//! The embedded log store: one JSONL file per log, `<dir>/<token>/…/<last token>.jsonl`; a
//! record's sequence is its line number. Appends are synced to disk before they return. The
//! lines of a log are counted once and kept while its file's length is the one counted. The
//! highest lease revision an append was stamped with is in `<last token>.lease` beside it
//! (written only by stamped appends).

use super::{Fence, LogError, LogRecord, LogStore, check_name, check_records};
use async_trait::async_trait;
use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Logs as files under one folder; one writer process.
pub struct FilesLog {
    dir: PathBuf,
    /// Lines and bytes per log as last counted; counted again when the file's length differs
    /// (another handle wrote to it).
    lines: Mutex<HashMap<String, (u64, u64)>>,
}

impl std::fmt::Debug for FilesLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesLog").field("dir", &self.dir).finish()
    }
}

impl FilesLog {
    /// Logs under `dir` (made on the first append).
    pub fn open(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            lines: Mutex::new(HashMap::new()),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.path_with(name, "jsonl")
    }

    /// The file of `name` ending in `.<ext>`.
    fn path_with(&self, name: &str, ext: &str) -> PathBuf {
        let mut path = self.dir.clone();
        let mut tokens = name.split('.').peekable();
        while let Some(token) = tokens.next() {
            if tokens.peek().is_some() {
                path.push(token);
            } else {
                path.push(format!("{token}.{ext}"));
            }
        }
        path
    }
}

/// The highest lease revision stamped on a log (its `.lease` file); 0 when none.
fn stamped_lease(path: &Path) -> Result<u64, LogError> {
    match std::fs::read_to_string(path) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|e| LogError::storage(format!("read {}", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_err("read", path)(e)),
    }
}

/// Writes the highest lease revision of a log, synced (a new file, renamed over the old one).
fn stamp_lease(path: &Path, revision: u64) -> Result<(), LogError> {
    let tmp = path.with_extension("lease.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io_err("create", &tmp))?;
    file.write_all(revision.to_string().as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(io_err("write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err("rename", path))
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> LogError {
    let what = format!("{what} {}", path.display());
    move |e| LogError::storage(what, e)
}

/// The complete lines of a file (a torn last line, cut by a crash, is not a record).
fn read_lines(path: &Path) -> Result<Vec<Vec<u8>>, LogError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    // The part after the last newline: empty, or torn.
    lines.pop();
    Ok(lines)
}

/// The length of a file; 0 when there is none.
fn file_len(path: &Path) -> Result<u64, LogError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_err("stat", path)(e)),
    }
}

/// Counts the complete lines, cutting a torn last line (a crash mid-append) so the next append
/// starts on a line of its own.
fn cut_torn_tail(path: &Path) -> Result<u64, LogError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_err("read", path)(e)),
    };
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete < bytes.len() {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err("open", path))?;
        file.set_len(complete as u64)
            .and_then(|()| file.sync_data())
            .map_err(io_err("cut", path))?;
    }
    Ok(bytes[..complete].iter().filter(|&&b| b == b'\n').count() as u64)
}

#[async_trait]
impl LogStore for FilesLog {
    async fn append(
        &self,
        name: &str,
        records: Vec<Vec<u8>>,
        fence: Fence,
    ) -> Result<u64, LogError> {
        check_name(name)?;
        check_records(name, &records)?;
        let path = self.path(name);
        let lease_path = self.path_with(name, "lease");
        let mut lines = self
            .lines
            .lock()
            .map_err(|_| LogError::storage("append", "lock poisoned"))?;
        let len = file_len(&path)?;
        let count = match lines.get(name) {
            Some(&(n, counted)) if counted == len => n,
            _ => cut_torn_tail(&path)?,
        };
        if let Some(expected) = fence.last.filter(|&e| e != count) {
            return Err(LogError::Fenced {
                name: name.to_string(),
                expected,
                actual: count,
            });
        }
        let latest = match fence.lease {
            Some(lease) => {
                let latest = stamped_lease(&lease_path)?;
                if lease < latest {
                    return Err(LogError::LeaseBehind {
                        name: name.to_string(),
                        lease,
                        latest,
                    });
                }
                latest
            }
            None => 0,
        };
        if records.is_empty() {
            return Ok(count);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
        }
        if let Some(lease) = fence.lease.filter(|&l| l > latest) {
            stamp_lease(&lease_path, lease)?;
        }
        let mut buf = Vec::with_capacity(records.iter().map(|r| r.len() + 1).sum());
        for r in &records {
            buf.extend_from_slice(r);
            buf.push(b'\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        file.write_all(&buf)
            .and_then(|()| file.sync_data())
            .map_err(io_err("append to", &path))?;
        let count = count + records.len() as u64;
        let len = file.metadata().map_err(io_err("stat", &path))?.len();
        lines.insert(name.to_string(), (count, len));
        Ok(count)
    }

    async fn read(&self, name: &str) -> Result<Vec<LogRecord>, LogError> {
        check_name(name)?;
        Ok(read_lines(&self.path(name))?
            .into_iter()
            .zip(1..)
            .map(|(data, seq)| LogRecord { seq, data })
            .collect())
    }

    async fn last(&self, name: &str) -> Result<u64, LogError> {
        check_name(name)?;
        Ok(read_lines(&self.path(name))?.len() as u64)
    }

    async fn delete(&self, name: &str) -> Result<(), LogError> {
        check_name(name)?;
        let path = self.path(name);
        let mut lines = self
            .lines
            .lock()
            .map_err(|_| LogError::storage("delete", "lock poisoned"))?;
        for path in [&path, &self.path_with(name, "lease")] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", path)(e)),
            }
        }
        lines.remove(name);
        Ok(())
    }
}
