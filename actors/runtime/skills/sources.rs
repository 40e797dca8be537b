//! Reading one source folder into [`Skill`]s, and fingerprinting sources to notice changes.

use super::{MATERIALISED_DIR, MAX_SKILL_FILE_BYTES, SKILL_FILE, Skill, SkillSource, frontmatter};
use crate::workspace::FileStamp;
use clawbus_core::config::is_skill_name;
use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// More skill folders than this in one source and the rest are left out with a warning.
const MAX_DIRS_PER_ROOT: usize = 1000;
/// Entries of `.skills/` looked at by the fingerprint, at most.
const MAX_TREE_ENTRIES: usize = 20_000;

/// Every loadable skill directly under `root`, by name; problems go to `warnings`.
/// A missing `root` is no problem: most sources are optional.
pub(super) fn load_root(
    source: SkillSource,
    root: &Path,
    workspace: &Path,
    warnings: &mut Vec<String>,
) -> Vec<Skill> {
    let mut dirs = match skill_dirs(root) {
        Ok(dirs) => dirs,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(format!(
                "{}: cannot read the {source} skills folder: {e}",
                root.display()
            ));
            return Vec::new();
        }
    };
    if dirs.len() > MAX_DIRS_PER_ROOT {
        warnings.push(format!(
            "{}: {} skill folders, only the first {MAX_DIRS_PER_ROOT} by name are read",
            root.display(),
            dirs.len()
        ));
        dirs.truncate(MAX_DIRS_PER_ROOT);
    }
    let mut skills: Vec<Skill> = dirs
        .iter()
        .filter_map(|dir| load_skill(source, dir, workspace, warnings))
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.dir.cmp(&b.dir)));
    skills
}

/// The non-hidden subfolders of `root` (symlinks followed), sorted.
fn skill_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn load_skill(
    source: SkillSource,
    dir: &Path,
    workspace: &Path,
    warnings: &mut Vec<String>,
) -> Option<Skill> {
    let file = dir.join(SKILL_FILE);
    let shown = file.display();
    let meta = match fs::metadata(&file) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            warnings.push(format!("{shown}: skipped: cannot read it: {e}"));
            return None;
        }
    };
    if meta.len() > MAX_SKILL_FILE_BYTES {
        warnings.push(format!(
            "{shown}: skipped: {} bytes, over the limit of {MAX_SKILL_FILE_BYTES} bytes for a {SKILL_FILE}",
            meta.len()
        ));
        return None;
    }
    let text = match fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => {
            warnings.push(format!(
                "{shown}: skipped: cannot read it: {e} (expected UTF-8 text)"
            ));
            return None;
        }
    };
    let fm = match frontmatter::parse(&text) {
        Ok(fm) => fm,
        Err(e) => {
            let col = if e.col > 0 {
                format!(":{}", e.col)
            } else {
                String::new()
            };
            warnings.push(format!("{shown}:{}{col}: skipped: {}", e.line, e.message));
            return None;
        }
    };
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = fm.name.filter(|n| !n.is_empty()).unwrap_or(folder);
    if !is_skill_name(&name) {
        warnings.push(format!(
            "{shown}:{}: skipped: invalid skill name {name:?} (expected letters, digits, '-', '_' or '.', at most 64, not starting with '.')",
            line_of(&text, "name")
        ));
        return None;
    }
    let Some(description) = fm.description.filter(|d| !d.is_empty()) else {
        warnings.push(format!(
            "{shown}:1: skipped: no `description` in the frontmatter (the model chooses skills by it)"
        ));
        return None;
    };
    let real = file.canonicalize().unwrap_or_else(|_| file.clone());
    let inside = real
        .strip_prefix(workspace)
        .ok()
        .filter(|rel| !rel.starts_with(MATERIALISED_DIR));
    let (location, materialised) = match inside {
        Some(rel) => (slashed(rel), false),
        None => (format!("{MATERIALISED_DIR}/{name}/{SKILL_FILE}"), true),
    };
    Some(Skill {
        name,
        description,
        source,
        dir: dir.to_path_buf(),
        file,
        location,
        materialised,
        requires: fm.requires,
        os: fm.os,
        always: fm.always,
    })
}

/// A relative path with `/` separators, as the model writes it.
fn slashed(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The 1-based line of the first `key:` line of `text`, else 1.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i + 1)
}

/// Hash of (path, mtime, size) of every `SKILL.md` directly under each root, and of each root's
/// listing: adding, removing or editing a skill changes it.
pub(super) fn fingerprint(roots: &[(SkillSource, PathBuf)]) -> u64 {
    let mut h = DefaultHasher::new();
    for (source, root) in roots {
        source.hash(&mut h);
        root.hash(&mut h);
        let Ok(mut dirs) = skill_dirs(root) else {
            continue;
        };
        dirs.truncate(MAX_DIRS_PER_ROOT);
        for dir in dirs {
            let file = dir.join(SKILL_FILE);
            if let Ok(meta) = fs::metadata(&file) {
                file.hash(&mut h);
                stamp(&meta).hash(&mut h);
            }
        }
    }
    h.finish()
}

/// Hash of (path, mtime, size, kind) of everything under `dir` (symlinks not followed).
pub(super) fn tree_fingerprint(dir: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(at) = stack.pop() {
        let Ok(entries) = fs::read_dir(&at) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            seen += 1;
            if seen > MAX_TREE_ENTRIES {
                return h.finish();
            }
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            path.hash(&mut h);
            stamp(&meta).hash(&mut h);
            meta.file_type().is_symlink().hash(&mut h);
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    h.finish()
}

/// Two fingerprints as one.
pub(super) fn combine(a: u64, b: u64) -> u64 {
    let mut h = DefaultHasher::new();
    (a, b).hash(&mut h);
    h.finish()
}

fn stamp(meta: &fs::Metadata) -> (u64, u128) {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    (meta.len(), mtime)
}

/// What a snapshot was built from, told again with one `stat` per path: each source root (every
/// candidate, before two naming one folder are merged), the `SKILL.md` of each skill folder in
/// it (present or not), and everything under `.skills/`. A folder's stamp changes when an entry is added,
/// removed or renamed in it, a file's when it is written or replaced, a symlink's target's when
/// it is pointed elsewhere (inode), and a path that appears or disappears changes from absent to
/// present or back: every change the fingerprint sees, without listing, sorting or hashing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    /// (path, followed through symlinks, its stamp when taken; `None`: absent or unreadable).
    paths: Vec<(PathBuf, bool, Option<FileStamp>)>,
}

impl Watch {
    /// Watches `path` (through symlinks when `follow`); gives its metadata when it exists.
    fn add(&mut self, path: PathBuf, follow: bool) -> Option<fs::Metadata> {
        let meta = metadata(&path, follow);
        self.paths
            .push((path, follow, meta.as_ref().map(FileStamp::of)));
        meta
    }

    /// Watches the source roots, their skill folders and each folder's `SKILL.md`.
    pub(super) fn sources(&mut self, roots: &[PathBuf]) {
        for root in roots {
            if !self.add(root.clone(), true).is_some_and(|m| m.is_dir()) {
                continue;
            }
            let Ok(mut dirs) = skill_dirs(root) else {
                continue;
            };
            dirs.truncate(MAX_DIRS_PER_ROOT);
            // A `SKILL.md` written into a folder that had none changes from absent to present.
            for dir in dirs {
                self.add(dir.join(SKILL_FILE), true);
            }
        }
    }

    /// Watches `dir` and everything under it (symlinks inside not followed), at most
    /// [`MAX_TREE_ENTRIES`] entries, as [`tree_fingerprint`] reads it.
    pub(super) fn tree(&mut self, dir: &Path) {
        if !self
            .add(dir.to_path_buf(), true)
            .is_some_and(|m| m.is_dir())
        {
            return;
        }
        let mut stack = vec![dir.to_path_buf()];
        let mut seen = 0;
        while let Some(at) = stack.pop() {
            let Ok(entries) = fs::read_dir(&at) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                seen += 1;
                if seen > MAX_TREE_ENTRIES {
                    return;
                }
                let path = entry.path();
                if self.add(path.clone(), false).is_some_and(|m| m.is_dir()) {
                    stack.push(path);
                }
            }
        }
    }

    /// Whether any watched path's stamp differs from when it was taken.
    pub(crate) fn changed(&self) -> bool {
        self.paths
            .iter()
            .any(|(path, follow, was)| metadata(path, *follow).as_ref().map(FileStamp::of) != *was)
    }

    /// How many paths are watched.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.paths.len()
    }
}

fn metadata(path: &Path, follow: bool) -> Option<fs::Metadata> {
    if follow {
        fs::metadata(path).ok()
    } else {
        fs::symlink_metadata(path).ok()
    }
}
