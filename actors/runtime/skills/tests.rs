//! Unit tests of skills: the fixture here; `scan` (sources, precedence, parsing, gating) and
//! `snapshot` (staleness, caps, XML, locations the model can read, the shipped skills).

mod scan;
mod snapshot;

use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A tempdir with a workspace, a home, managed/bundled/extra folders and a `bin/` for `PATH`.
pub(crate) struct Fx {
    dir: TempDir,
}

impl Fx {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["ws", "home", "managed", "bundled", "extra", "bin"] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    /// Writes `<root>/<folder>/SKILL.md` with the given frontmatter lines and a short body.
    pub(crate) fn skill(&self, root: &str, folder: &str, frontmatter: &str) -> PathBuf {
        let text = format!("---\n{frontmatter}\n---\n# {folder}\n\nDo the {folder} thing.\n");
        self.raw(root, folder, &text)
    }

    pub(crate) fn raw(&self, root: &str, folder: &str, text: &str) -> PathBuf {
        let dir = self.path(root).join(folder);
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(SKILL_FILE);
        fs::write(&file, text).unwrap();
        file
    }

    /// A catalog over the fixture's folders, `HOME` and `PATH` pointing into it, on linux.
    pub(crate) fn catalog(&self, vars: &[(&str, &str)]) -> SkillCatalog {
        let mut env = vec![
            ("HOME".to_string(), self.path("home").display().to_string()),
            ("PATH".to_string(), self.path("bin").display().to_string()),
        ];
        env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        SkillCatalog {
            workspace: self.path("ws"),
            managed_dir: Some(self.path("managed")),
            bundled_dir: Some(self.path("bundled")),
            extra_dirs: vec![self.path("extra")],
            allow: None,
            settings: toml::Table::new(),
            env: SkillEnv::fixed(env, "linux"),
        }
    }

    fn program(&self, name: &str) {
        let path = self.path("bin").join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

pub(crate) fn desc(text: &str) -> String {
    format!("description: {text}")
}

fn found<'a>(scan: &'a ScanResult, name: &str, source: SkillSource) -> &'a FoundSkill {
    scan.skills
        .iter()
        .find(|f| f.skill.name == name && f.skill.source == source)
        .unwrap_or_else(|| panic!("{name} from {source} must be found: {scan:#?}"))
}
