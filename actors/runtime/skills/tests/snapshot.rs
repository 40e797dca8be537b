//! Snapshots: staleness, caps, the XML list, the shipped skills.

use super::*;
use std::sync::Arc;

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
fn the_shipped_skills_parse_and_are_visible_with_no_special_env() {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
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

#[test]
fn each_session_keeps_its_snapshot_until_a_skill_changes() {
    let fx = Fx::new();
    let file = fx.skill("bundled", "notes", &desc("old text"));
    let agent = AgentSkills::new(fx.catalog(&[]));
    let a = agent.snapshot_for("a");
    assert!(
        Arc::ptr_eq(&a, &agent.snapshot_for("b")),
        "unchanged: one shared snapshot"
    );
    assert!(Arc::ptr_eq(&a, &agent.snapshot_for("a")));
    fs::write(&file, "---\ndescription: new, longer text\n---\nbody\n").unwrap();
    let a2 = agent.snapshot_for("a");
    assert_ne!(*a2, *a, "the next turn of an old session sees the change");
    assert!(
        agent.xml_for("c").contains("new, longer text"),
        "a new session too"
    );
    assert!(
        fs::read_to_string(fx.path("ws/.skills/notes/SKILL.md"))
            .unwrap()
            .contains("new, longer text"),
        "the copy the model reads is refreshed"
    );
    agent.end_session("a");
}

/// The per-turn check is one `stat` per watched path: every kind of change the fingerprint
/// sees is seen by the next `snapshot_for`, and nothing else rebuilds the snapshot.
#[test]
fn the_next_turn_sees_every_kind_of_skill_change_through_the_watch() {
    let fx = Fx::new();
    let notes = fx.skill("ws/skills", "notes", &desc("first version"));
    fx.skill("bundled", "web", &desc("bundled web"));
    fs::create_dir_all(fx.path("extra/empty")).unwrap();
    let agent = AgentSkills::new(fx.catalog(&[]));
    let first = agent.snapshot_for("s");
    assert!(first.watched() > 0, "the snapshot watches its sources");
    assert!(
        Arc::ptr_eq(&first, &agent.snapshot_for("s")),
        "nothing changed: the same snapshot, not rebuilt"
    );
    let mut last = first;
    let mut next = |what: &str| {
        let now = agent.snapshot_for("s");
        assert!(
            !Arc::ptr_eq(&now, &last),
            "{what}: the next turn rebuilt the snapshot"
        );
        assert!(
            Arc::ptr_eq(&now, &agent.snapshot_for("s")),
            "{what}: rebuilt once, then held"
        );
        last = now.clone();
        now.render_xml()
    };

    // An edited SKILL.md.
    fs::write(
        &notes,
        "---\ndescription: second, longer version\n---\nbody\n",
    )
    .unwrap();
    assert!(next("edited").contains("second, longer version"));
    // A new skill folder in a source that had one.
    fx.skill("ws/skills", "added", &desc("added later"));
    assert!(next("new folder").contains("added later"));
    // A SKILL.md written into a folder that had none.
    fs::write(
        fx.path("extra/empty/SKILL.md"),
        "---\ndescription: now a skill\n---\nbody\n",
    )
    .unwrap();
    assert!(next("SKILL.md added").contains("now a skill"));
    // A source folder that did not exist when the snapshot was taken.
    fx.skill("ws/.agents/skills", "agents-skill", &desc("from .agents"));
    assert!(next("new source folder").contains("from .agents"));
    // A removed skill.
    fs::remove_dir_all(fx.path("ws/skills/added")).unwrap();
    assert!(!next("removed").contains("added later"));
    // The copy under .skills/ edited by hand is put back by the rebuild.
    let copy = fx.path("ws/.skills/web/SKILL.md");
    fs::remove_file(&copy).unwrap();
    fs::write(&copy, "tampered").unwrap();
    next("copy edited");
    assert!(
        fs::read_to_string(&copy).unwrap().contains("bundled web"),
        "the copy the model reads is restored"
    );
}

/// A source that is a symlink, pointed at another folder, is a change although no file under
/// either folder changed.
#[cfg(unix)]
#[test]
fn a_source_symlink_pointed_elsewhere_is_a_change() {
    let fx = Fx::new();
    fx.skill("one", "alpha", &desc("from one"));
    fx.skill("two", "beta", &desc("from two"));
    std::os::unix::fs::symlink(fx.path("one"), fx.path("link")).unwrap();
    let mut catalog = fx.catalog(&[]);
    catalog.extra_dirs = vec![fx.path("link")];
    let agent = AgentSkills::new(catalog);
    assert!(agent.xml_for("s").contains("from one"));
    fs::remove_file(fx.path("link")).unwrap();
    std::os::unix::fs::symlink(fx.path("two"), fx.path("link")).unwrap();
    let xml = agent.xml_for("s");
    assert!(
        xml.contains("from two") && !xml.contains("from one"),
        "{xml}"
    );
}
