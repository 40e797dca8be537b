//! The agent's workspace: seeded from `agents.d/<id>/` on first start ([`prepare`]), file
//! stamps ([`FileStamp`]), and [`confine()`]: paths kept inside it. The prompt built from it is
//! assembled by [`crate::prompt`]; the tools that read and write it are in [`crate::tools`].

pub(crate) mod confine;

pub use confine::{ConfineError, confine};

use std::io;
use std::path::{Path, PathBuf};

/// Creates `<state-dir>/workspaces/<agent>/` and copies the seed folder into it without
/// overwriting anything already there (the agent's own edits win). Returns the canonical path.
pub fn prepare(state_dir: &Path, agent: &str, seed: Option<&Path>) -> io::Result<PathBuf> {
    let dir = state_dir.join("workspaces").join(agent);
    std::fs::create_dir_all(&dir)?;
    if let Some(seed) = seed {
        copy_missing(seed, &dir)?;
    }
    dir.canonicalize()
}

fn copy_missing(from: &Path, to: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_missing(&entry.path(), &target)?;
        } else if kind.is_file() && !target.exists() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A version of a file, told without reading it: size, modification time and inode. `write`
/// replaces files by rename, so a same-size rewrite within one timestamp tick still changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    ino: u64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let ino = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let ino = 0;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            ino,
        }
    }
}
