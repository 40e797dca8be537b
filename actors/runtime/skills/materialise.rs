//! Copies of skills stored outside the workspace, in `<workspace>/.skills/<name>/`, so the
//! confined `read` tool can open the location the model is given.
//!
//! The copy holds the skill's `SKILL.md` and its other regular files (scripts, references), not
//! hidden ones and never what a symlink inside the skill points at. Files are written read-only and
//! only when their bytes differ, so an unchanged skill keeps its mtime and the fingerprint holds.
//! A symlink planted at any level of `.skills/` is removed, never followed.

use super::{MATERIALISED_DIR, SKILL_FILE, Skill};
use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Most files copied per skill.
const MAX_COPY_FILES: usize = 64;
/// Most bytes copied per skill.
const MAX_COPY_BYTES: u64 = 2 << 20;
/// Deepest folder level copied inside a skill.
const MAX_DEPTH: usize = 4;

/// Makes `<workspace>/.skills/` hold exactly the materialised skills among `skills`.
pub(super) fn sync<'a>(workspace: &Path, skills: impl Iterator<Item = &'a Skill>) -> Vec<String> {
    let root = workspace.join(MATERIALISED_DIR);
    let wanted: Vec<&Skill> = skills.filter(|s| s.materialised).collect();
    let mut warnings = Vec::new();
    if wanted.is_empty() {
        if let Err(e) = remove_any(&root) {
            warnings.push(format!(
                "{}: cannot remove stale skill copies: {e}",
                root.display()
            ));
        }
        return warnings;
    }
    if let Err(e) = real_dir(&root) {
        warnings.push(format!(
            "{}: cannot create the skill copies folder: {e}",
            root.display()
        ));
        return warnings;
    }
    for skill in &wanted {
        let dest = root.join(&skill.name);
        if let Err(e) = copy_skill(skill, &dest, &mut warnings) {
            warnings.push(format!(
                "{}: cannot copy the skill to {}: {e}",
                skill.dir.display(),
                dest.display()
            ));
        }
    }
    let names: BTreeSet<&str> = wanted.iter().map(|s| s.name.as_str()).collect();
    let stale = fs::read_dir(&root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| !names.contains(e.file_name().to_string_lossy().as_ref()));
    for entry in stale {
        if let Err(e) = remove_any(&entry.path()) {
            warnings.push(format!(
                "{}: cannot remove a stale skill copy: {e}",
                entry.path().display()
            ));
        }
    }
    warnings
}

fn copy_skill(skill: &Skill, dest: &Path, warnings: &mut Vec<String>) -> io::Result<()> {
    real_dir(dest)?;
    let mut files = vec![(PathBuf::from(SKILL_FILE), skill.file.clone())];
    let mut bytes = fs::metadata(&skill.file)?.len();
    let mut left_out = 0;
    for (rel, src, len) in walk(&skill.dir) {
        if rel == Path::new(SKILL_FILE) {
            continue;
        }
        if files.len() >= MAX_COPY_FILES || bytes + len > MAX_COPY_BYTES {
            left_out += 1;
            continue;
        }
        bytes += len;
        files.push((rel, src));
    }
    if left_out > 0 {
        warnings.push(format!(
            "{}: {left_out} files not copied to .skills/{} (limit {MAX_COPY_FILES} files, {MAX_COPY_BYTES} bytes)",
            skill.dir.display(),
            skill.name
        ));
    }
    for (rel, src) in &files {
        let target = dest.join(rel);
        let mut dir = dest.to_path_buf();
        for part in rel.parent().into_iter().flat_map(Path::components) {
            dir.push(part);
            real_dir(&dir)?;
        }
        write_if_changed(src, &target)?;
    }
    let keep: BTreeSet<PathBuf> = files.into_iter().map(|(rel, _)| rel).collect();
    prune(dest, Path::new(""), &keep)
}

/// Regular, non-hidden files under `dir` as (relative path, real path, size), sorted, bounded.
fn walk(dir: &Path) -> Vec<(PathBuf, PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_file() {
                out.push((rel.join(&name), entry.path(), meta.len()));
            } else if meta.is_dir() && depth < MAX_DEPTH {
                stack.push((rel.join(&name), depth + 1));
            }
        }
    }
    out.sort();
    out
}

/// Writes `src`'s bytes to `target` unless they are already there; the new file is read-only.
fn write_if_changed(src: &Path, target: &Path) -> io::Result<()> {
    let data = fs::read(src)?;
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_file() && meta.len() == data.len() as u64 => {
            if fs::read(target)? == data {
                return Ok(());
            }
            fs::remove_file(target)?;
        }
        Ok(_) => remove_any(target)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // `create_new` refuses to follow anything that appeared at `target` in the meantime.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)?;
    file.write_all(&data)?;
    let mut perms = file.metadata()?.permissions();
    perms.set_readonly(true);
    fs::set_permissions(target, perms)
}

/// Removes what is under `dest/rel` and not in `keep` (paths relative to `dest`).
fn prune(dest: &Path, rel: &Path, keep: &BTreeSet<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dest.join(rel))? {
        let entry = entry?;
        let path = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() && keep.iter().any(|k| k.starts_with(&path)) {
            prune(dest, &path, keep)?;
        } else if !(kind.is_file() && keep.contains(&path)) {
            remove_any(&entry.path())?;
        }
    }
    Ok(())
}

/// Makes `path` a real folder: a symlink or file there is removed first.
fn real_dir(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => {
            fs::remove_file(path)?;
            fs::create_dir(path)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(path),
        Err(e) => Err(e),
    }
}

/// Removes a file, symlink (not its target) or folder tree; absent is fine.
fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
