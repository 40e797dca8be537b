//! Path confinement: every file tool turns the model's path into a real path through [`confine()`].

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a requested path was refused. Messages name the path as requested and never reveal where
/// a symlink points.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The requested path was the empty string.
    #[error("path is empty")]
    Empty,
    /// The requested path contains a NUL byte.
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
    /// A `..` component climbs above the workspace.
    #[error("path {0:?} escapes the workspace")]
    Escapes(String),
    /// An absolute path that does not lie inside the workspace.
    #[error("path {0:?} is outside the workspace")]
    Outside(String),
    /// The real location, after resolving symlinks, is outside the workspace.
    #[error("path {0:?} resolves through a symlink to outside the workspace")]
    SymlinkEscape(String),
    /// A symlink on the path points at nothing, so where it leads cannot be checked.
    #[error("path {0:?} goes through a dangling symlink")]
    DanglingSymlink(String),
    /// A `..` follows a component that does not exist, so it cannot be resolved.
    #[error("path {0:?} has \"..\" after a directory that does not exist")]
    DotDotAfterMissing(String),
    /// The file system refused to tell where the path leads.
    #[error("path {path:?} cannot be resolved: {source}")]
    Io {
        /// The path as requested.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The workspace itself cannot be resolved.
    #[error("workspace {} cannot be resolved: {source}", path.display())]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Resolves `requested` (relative to `workspace`, or absolute inside it) to a real path inside the
/// canonical workspace, or refuses it.
///
/// - Relative paths resolve inside the workspace; a `..` that climbs above it is refused.
/// - Absolute paths are refused unless they lie inside the workspace.
/// - Symlinks are resolved one component at a time; the existing part of the result is canonical,
///   the missing tail is appended as is and may not contain `..`. If the real location is outside
///   the canonical workspace, the path is refused. A symlink inside pointing inside is fine.
/// - A dangling symlink is refused: writing through it could create a file anywhere.
///
/// The result has no symlink in its existing part, so the final component of an existing path is
/// its real file, never a link.
pub fn confine(workspace: &Path, requested: &str) -> Result<PathBuf, ConfineError> {
    let shown = || requested.to_string();
    if requested.is_empty() {
        return Err(ConfineError::Empty);
    }
    if requested.contains('\0') {
        return Err(ConfineError::Nul(shown()));
    }
    let root = workspace
        .canonicalize()
        .map_err(|source| ConfineError::Workspace {
            path: workspace.to_path_buf(),
            source,
        })?;
    let req = Path::new(requested);
    let rel = if req.is_absolute() {
        req.strip_prefix(&root)
            .or_else(|_| req.strip_prefix(workspace))
            .map_err(|_| ConfineError::Outside(shown()))?
    } else {
        req
    };

    // Lexical check first: `..` may never climb above the workspace, whatever the links say.
    let mut depth = 0usize;
    for component in rel.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| ConfineError::Escapes(shown()))?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(ConfineError::Outside(shown()));
            }
        }
    }

    // Then walk the real file system: `current` stays canonical while components exist.
    let mut current = root.clone();
    let mut missing: Option<PathBuf> = None;
    for component in rel.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if missing.is_some() {
                    return Err(ConfineError::DotDotAfterMissing(shown()));
                }
                current.pop();
            }
            Component::Normal(name) => {
                if let Some(tail) = missing.as_mut() {
                    tail.push(name);
                    continue;
                }
                let next = current.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => match next.canonicalize() {
                        Ok(real) => current = real,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(ConfineError::DanglingSymlink(shown()));
                        }
                        Err(source) => {
                            return Err(ConfineError::Io {
                                path: shown(),
                                source,
                            });
                        }
                    },
                    Ok(_) => current = next,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                        ) =>
                    {
                        missing = Some(PathBuf::from(name));
                    }
                    Err(source) => {
                        return Err(ConfineError::Io {
                            path: shown(),
                            source,
                        });
                    }
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ConfineError::Outside(shown()));
            }
        }
    }
    if let Some(tail) = missing {
        current.push(tail);
    }
    if current.starts_with(&root) {
        Ok(current)
    } else {
        Err(ConfineError::SymlinkEscape(shown()))
    }
}
