//! Workspace files as the prompt reads them: confined to the workspace and cached by stamp, so
//! reassembling before every model call costs a `stat` per file, not a read.

use crate::workspace::{FileStamp, confine};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes of one file read at most; the per-file cap cuts far earlier.
const MAX_READ_BYTES: u64 = 4 << 20;

/// File contents by workspace-relative path, re-read only when the stamp changes.
#[derive(Debug, Default)]
pub(super) struct FileCache {
    entries: Mutex<HashMap<String, (FileStamp, Arc<str>)>>,
}

impl FileCache {
    /// The text of `rel` in `workspace`, `None` when it is absent, not a regular file, outside
    /// the workspace (through a symlink) or unreadable (the last two are logged).
    pub(super) fn read(&self, workspace: &Path, rel: &str) -> Option<Arc<str>> {
        // One lock for stat and read: files are small, and a turn never sees a stale version.
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some((path, stamp)) = locate(workspace, rel) else {
            entries.remove(rel);
            return None;
        };
        if let Some((cached, text)) = entries.get(rel)
            && *cached == stamp
        {
            return Some(text.clone());
        }
        let mut bytes = Vec::new();
        let read =
            std::fs::File::open(&path).and_then(|f| f.take(MAX_READ_BYTES).read_to_end(&mut bytes));
        if let Err(e) = read {
            tracing::warn!(file = rel, error = %e, "Workspace file unreadable; left out of the prompt.");
            entries.remove(rel);
            return None;
        }
        let text: Arc<str> = String::from_utf8_lossy(&bytes).into();
        entries.insert(rel.to_string(), (stamp, text.clone()));
        Some(text)
    }
}

/// The real path and stamp of `rel` when it is a regular file inside the workspace.
fn locate(workspace: &Path, rel: &str) -> Option<(PathBuf, FileStamp)> {
    let direct = workspace.join(rel);
    let path = match std::fs::symlink_metadata(&direct) {
        // A plain file directly under the canonical workspace needs no confinement walk.
        Ok(meta) if meta.is_file() && !rel.contains('/') => {
            return Some((direct, FileStamp::of(&meta)));
        }
        Ok(_) => match confine(workspace, rel) {
            Ok(real) => real,
            Err(e) => {
                tracing::warn!(file = rel, error = %e, "Workspace file refused; left out of the prompt.");
                return None;
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = rel, error = %e, "Workspace file unreadable; left out of the prompt.");
            return None;
        }
    };
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Some((path, FileStamp::of(&meta))),
        _ => None,
    }
}
