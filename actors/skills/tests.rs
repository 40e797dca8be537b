//! Unit tests of skills: precedence, gating, caps, snapshots, locations, bundled skills.

use super::*;
use crate::tools::Tool;
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A tempdir with a workspace, a home, managed/bundled/extra folders and a `bin/` for `PATH`.
struct Fx {
    dir: TempDir,
}

impl Fx {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["ws", "home", "managed", "bundled", "extra", "bin"] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    /// Writes `<root>/<folder>/SKILL.md` with the given frontmatter lines and a short body.
    fn skill(&self, root: &str, folder: &str, frontmatter: &str) -> PathBuf {
        let text = format!("---\n{frontmatter}\n---\n# {folder}\n\nDo the {folder} thing.\n");
        self.raw(root, folder, &text)
    }

    fn raw(&self, root: &str, folder: &str, text: &str) -> PathBuf {
        let dir = self.path(root).join(folder);
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(SKILL_FILE);
        fs::write(&file, text).unwrap();
        file
    }

    /// A catalog over the fixture's folders, `HOME` and `PATH` pointing into it, on linux.
    fn catalog(&self, vars: &[(&str, &str)]) -> SkillCatalog {
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

fn desc(text: &str) -> String {
    format!("description: {text}")
}

fn found<'a>(scan: &'a ScanResult, name: &str, source: SkillSource) -> &'a FoundSkill {
    scan.skills
        .iter()
        .find(|f| f.skill.name == name && f.skill.source == source)
        .unwrap_or_else(|| panic!("{name} from {source} must be found: {scan:#?}"))
}

#[test]
fn the_same_name_in_three_sources_is_won_whole_by_the_highest() {
    let fx = Fx::new();
    fx.skill(
        "ws/skills",
        "weather",
        "name: weather\ndescription: from the workspace",
    );
    fx.skill(
        "home/.agents/skills",
        "weather",
        "name: weather\ndescription: personal",
    );
    fx.skill(
        "bundled",
        "weather-bundled",
        "name: weather\ndescription: bundled\nmetadata:\n  openclaw:\n    requires:\n      bins: [curl]",
    );
    let scan = fx.catalog(&[]).scan();
    let listed: Vec<&Skill> = scan.visible().collect();
    assert_eq!(listed.len(), 1, "one name, one listed skill: {scan:#?}");
    assert_eq!(listed[0].source, SkillSource::Workspace);
    assert_eq!(listed[0].description, "from the workspace");
    assert_eq!(
        listed[0].requires,
        Requirements::default(),
        "no merge: the bundled skill's requirements are not carried over"
    );
    assert_eq!(listed[0].location, "skills/weather/SKILL.md");
    assert!(!listed[0].materialised);
    for loser in [SkillSource::PersonalAgents, SkillSource::Bundled] {
        assert_eq!(
            found(&scan, "weather", loser).reasons,
            ["shadowed by workspace"]
        );
    }
}

#[test]
fn sources_rank_workspace_agents_personal_managed_bundled_extra() {
    let fx = Fx::new();
    let roots = [
        ("extra", SkillSource::Extra),
        ("bundled", SkillSource::Bundled),
        ("managed", SkillSource::Managed),
        ("home/.agents/skills", SkillSource::PersonalAgents),
        ("ws/.agents/skills", SkillSource::WorkspaceAgents),
    ];
    // Skill `s<i>` exists in the i-th lowest sources: each time the higher one must win.
    for (i, (root, _)) in roots.iter().enumerate() {
        for j in i..roots.len() {
            fx.skill(root, &format!("s{j}"), &desc(root));
        }
    }
    let scan = fx.catalog(&[]).scan();
    for (j, (_, source)) in roots.iter().enumerate() {
        let winner = scan.visible().find(|s| s.name == format!("s{j}")).unwrap();
        assert_eq!(winner.source, *source, "s{j}: {scan:#?}");
    }
    let order: Vec<SkillSource> = scan.visible().map(|s| s.source).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "the list runs in source precedence order");
}

#[test]
fn a_missing_bin_hides_a_skill_until_it_is_on_path() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "transcribe",
        "description: d\nmetadata:\n  openclaw:\n    requires:\n      bins: [uv, ffmpeg]",
    );
    fx.program("ffmpeg");
    let scan = fx.catalog(&[]).scan();
    assert_eq!(
        found(&scan, "transcribe", SkillSource::Bundled).reasons,
        ["missing bin uv"]
    );
    fx.program("uv");
    assert_eq!(fx.catalog(&[]).scan().visible().count(), 1);
}

#[test]
fn any_bins_needs_one_of_them() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "fetch",
        "description: d\nmetadata: {\"openclaw\": {\"requires\": {\"anyBins\": [\"curl\", \"wget\"]}}}",
    );
    let scan = fx.catalog(&[]).scan();
    assert_eq!(
        found(&scan, "fetch", SkillSource::Bundled).reasons,
        ["missing any of bins curl, wget"]
    );
    fx.program("wget");
    assert_eq!(fx.catalog(&[]).scan().visible().count(), 1);
}

#[test]
fn an_unset_or_empty_env_var_hides_a_skill() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "gemini",
        "description: d\nmetadata:\n  openclaw:\n    requires:\n      env: GEMINI_API_KEY",
    );
    for vars in [&[][..], &[("GEMINI_API_KEY", "")][..]] {
        let scan = fx.catalog(vars).scan();
        assert_eq!(
            found(&scan, "gemini", SkillSource::Bundled).reasons,
            ["env GEMINI_API_KEY unset"],
            "{vars:?}"
        );
        assert_eq!(scan.required_env_names(), ["GEMINI_API_KEY"]);
    }
    let scan = fx.catalog(&[("GEMINI_API_KEY", "k")]).scan();
    assert_eq!(scan.visible().count(), 1);
}

#[test]
fn another_os_hides_a_skill() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "imsg",
        "description: d\nmetadata:\n  openclaw:\n    os: [macos]",
    );
    let mut catalog = fx.catalog(&[]);
    let scan = catalog.scan();
    assert_eq!(
        found(&scan, "imsg", SkillSource::Bundled).reasons,
        ["os darwin"]
    );
    catalog.env.os = "darwin".to_string();
    assert_eq!(catalog.scan().visible().count(), 1);
}

#[test]
fn falsy_config_paths_hide_a_skill() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "search",
        "description: d\nmetadata:\n  openclaw:\n    requires:\n      config: [web.search.brave_base_url, web.enabled]",
    );
    let mut catalog = fx.catalog(&[]);
    let scan = catalog.scan();
    assert_eq!(
        found(&scan, "search", SkillSource::Bundled).reasons,
        [
            "config web.search.brave_base_url is falsy",
            "config web.enabled is falsy"
        ]
    );
    catalog.settings =
        toml::from_str("[web]\nenabled = false\n[web.search]\nbrave_base_url = \"http://x\"\n")
            .unwrap();
    let scan = catalog.scan();
    assert_eq!(
        found(&scan, "search", SkillSource::Bundled).reasons,
        ["config web.enabled is falsy"]
    );
    catalog.settings =
        toml::from_str("[web]\nenabled = true\n[web.search]\nbrave_base_url = \"http://x\"\n")
            .unwrap();
    assert_eq!(catalog.scan().visible().count(), 1);
}

#[test]
fn always_skips_the_requirements_but_not_the_allow_list() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "core",
        "description: d\nmetadata:\n  openclaw:\n    always: true\n    os: [win32]\n    requires:\n      bins: [nope]",
    );
    fx.skill("bundled", "other", "description: d");
    let mut catalog = fx.catalog(&[]);
    assert_eq!(catalog.scan().visible().count(), 2);
    catalog.allow = Some(vec!["other".to_string()]);
    let scan = catalog.scan();
    assert_eq!(
        found(&scan, "core", SkillSource::Bundled).reasons,
        ["not in the agent's skills.allow"]
    );
    assert!(found(&scan, "other", SkillSource::Bundled).is_visible());
}

#[test]
fn malformed_frontmatter_skips_that_skill_with_file_and_line() {
    let fx = Fx::new();
    let bad = fx.raw(
        "bundled",
        "broken",
        "---\nname: broken\ndescription: fine\nmetadata:\n\topenclaw: {}\n---\nbody\n",
    );
    let unclosed = fx.raw(
        "bundled",
        "unclosed",
        "---\nname: unclosed\ndescription: d\n",
    );
    let bad_json = fx.raw(
        "bundled",
        "badjson",
        "---\nname: badjson\ndescription: d\nmetadata: '{\"openclaw\": '\n---\n",
    );
    fx.skill("bundled", "good", &desc("still loads"));
    let scan = fx.catalog(&[]).scan();
    let names: Vec<&str> = scan.visible().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"], "{scan:#?}");
    let warning = |file: &Path, line: usize| {
        let prefix = format!("{}:{line}", file.display());
        assert!(
            scan.warnings.iter().any(|w| w.starts_with(&prefix)),
            "a warning must start with {prefix}: {:#?}",
            scan.warnings
        );
    };
    warning(&bad, 5);
    warning(&unclosed, 1);
    warning(&bad_json, 4);
}

#[test]
fn a_skill_file_over_256_kb_is_skipped_with_a_warning() {
    let fx = Fx::new();
    let body = "x".repeat(300 * 1024);
    let big = fx.raw(
        "bundled",
        "big",
        &format!("---\ndescription: d\n---\n{body}\n"),
    );
    fx.skill("bundled", "small", &desc("d"));
    let scan = fx.catalog(&[]).scan();
    assert_eq!(
        scan.visible().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["small"]
    );
    assert!(
        scan.warnings
            .iter()
            .any(|w| w.starts_with(&big.display().to_string()) && w.contains("262144")),
        "{:#?}",
        scan.warnings
    );
}

#[test]
fn a_changed_skill_file_makes_the_snapshot_stale_and_is_picked_up() {
    let fx = Fx::new();
    let file = fx.skill("ws/skills", "notes", &desc("first version"));
    fx.skill("bundled", "web", &desc("bundled"));
    let catalog = fx.catalog(&[]);
    let mut snapshot = SkillSnapshot::build(&catalog);
    let old = snapshot.clone();
    assert!(!snapshot.is_stale(&catalog), "nothing changed yet");
    assert!(!snapshot.refresh_if_changed(&catalog));
    fs::write(
        &file,
        "---\ndescription: second, longer version\n---\nbody\n",
    )
    .unwrap();
    assert!(snapshot.is_stale(&catalog));
    assert!(snapshot.refresh_if_changed(&catalog));
    assert_ne!(snapshot, old);
    assert!(snapshot.render_xml().contains("second, longer version"));
    assert!(
        !snapshot.is_stale(&catalog),
        "a fresh snapshot is not stale"
    );

    fx.skill("managed", "added", &desc("a new skill"));
    let session = SkillSession::start(catalog);
    assert!(!session.refresh_if_changed());
    fs::remove_dir_all(fx.path("managed/added")).unwrap();
    assert!(session.refresh_if_changed(), "a removed skill is a change");
    assert!(!session.snapshot().render_xml().contains("added"));
}

#[test]
fn two_hundred_skills_list_at_most_150_within_30000_chars() {
    let fx = Fx::new();
    for i in 0..200 {
        fx.skill("bundled", &format!("skill-{i:03}"), &desc("short"));
    }
    let snapshot = SkillSnapshot::build(&fx.catalog(&[]));
    assert_eq!(snapshot.skills.len(), MAX_LISTED);
    assert!(snapshot.render_xml().chars().count() <= MAX_LIST_CHARS);
    assert_eq!(
        snapshot.skills[0].name, "skill-000",
        "name order within a source"
    );

    let fx = Fx::new();
    let long = "word ".repeat(200);
    for i in 0..200 {
        fx.skill("bundled", &format!("skill-{i:03}"), &desc(&long));
    }
    let catalog = fx.catalog(&[]);
    let xml = SkillSnapshot::build(&catalog).render_xml();
    let chars = xml.chars().count();
    assert!(chars <= MAX_LIST_CHARS, "{chars} chars");
    assert!(chars > MAX_LIST_CHARS - 1200, "the budget is used: {chars}");
    let scan = catalog.scan();
    let cut = scan.skills.iter().filter(|f| !f.is_visible()).count();
    assert!(cut > 50, "most skills are over the budget");
    assert!(scan.skills.iter().all(|f| f.is_visible()
        || f.reasons
            == [format!(
                "over the {MAX_LIST_CHARS}-character budget of the skills list"
            )]));
}

#[test]
fn the_list_is_compact_escaped_xml() {
    let skill = Skill {
        name: "a&b".to_string(),
        description: "Use <this>\n  when \"x\" & 'y'".to_string(),
        source: SkillSource::Workspace,
        dir: PathBuf::new(),
        file: PathBuf::new(),
        location: "skills/a&b/SKILL.md".to_string(),
        materialised: false,
        requires: Requirements::default(),
        os: Vec::new(),
        always: false,
    };
    assert_eq!(
        render_xml(&[skill]),
        "<available_skills>\n<skill><name>a&amp;b</name><description>Use &lt;this&gt; when &quot;x&quot; &amp; &apos;y&apos;</description><location>skills/a&amp;b/SKILL.md</location></skill>\n</available_skills>"
    );
    assert_eq!(render_xml(&[]), "", "no skills, no list");
}

#[tokio::test]
async fn the_model_can_read_every_location_it_is_given() {
    let fx = Fx::new();
    fx.skill("ws/skills", "local", &desc("in the workspace"));
    fx.skill("bundled", "outside", &desc("outside the workspace"));
    fs::create_dir_all(fx.path("bundled/outside/scripts")).unwrap();
    fs::write(fx.path("bundled/outside/scripts/run.sh"), "echo hi\n").unwrap();
    let snapshot = SkillSnapshot::build(&fx.catalog(&[]));
    let outside = snapshot
        .skills
        .iter()
        .find(|s| s.name == "outside")
        .unwrap();
    assert_eq!(outside.location, ".skills/outside/SKILL.md");
    assert!(outside.materialised);
    let ctx = crate::tools::ToolContext {
        workspace: fx.path("ws"),
        agent: "a".to_string(),
        session: "s".to_string(),
        channel: "test".to_string(),
    };
    for skill in &snapshot.skills {
        let args = serde_json::json!({ "path": skill.location });
        let out = crate::tools::ReadTool.call(&ctx, args).await;
        assert!(!out.is_error, "{}: {}", skill.location, out.text);
        assert!(
            out.text.contains(&format!("Do the {} thing.", skill.name)),
            "{}",
            out.text
        );
    }
    assert_eq!(
        fs::read_to_string(fx.path("ws/.skills/outside/scripts/run.sh")).unwrap(),
        "echo hi\n",
        "the skill's other files are copied too"
    );
}

#[test]
fn skill_copies_follow_the_snapshot_and_never_a_planted_symlink() {
    let fx = Fx::new();
    fx.skill("bundled", "one", &desc("d"));
    fx.skill("bundled", "two", &desc("d"));
    let mut catalog = fx.catalog(&[]);
    SkillSnapshot::build(&catalog);
    assert!(fx.path("ws/.skills/two/SKILL.md").is_file());
    catalog.allow = Some(vec!["one".to_string()]);
    SkillSnapshot::build(&catalog);
    assert!(
        !fx.path("ws/.skills/two").exists(),
        "a hidden skill's copy is removed"
    );

    #[cfg(unix)]
    {
        let target = fx.path("elsewhere");
        fs::create_dir_all(&target).unwrap();
        fs::remove_dir_all(fx.path("ws/.skills/one")).unwrap();
        std::os::unix::fs::symlink(&target, fx.path("ws/.skills/one")).unwrap();
        let snapshot = SkillSnapshot::build(&catalog);
        assert!(snapshot.warnings.is_empty(), "{:?}", snapshot.warnings);
        assert_eq!(
            fs::read_dir(&target).unwrap().count(),
            0,
            "nothing written through the link"
        );
        assert!(fx.path("ws/.skills/one/SKILL.md").is_file());
    }
}

#[test]
fn metadata_may_be_a_json_string() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "j",
        "description: d\nmetadata: '{\"openclaw\": {\"requires\": {\"env\": [\"J_KEY\"]}, \"os\": [\"linux\"]}}'",
    );
    let scan = fx.catalog(&[]).scan();
    let j = found(&scan, "j", SkillSource::Bundled);
    assert_eq!(j.skill.requires.env, ["J_KEY"]);
    assert_eq!(j.skill.os, ["linux"]);
    assert_eq!(j.reasons, ["env J_KEY unset"]);
}

#[test]
fn a_skill_without_description_or_with_a_bad_name_is_skipped() {
    let fx = Fx::new();
    let nodesc = fx.skill("bundled", "nodesc", "name: nodesc");
    let badname = fx.skill("bundled", "bad", "name: ../../etc\ndescription: d");
    let scan = fx.catalog(&[]).scan();
    assert_eq!(scan.skills.len(), 0);
    assert!(
        scan.warnings
            .iter()
            .any(|w| w.starts_with(&format!("{}:1:", nodesc.display())))
    );
    assert!(
        scan.warnings
            .iter()
            .any(|w| w.starts_with(&format!("{}:2:", badname.display())))
    );
}

#[test]
fn the_shipped_skills_parse_and_are_visible_with_no_special_env() {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    let ws = tempfile::tempdir().unwrap();
    let catalog = SkillCatalog {
        workspace: ws.path().to_path_buf(),
        managed_dir: None,
        bundled_dir: Some(bundled),
        extra_dirs: Vec::new(),
        allow: None,
        settings: toml::Table::new(),
        env: SkillEnv::fixed(Vec::<(String, String)>::new(), current_os()),
    };
    let scan = catalog.scan();
    assert!(scan.warnings.is_empty(), "{:#?}", scan.warnings);
    let names: Vec<&str> = scan.visible().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["daily-log", "summarize-page", "task-triage"],
        "{scan:#?}"
    );
    for skill in scan.visible() {
        assert!(
            skill.description.len() > 40,
            "{} needs a real description",
            skill.name
        );
    }
}
