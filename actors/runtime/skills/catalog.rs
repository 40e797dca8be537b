//! [`SkillCatalog`]: where one agent's skills come from, and the scan that finds and judges them.

use super::{FoundSkill, MAX_LIST_CHARS, MAX_LISTED, ScanResult, SkillSource, gate, sources};
use clawbus_core::config::{AgentDef, Config};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where environment variables (including `PATH` and `HOME`) are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvVars {
    /// This process's environment.
    Process,
    /// A fixed set, for tests: a name missing here is unset.
    Fixed(BTreeMap<String, String>),
}

/// The environment skills are gated against: variables and the operating system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEnv {
    /// Variables, `PATH` and `HOME` included.
    pub vars: EnvVars,
    /// OpenClaw's name of the OS: `darwin`, `linux`, `win32`, or Rust's name for others.
    pub os: String,
}

impl SkillEnv {
    /// This process's environment and OS.
    pub fn process() -> Self {
        Self {
            vars: EnvVars::Process,
            os: current_os().to_string(),
        }
    }

    /// Fixed variables and OS, for tests.
    pub fn fixed<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
        os: &str,
    ) -> Self {
        Self {
            vars: EnvVars::Fixed(
                vars.into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
            os: os.to_string(),
        }
    }

    /// The variable's value; `None` when unset.
    pub fn var(&self, name: &str) -> Option<OsString> {
        match &self.vars {
            EnvVars::Process => std::env::var_os(name),
            EnvVars::Fixed(map) => map.get(name).map(OsString::from),
        }
    }

    /// The home folder (`HOME`, else `USERPROFILE`), when set.
    pub fn home(&self) -> Option<PathBuf> {
        self.var("HOME")
            .or_else(|| self.var("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    }

    /// `~/x` → `<home>/x`; other paths unchanged.
    fn expand(&self, path: &Path) -> PathBuf {
        match (path.strip_prefix("~"), self.home()) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => path.to_path_buf(),
        }
    }
}

/// OpenClaw's name of the OS this runs on: `darwin`, `linux`, `win32`, else Rust's name.
pub fn current_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// The skill sources and gating inputs of one agent. Plain data: tests build it directly.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillCatalog {
    /// The agent's workspace: its `skills/` and `.agents/skills/` are the first two sources, and
    /// copies of outside skills go to its `.skills/`.
    pub workspace: PathBuf,
    /// `<state-dir>/skills`, when there is one.
    pub managed_dir: Option<PathBuf>,
    /// The install's bundled skills, when there are any.
    pub bundled_dir: Option<PathBuf>,
    /// `[skills] extra_dirs`, lowest precedence.
    pub extra_dirs: Vec<PathBuf>,
    /// The agent's `[skills] allow`; `None` = every skill.
    pub allow: Option<Vec<String>>,
    /// `clawbus.toml` as a raw table, for `requires.config`.
    pub settings: toml::Table,
    /// Variables, `PATH`, `HOME` and OS.
    pub env: SkillEnv,
}

impl SkillCatalog {
    /// The catalog of a running agent whose workspace is `workspace`, gated on this process's
    /// environment.
    pub fn for_agent(config: &Config, agent: &AgentDef, workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            managed_dir: Some(config.state_dir.join("skills")),
            bundled_dir: Some(config.skills.bundled_dir.clone()),
            extra_dirs: config.skills.extra_dirs.clone(),
            allow: agent.skills.allow.clone(),
            settings: config.skills.settings.clone(),
            env: SkillEnv::process(),
        }
    }

    /// Where to look for an agent's workspace skills without creating anything: the workspace
    /// when it exists, else the seed folder it will be copied from (`agents.d/<id>/`).
    pub fn preview_workspace(config: &Config, agent: &AgentDef) -> PathBuf {
        let workspace = config.state_dir.join("workspaces").join(agent.id.as_str());
        match &agent.seed_dir {
            Some(seed) if !workspace.is_dir() => seed.clone(),
            _ => workspace,
        }
    }

    /// The source folders in precedence order, each folder once.
    pub(crate) fn roots(&self) -> Vec<(SkillSource, PathBuf)> {
        let mut roots = self.candidate_roots();
        let mut seen = BTreeSet::new();
        roots.retain(|(_, dir)| seen.insert(dir.canonicalize().unwrap_or_else(|_| dir.clone())));
        roots
    }

    /// The source folders in precedence order, before two naming one folder are merged.
    fn candidate_roots(&self) -> Vec<(SkillSource, PathBuf)> {
        let ws = &self.workspace;
        let mut roots = vec![
            (SkillSource::Workspace, ws.join("skills")),
            (
                SkillSource::WorkspaceAgents,
                ws.join(".agents").join("skills"),
            ),
        ];
        if let Some(home) = self.env.home() {
            roots.push((
                SkillSource::PersonalAgents,
                home.join(".agents").join("skills"),
            ));
        }
        roots.extend(
            self.managed_dir
                .iter()
                .map(|d| (SkillSource::Managed, d.clone())),
        );
        roots.extend(
            self.bundled_dir
                .iter()
                .map(|d| (SkillSource::Bundled, self.env.expand(d))),
        );
        roots.extend(
            self.extra_dirs
                .iter()
                .map(|d| (SkillSource::Extra, self.env.expand(d))),
        );
        roots
    }

    /// Finds every skill in every source and says whether the model sees it, and why not.
    ///
    /// Reads only; nothing is written (a snapshot copies outside skills into `.skills/`).
    pub fn scan(&self) -> ScanResult {
        let workspace = self
            .workspace
            .canonicalize()
            .unwrap_or_else(|_| self.workspace.clone());
        let mut result = ScanResult::default();
        let mut winners: BTreeMap<String, SkillSource> = BTreeMap::new();
        for (source, root) in self.roots() {
            let skills = sources::load_root(source, &root, &workspace, &mut result.warnings);
            for skill in skills {
                let reasons = match winners.get(&skill.name) {
                    Some(winner) => vec![format!("shadowed by {winner}")],
                    None => {
                        winners.insert(skill.name.clone(), source);
                        gate::reasons(&skill, self)
                    }
                };
                result.skills.push(FoundSkill { skill, reasons });
            }
        }
        apply_caps(&mut result.skills);
        result
    }

    /// A cheap fingerprint of every source (path, mtime and size of each `SKILL.md`) and of the
    /// `.skills/` copies: it changes when a skill is added, removed or edited.
    pub fn fingerprint(&self) -> u64 {
        sources::combine(self.sources_fingerprint(), self.materialised_fingerprint())
    }

    pub(super) fn sources_fingerprint(&self) -> u64 {
        sources::fingerprint(&self.roots())
    }

    pub(super) fn materialised_fingerprint(&self) -> u64 {
        sources::tree_fingerprint(&self.workspace.join(super::MATERIALISED_DIR))
    }

    /// The paths whose stamps tell that the sources changed (see [`sources::Watch`]); taken
    /// before a scan, so a change during the scan shows as one afterwards.
    pub(super) fn watch_sources(&self) -> sources::Watch {
        let roots: Vec<PathBuf> = self.candidate_roots().into_iter().map(|(_, d)| d).collect();
        let mut watch = sources::Watch::default();
        watch.sources(&roots);
        watch
    }

    /// Adds `.skills/` and everything under it to `watch`.
    pub(super) fn watch_materialised(&self, watch: &mut sources::Watch) {
        watch.tree(&self.workspace.join(super::MATERIALISED_DIR));
    }
}

/// Hides the visible skills past [`MAX_LISTED`] or past the [`MAX_LIST_CHARS`] budget, in order.
fn apply_caps(skills: &mut [FoundSkill]) {
    let mut listed = 0;
    let mut chars = super::snapshot::XML_FRAME_CHARS;
    let mut full: Option<String> = None;
    for found in skills.iter_mut().filter(|f| f.is_visible()) {
        if let Some(reason) = &full {
            found.reasons.push(reason.clone());
            continue;
        }
        let entry = super::snapshot::skill_xml(&found.skill).chars().count();
        if listed == MAX_LISTED {
            full = Some(format!("over the cap of {MAX_LISTED} listed skills"));
        } else if chars + entry > MAX_LIST_CHARS {
            full = Some(format!(
                "over the {MAX_LIST_CHARS}-character budget of the skills list"
            ));
        } else {
            listed += 1;
            chars += entry;
            continue;
        }
        found.reasons.extend(full.clone());
    }
}
