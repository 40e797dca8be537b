//! The agent's workspace: seeded from `agents.d/<id>/` on first start, read for the prompt.

use std::io;
use std::path::{Path, PathBuf};

/// Workspace files that form the system prompt for now, in order.
pub const PROMPT_FILES: &[&str] = &["SOUL.md", "AGENTS.md"];

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

/// The system prompt: each prompt file present in the workspace, under its name.
pub fn system_prompt(workspace: &Path, agent: &str) -> String {
    let mut out =
        format!("You are the agent \"{agent}\" of clawbus. Your workspace files follow.\n");
    for name in PROMPT_FILES {
        match std::fs::read_to_string(workspace.join(name)) {
            Ok(text) if !text.trim().is_empty() => {
                out.push_str(&format!("\n## {name}\n{}\n", text.trim_end()));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(agent, file = name, error = %e, "Workspace file unreadable; left out of the prompt.")
            }
        }
    }
    out
}
