//! `[skills]`: where skills come from (`clawbus.toml`) and which ones an agent may use (agent file).
//!
//! ```toml
//! # clawbus.toml
//! [skills]
//! bundled_dir = "skills"              # default: the `skills/` folder next to clawbus.toml
//! extra_dirs = ["~/team-skills"]      # lowest precedence; `~/` is expanded when scanning
//!
//! # agents.d/<id>.toml
//! [skills]
//! allow = ["daily-log", "summarize-page"]   # absent = every skill
//! ```

use super::span::Source;
use super::{Problem, config_dir};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// Default bundled skills folder, relative to the folder of `clawbus.toml`.
pub const DEFAULT_BUNDLED_DIR: &str = "skills";

/// `[skills]` of `clawbus.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SkillsFile {
    pub bundled_dir: Option<Spanned<String>>,
    pub extra_dirs: Option<Vec<Spanned<String>>>,
}

/// `[skills]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentSkillsFile {
    pub allow: Option<Vec<Spanned<String>>>,
}

/// The validated `[skills]` section of `clawbus.toml`, paths resolved against its folder.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillsDef {
    /// The skills shipped with the install (default `<config dir>/skills`).
    pub bundled_dir: PathBuf,
    /// More skill folders, lowest precedence, in the order given.
    pub extra_dirs: Vec<PathBuf>,
    /// The whole `clawbus.toml` as a raw table: skills gate on dotted paths into it
    /// (`metadata.openclaw.requires.config`). Empty when the file is absent.
    pub settings: toml::Table,
}

/// The validated `[skills]` section of an agent file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentSkillsDef {
    /// Only these skill names are shown to the model; `None` = every skill.
    pub allow: Option<Vec<String>>,
}

impl AgentSkillsDef {
    /// Whether the allow list (absent = everything) lets the skill `name` through.
    pub fn allows(&self, name: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name))
    }
}

/// What `clawbus.toml` says, kept until the folder it is resolved against is known.
#[derive(Debug, Default)]
pub(super) struct SkillsPart {
    bundled_dir: Option<String>,
    extra_dirs: Vec<String>,
    settings: toml::Table,
}

impl SkillsPart {
    /// Resolves relative folders against the folder of `config` (the `clawbus.toml` path).
    pub(super) fn resolve(self, config: &Path) -> SkillsDef {
        let base = config_dir(config);
        let resolve = |p: &str| {
            let path = Path::new(p);
            if path.is_absolute() || p.starts_with("~/") {
                path.to_path_buf()
            } else {
                base.join(path)
            }
        };
        SkillsDef {
            bundled_dir: resolve(self.bundled_dir.as_deref().unwrap_or(DEFAULT_BUNDLED_DIR)),
            extra_dirs: self.extra_dirs.iter().map(|d| resolve(d)).collect(),
            settings: self.settings,
        }
    }
}

/// Checks `[skills]` of `clawbus.toml`; `src` is the whole file.
///
/// A folder named here must exist (a typo would otherwise silently hide every skill in it); the
/// default bundled folder may be absent.
pub(super) fn skills_part(src: &Source, f: &SkillsFile, problems: &mut Vec<Problem>) -> SkillsPart {
    let base = config_dir(src.path);
    let mut folder = |value: &Spanned<String>, field: &str| {
        let text = value.get_ref();
        if text.trim().is_empty() {
            problems.push(src.at(
                Some(value.span()),
                field,
                "empty folder name (expected a path such as \"skills\" or \"~/my-skills\")",
            ));
            return None;
        }
        let path = match text.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                Some(home) => PathBuf::from(home).join(rest),
                None => return Some(text.clone()),
            },
            None => base.join(text),
        };
        if !path.is_dir() {
            problems.push(src.at(
                Some(value.span()),
                field,
                format!(
                    "folder {} not found (expected an existing folder of <name>/SKILL.md skills)",
                    path.display()
                ),
            ));
        }
        Some(text.clone())
    };
    let bundled_dir = f
        .bundled_dir
        .as_ref()
        .and_then(|d| folder(d, "skills.bundled_dir"));
    let extra_dirs = f
        .extra_dirs
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, d)| folder(d, &format!("skills.extra_dirs[{i}]")))
        .collect();
    SkillsPart {
        bundled_dir,
        extra_dirs,
        settings: toml::from_str(src.text).unwrap_or_default(),
    }
}

/// Checks `[skills]` of an agent file.
pub(super) fn agent_skills(
    src: &Source,
    f: &AgentSkillsFile,
    problems: &mut Vec<Problem>,
) -> AgentSkillsDef {
    let Some(allow) = &f.allow else {
        return AgentSkillsDef::default();
    };
    for name in allow.iter().filter(|n| !is_skill_name(n.get_ref())) {
        problems.push(src.at(
            Some(name.span()),
            "skills.allow",
            format!(
                "invalid skill name {:?} (expected the `name` of a skill: letters, digits, '-', '_' or '.', not starting with '.')",
                name.get_ref()
            ),
        ));
    }
    AgentSkillsDef {
        allow: Some(allow.iter().map(|n| n.get_ref().clone()).collect()),
    }
}

/// A skill name usable as a folder name: `[A-Za-z0-9._-]{1,64}`, not starting with `.`.
pub fn is_skill_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
