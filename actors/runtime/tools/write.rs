//! The `write` tool: create or replace a file in the workspace, atomically.

use super::{Tool, ToolContext, ToolOutput, blocking, confine, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use std::io::{self, Write};
use std::path::Path;

/// `write {path, content}`: creates or replaces a file in the workspace, creating parent folders.
/// The content goes to a temporary file in the same folder that is then renamed over the target,
/// so readers see the old or the new file, never half of one, and a symlink is never written
/// through (one pointing inside the workspace is followed to its real file by [`confine()`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "write"
    }

    fn description(&self) -> &'static str {
        "Create or overwrite a file in your workspace with `content`. `path` is relative to the \
         workspace; missing parent folders are created. Replaces the whole file."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "File path, relative to the workspace." },
                "content": { "type": "string", "description": "The complete new content of the file." }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("write", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let workspace = ctx.workspace.clone();
        blocking("write", move || {
            match store(&workspace, &args.path, &args.content) {
                Ok(()) => ToolOutput::ok(format!(
                    "wrote {} bytes to {}",
                    args.content.len(),
                    args.path
                )),
                Err(out) => out,
            }
        })
        .await
    }
}

/// Replaces (or creates) the file at `shown` with `content`, atomically, refusing paths that leave
/// the workspace. Blocking.
pub(super) fn store(workspace: &Path, shown: &str, content: &str) -> Result<(), ToolOutput> {
    let out = replace(workspace, shown, content);
    if out.is_error { Err(out) } else { Ok(()) }
}

fn replace(workspace: &Path, shown: &str, content: &str) -> ToolOutput {
    let refused = |e: &dyn std::fmt::Display| {
        tracing::warn!(tool = "write", path = %shown, error = %e, "Path refused.");
        ToolOutput::error("path_refused", e)
    };
    let target = match confine(workspace, shown) {
        Ok(path) => path,
        Err(e) => return refused(&e),
    };
    let root = match workspace.canonicalize() {
        Ok(root) => root,
        Err(e) => return io_error(shown, "resolve the workspace for", &e),
    };
    // Git runs commands its own files name (core.fsmonitor, hooks, aliases): an agent that may
    // run `git status` must not be able to write them.
    if inside_git(&root, &target) {
        return refused(&format!(
            "path {shown:?} is inside a .git folder; git metadata is changed with git itself"
        ));
    }
    let (Some(parent), Some(file_name)) = (target.parent(), target.file_name()) else {
        return is_directory(shown);
    };
    if target == root {
        return is_directory(shown);
    }
    // `confine` resolved every existing component, so the target itself is not a symlink.
    let permissions = match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_dir() => return is_directory(shown),
        Ok(meta) if !meta.is_file() => {
            return ToolOutput::error(
                "not_a_file",
                format!("path {shown:?} exists and is not a regular file"),
            );
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return io_error(shown, "inspect", &e),
    };
    if let Err(e) = std::fs::create_dir_all(parent) {
        return io_error(shown, "create the folder for", &e);
    }
    // Check again once the folders exist: nothing may have turned the path into a way out.
    let parent = match parent.canonicalize() {
        Ok(real) if real.starts_with(&root) && !inside_git(&root, &real) => real,
        Ok(_) => {
            return refused(&format!(
                "path {shown:?} resolves through a symlink to outside the workspace"
            ));
        }
        Err(e) => return io_error(shown, "create the folder for", &e),
    };
    let result = (|| -> io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".clawbus-write-")
            .tempfile_in(&parent)?;
        tmp.write_all(content.as_bytes())?;
        match permissions {
            Some(p) => tmp.as_file().set_permissions(p)?,
            None => set_new_file_mode(tmp.as_file())?,
        }
        tmp.as_file().sync_all()?;
        tmp.persist(parent.join(file_name)).map_err(|e| e.error)?;
        Ok(())
    })();
    if let Err(e) = result {
        return io_error(shown, "write", &e);
    }
    if let Err(e) = std::fs::File::open(&parent).and_then(|dir| dir.sync_all()) {
        tracing::debug!(tool = "write", path = %shown, error = %e, "Folder sync after rename failed.");
    }
    ToolOutput::ok(String::new())
}

/// Whether `path` (real, inside `root`) lies in a `.git` folder.
fn inside_git(root: &Path, path: &Path) -> bool {
    path.strip_prefix(root).is_ok_and(|rel| {
        rel.components()
            .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"))
    })
}

/// Temporary files are created private (0600); a new file gets the usual 0644.
fn set_new_file_mode(file: &std::fs::File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

fn is_directory(shown: &str) -> ToolOutput {
    ToolOutput::error(
        "is_directory",
        format!("path {shown:?} is a directory, not a file"),
    )
}

/// The model gets the path it asked for and the kind of failure; the log gets the whole error,
/// whose text may name real host paths (`tempfile` adds them).
pub(super) fn io_error(shown: &str, action: &str, e: &io::Error) -> ToolOutput {
    tracing::warn!(tool = "write", path = %shown, error = %e, "Write failed.");
    let cause = match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code).to_string(),
        None => e.kind().to_string(),
    };
    ToolOutput::error("io", format!("cannot {action} {shown:?}: {cause}"))
}
