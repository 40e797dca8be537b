//! Sources, precedence, frontmatter parsing and gating.

use super::*;

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
fn an_unquoted_colon_in_a_value_is_read_as_openclaw_does() {
    let fx = Fx::new();
    fx.skill(
        "bundled",
        "colon",
        "name: colon\ndescription: Use when: the user asks\nmetadata:\n  openclaw:\n    requires:\n      env: [COLON_KEY]",
    );
    let scan = fx.catalog(&[]).scan();
    assert!(scan.warnings.is_empty(), "{:#?}", scan.warnings);
    let colon = found(&scan, "colon", SkillSource::Bundled);
    assert_eq!(colon.skill.description, "Use when: the user asks");
    assert_eq!(colon.reasons, ["env COLON_KEY unset"]);
}
