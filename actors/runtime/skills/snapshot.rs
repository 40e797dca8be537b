//! [`SkillSnapshot`]: the skills one session lists, fixed until a `SKILL.md` changes, and the
//! compact XML the prompt shows.

use super::sources::Watch;
use super::{MAX_DESCRIPTION_CHARS, Skill, SkillCatalog, materialise, sources};

/// One line for the system prompt, to put before the XML list.
pub const PROMPT_HINT: &str = "Skills: each <skill> below is a set of instructions for one kind of task. \
When a task matches a skill's description, first read its SKILL.md at <location> with the `read` tool, \
then follow it. Read only the skill you need.";

const OPEN: &str = "<available_skills>\n";
const CLOSE: &str = "</available_skills>";
/// Characters of the list around its entries.
pub(super) const XML_FRAME_CHARS: usize = OPEN.len() + CLOSE.len();

/// The skills a session shows the model, with the fingerprint of the files they came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillSnapshot {
    /// The listed skills, in list order (source precedence, then name), caps applied.
    pub skills: Vec<Skill>,
    /// [`SkillCatalog::fingerprint`] when this snapshot was taken.
    pub fingerprint: u64,
    /// Skills skipped (bad frontmatter, too big) and copy problems, as `file:line: message`.
    pub warnings: Vec<String>,
    /// `requires.env` of every skill found, listed or not.
    env_names: Vec<String>,
    /// [`render_xml`] of `skills`, rendered once.
    xml: String,
    /// The paths whose stamps tell, one `stat` each, that a skill file changed since.
    watch: Watch,
}

impl SkillSnapshot {
    /// Scans the catalog and copies the listed outside skills into `<workspace>/.skills/`, so
    /// every location can be read. Warnings are logged once here.
    pub fn build(catalog: &SkillCatalog) -> Self {
        // Taken before the scan: a change during the scan makes the snapshot stale, never lost.
        let mut watch = catalog.watch_sources();
        let sources = catalog.sources_fingerprint();
        let scan = catalog.scan();
        let mut warnings = scan.warnings.clone();
        warnings.extend(materialise::sync(&catalog.workspace, scan.visible()));
        catalog.watch_materialised(&mut watch);
        let fingerprint = sources::combine(sources, catalog.materialised_fingerprint());
        for warning in &warnings {
            tracing::warn!(workspace = %catalog.workspace.display(), warning = %warning, "Skill left out.");
        }
        tracing::debug!(
            workspace = %catalog.workspace.display(),
            found = scan.skills.len(),
            listed = scan.visible().count(),
            "Skill snapshot taken."
        );
        let skills: Vec<Skill> = scan.visible().cloned().collect();
        Self {
            env_names: scan.required_env_names(),
            xml: render_xml(&skills),
            skills,
            fingerprint,
            warnings,
            watch,
        }
    }

    /// `<available_skills>…</available_skills>` (one `<skill>` per line), or `""` when there is no
    /// skill, so an agent without skills gets no list at all.
    pub fn render_xml(&self) -> String {
        self.xml.clone()
    }

    /// Whether a skill file may have changed since this snapshot was taken: one `stat` per
    /// watched path (see [`Watch`]), where [`SkillSnapshot::fingerprint`] lists and hashes.
    pub(crate) fn changed(&self) -> bool {
        self.watch.changed()
    }

    #[cfg(test)]
    /// How many paths [`SkillSnapshot::changed`] looks at.
    pub(crate) fn watched(&self) -> usize {
        self.watch.len()
    }

    #[cfg(test)]
    /// Whether a skill file changed since this snapshot was taken.
    pub(crate) fn is_stale(&self, catalog: &SkillCatalog) -> bool {
        catalog.fingerprint() != self.fingerprint
    }

    #[cfg(test)]
    /// Rebuilds the snapshot when a skill file changed; true when it did.
    pub(crate) fn refresh_if_changed(&mut self, catalog: &SkillCatalog) -> bool {
        if !self.is_stale(catalog) {
            return false;
        }
        *self = Self::build(catalog);
        true
    }

    /// Names of the environment variables any skill requires (`requires.env`), listed or not:
    /// their values must be kept out of prompts and transcripts.
    pub fn required_env_names(&self) -> Vec<String> {
        self.env_names.clone()
    }
}

/// The compact XML list of `skills`; `""` when there is none.
pub fn render_xml(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(OPEN);
    for skill in skills {
        out.push_str(&skill_xml(skill));
    }
    out.push_str(CLOSE);
    out
}

/// One `<skill>` line, newline included; the description on one line, cut at
/// [`MAX_DESCRIPTION_CHARS`].
pub(super) fn skill_xml(skill: &Skill) -> String {
    let words: Vec<&str> = skill.description.split_whitespace().collect();
    let mut description = words.join(" ");
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        description = description
            .chars()
            .take(MAX_DESCRIPTION_CHARS - 1)
            .collect();
        description.push('…');
    }
    format!(
        "<skill><name>{}</name><description>{}</description><location>{}</location></skill>\n",
        escape(&skill.name),
        escape(&description),
        escape(&skill.location)
    )
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}
