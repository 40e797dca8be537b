//! Skills: folders holding a `SKILL.md` (YAML frontmatter + Markdown instructions) that the model
//! is told about in a compact list and reads on demand with the `read` tool.
//!
//! **Sources**, highest precedence first ([`SkillSource`]): the workspace's `skills/`, the
//! workspace's `.agents/skills/`, `~/.agents/skills/`, the managed `<state-dir>/skills/`, the
//! bundled folder (`[skills] bundled_dir`, default `skills/` next to `clawbus.toml`), then each
//! `[skills] extra_dirs` entry. Each direct subfolder with a `SKILL.md` is one skill. The same name
//! in two places: the higher one wins whole (no merge), the other is reported `shadowed by <source>`.
//!
//! **Frontmatter**: `name` (default: the folder name), `description` (required),
//! `metadata.openclaw.{requires.{bins, anyBins, env, config}, os, always}`; `metadata` may also be
//! a JSON string. A malformed frontmatter, or a `SKILL.md` over `MAX_SKILL_FILE_BYTES`, skips that
//! skill with a warning naming `file:line`; the others load.
//!
//! **Gating** (see `gate`): required bins on `PATH`, at least one of `anyBins`, env vars set and
//! non-empty, `config` paths truthy in `clawbus.toml`, the current OS in `os` (OpenClaw names:
//! `darwin`, `linux`, `win32`). `always: true` skips those checks. The agent's `[skills] allow`
//! applies to every skill. A skill that fails is invisible to the model; [`FoundSkill::reasons`]
//! says why in words (`missing bin uv`, `env GEMINI_API_KEY unset`, `os darwin`).
//!
//! **Order and caps**: skills are listed by source precedence, then by name, so the workspace's
//! own skills are never crowded out by bundled ones. The list stops at `MAX_LISTED` skills or
//! when the next entry would take the XML over `MAX_LIST_CHARS` characters; descriptions are cut
//! at `MAX_DESCRIPTION_CHARS`.
//!
//! **Locations**: the `read` tool is confined to the workspace, so a skill whose `SKILL.md` lies
//! outside it (personal, managed, bundled, extra, or a workspace skill symlinked from elsewhere) is
//! copied, with its other files, into `<workspace>/.skills/<name>/` when a snapshot is built, and
//! its location is `.skills/<name>/SKILL.md`. Workspace skills keep their own relative path.
//! `.skills/` belongs to clawbus: it is rewritten to match the snapshot and should not be edited.
//!
//! **Snapshots**: a session holds a [`SkillSnapshot`] (or a [`SkillSession`]) and calls
//! `refresh_if_changed` at turn start; [`AgentSkills`] does that for every session key of an
//! agent. A snapshot remembers the stamp (size, mtime, inode) of each source folder, each
//! `SKILL.md` (present or not) and everything under `.skills/` when it was taken; one `stat` of
//! each tells at the next turn whether to rebuild, without listing or hashing (a change to a
//! skill's other files alone is seen with its next `SKILL.md` change). The fingerprint of
//! (path, mtime, size) of the same files is kept on the snapshot for callers that compare.

mod catalog;
mod frontmatter;
mod gate;
mod materialise;
mod session;
mod snapshot;
mod sources;

#[cfg(test)]
pub(crate) mod tests;

pub use catalog::{EnvVars, SkillCatalog, SkillEnv, current_os};
pub use session::{AgentSkills, SkillSession};
pub use snapshot::{PROMPT_HINT, SkillSnapshot, render_xml};

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// The name of the file that makes a folder a skill.
pub(crate) const SKILL_FILE: &str = "SKILL.md";
/// Workspace folder that holds copies of skills stored outside the workspace.
pub(crate) const MATERIALISED_DIR: &str = ".skills";
/// Most skills listed in the prompt.
pub(crate) const MAX_LISTED: usize = 150;
/// Most characters of the rendered `<available_skills>` list.
pub(crate) const MAX_LIST_CHARS: usize = 30_000;
/// A bigger `SKILL.md` is skipped with a warning.
pub(crate) const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;
/// Longer descriptions are cut (with `…`) in the list.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Where a skill was found, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkillSource {
    /// `<workspace>/skills/` (seeded from `agents.d/<id>/skills/`).
    Workspace,
    /// `<workspace>/.agents/skills/`.
    WorkspaceAgents,
    /// `~/.agents/skills/`.
    PersonalAgents,
    /// `<state-dir>/skills/`.
    Managed,
    /// The install's `skills/` (`[skills] bundled_dir`).
    Bundled,
    /// A `[skills] extra_dirs` entry.
    Extra,
}

impl SkillSource {
    /// The word used in reports (`shadowed by workspace`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::WorkspaceAgents => "workspace-agents",
            Self::PersonalAgents => "personal-agents",
            Self::Managed => "managed",
            Self::Bundled => "bundled",
            Self::Extra => "extra",
        }
    }
}

impl fmt::Display for SkillSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// `metadata.openclaw.requires`: what must be present for the skill to be shown.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Requirements {
    /// Every one of these programs must be on `PATH`.
    pub bins: Vec<String>,
    /// At least one of these programs must be on `PATH` (`anyBins`).
    pub any_bins: Vec<String>,
    /// These environment variables must be set and non-empty.
    pub env: Vec<String>,
    /// These dotted paths into `clawbus.toml` must be truthy.
    pub config: Vec<String>,
}

/// One skill as parsed from its `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// The frontmatter `name`, else the folder name.
    pub name: String,
    /// The frontmatter `description` (what the model picks skills by).
    pub description: String,
    /// Where it was found.
    pub source: SkillSource,
    /// The skill folder on disk.
    pub dir: PathBuf,
    /// The `SKILL.md` on disk.
    pub file: PathBuf,
    /// The path the model is given, relative to the workspace, with `/` separators.
    pub location: String,
    /// Whether `location` is a copy under `.skills/` (the file lies outside the workspace).
    pub materialised: bool,
    /// `metadata.openclaw.requires`.
    pub requires: Requirements,
    /// `metadata.openclaw.os` in OpenClaw's names (`darwin`, `linux`, `win32`); empty = any.
    pub os: Vec<String>,
    /// `metadata.openclaw.always`: shown whatever its requirements.
    pub always: bool,
}

/// A skill found by a scan, with whether the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundSkill {
    /// The skill.
    #[serde(flatten)]
    pub skill: Skill,
    /// Why it is not listed; empty = listed in the prompt.
    pub reasons: Vec<String>,
}

impl FoundSkill {
    /// Whether the skill is listed in the prompt.
    pub fn is_visible(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// Everything a scan found, visible or not.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ScanResult {
    /// Every skill found, in source precedence then name order.
    pub skills: Vec<FoundSkill>,
    /// Skills skipped entirely (bad frontmatter, too big, unreadable), as `file:line: message`.
    pub warnings: Vec<String>,
}

impl ScanResult {
    /// The skills listed in the prompt, in list order.
    pub fn visible(&self) -> impl Iterator<Item = &Skill> {
        self.skills
            .iter()
            .filter(|f| f.is_visible())
            .map(|f| &f.skill)
    }

    /// Every `requires.env` name of every skill found (visible or not), sorted, without repeats:
    /// their values must never reach a prompt or a transcript.
    pub fn required_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .skills
            .iter()
            .flat_map(|f| f.skill.requires.env.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}
