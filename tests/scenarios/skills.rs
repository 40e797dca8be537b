//! `clawbus skills`: the real binary lists every skill, its source, and why a hidden one is hidden.

use crate::support::Project;
use std::process::{Command, Output};

fn clawbus(project: &Project, home: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawbus"));
    cmd.current_dir(project.path())
        .env_remove("CLAWBUS_CONFIG")
        .env_remove("CLAWBUS_AGENTS")
        .env_remove("CLAWBUS_STATE_DIR")
        .env_remove("CLAWBUS_MODEL")
        .env_remove("SKILLTEST_GEMINI_KEY")
        .env("HOME", home)
        .env("RUST_LOG", "warn");
    cmd
}

fn skill(project: &Project, dir: &str, frontmatter: &str) {
    project.write(
        &format!("{dir}/SKILL.md"),
        &format!("---\n{frontmatter}\n---\n# Body\n"),
    );
}

/// A project whose bundled `skills/` (next to clawbus.toml) holds one skill per reason.
fn project() -> Project {
    let project = Project::new();
    let other_os = if cfg!(target_os = "macos") {
        "linux"
    } else {
        "darwin"
    };
    project
        .write("clawbus.toml", "[skills]\nextra_dirs = [\"more-skills\"]\n")
        .write(
            "agents.d/x.toml",
            "description = \"x\"\n\n[skills]\nallow = [\"shared\", \"uvtool\", \"gem\", \"mac\", \"plain\", \"extra-one\"]\n",
        );
    skill(
        &project,
        "agents.d/x/skills/shared",
        "name: shared\ndescription: the agent's own",
    );
    skill(
        &project,
        "skills/shared",
        "name: shared\ndescription: bundled copy",
    );
    skill(
        &project,
        "skills/uvtool",
        "name: uvtool\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      bins: [uv-not-installed-here]",
    );
    skill(
        &project,
        "skills/gem",
        "name: gem\ndescription: d\nmetadata: {\"openclaw\": {\"requires\": {\"env\": [\"SKILLTEST_GEMINI_KEY\"]}}}",
    );
    skill(
        &project,
        "skills/mac",
        &format!("name: mac\ndescription: d\nmetadata:\n  openclaw:\n    os: [{other_os}]"),
    );
    skill(
        &project,
        "skills/plain",
        "name: plain\ndescription: always there",
    );
    skill(
        &project,
        "skills/unlisted",
        "name: unlisted\ndescription: d",
    );
    skill(
        &project,
        "more-skills/extra-one",
        "name: extra-one\ndescription: d",
    );
    project.write(
        "skills/broken/SKILL.md",
        "---\nname: broken\ndescription: [oops\n---\n",
    );
    project
}

fn run(cmd: &mut Command) -> (Output, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "clawbus skills must succeed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, stdout)
}

#[test]
fn skills_command_shows_each_skill_source_and_why_it_is_hidden() {
    let project = project();
    let home = tempfile::tempdir().unwrap();
    let other_os = if cfg!(target_os = "macos") {
        "linux"
    } else {
        "darwin"
    };
    let (_, stdout) = run(clawbus(&project, home.path()).args(["skills", "--agent", "x"]));
    let line = |name: &str, source: &str| {
        stdout
            .lines()
            .find(|l| {
                let mut words = l.split_whitespace().skip(1);
                words.next() == Some(name) && words.next() == Some(source)
            })
            .unwrap_or_else(|| panic!("a line for {name} from {source}:\n{stdout}"))
            .to_string()
    };
    assert!(line("shared", "workspace").contains("✓ shared"), "{stdout}");
    assert!(line("shared", "workspace").contains("skills/shared/SKILL.md"));
    assert!(
        line("shared", "bundled").ends_with("shadowed by workspace"),
        "{stdout}"
    );
    assert!(line("uvtool", "bundled").ends_with("missing bin uv-not-installed-here"));
    assert!(line("gem", "bundled").ends_with("env SKILLTEST_GEMINI_KEY unset"));
    assert!(line("mac", "bundled").ends_with(&format!("os {other_os}")));
    assert!(line("unlisted", "bundled").ends_with("not in the agent's skills.allow"));
    assert!(
        line("plain", "bundled").contains(".skills/plain/SKILL.md"),
        "{stdout}"
    );
    assert!(line("extra-one", "extra").starts_with("  ✓"), "{stdout}");
    assert!(
        stdout.contains("broken/SKILL.md:3"),
        "the malformed skill is reported with its line:\n{stdout}"
    );
    assert!(
        !project.state_dir().join("workspaces").exists(),
        "listing skills creates nothing"
    );
}

#[test]
fn skills_json_says_visible_and_reasons() {
    let project = project();
    let home = tempfile::tempdir().unwrap();
    let (_, stdout) = run(clawbus(&project, home.path())
        .args(["skills", "--json"])
        .env("SKILLTEST_GEMINI_KEY", "set"));
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let agents = value.as_array().unwrap();
    assert_eq!(agents.len(), 1);
    let skills = agents[0]["skills"].as_array().unwrap();
    let gem = skills.iter().find(|s| s["name"] == "gem").unwrap();
    assert_eq!(gem["visible"], true, "the env var is set now: {gem}");
    assert_eq!(gem["source"], "bundled");
    let uv = skills.iter().find(|s| s["name"] == "uvtool").unwrap();
    assert_eq!(uv["visible"], false);
    assert_eq!(uv["reasons"][0], "missing bin uv-not-installed-here");
    assert!(
        agents[0]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("broken")
    );
}

#[test]
fn skills_for_an_unknown_agent_is_a_usage_error() {
    let project = project();
    let home = tempfile::tempdir().unwrap();
    let out = clawbus(&project, home.path())
        .args(["skills", "--agent", "nobody"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent \"nobody\""));
}

#[test]
fn check_points_at_a_bad_skills_setting() {
    let project = Project::new();
    project
        .write("clawbus.toml", "[skills]\nbundled_dir = \"\"\n")
        .write("agents.d/x.toml", "[skills]\nallow = [\"ok\", \"../up\"]\n");
    let home = tempfile::tempdir().unwrap();
    let out = clawbus(&project, home.path())
        .arg("check")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("clawbus.toml:2:15: field \"skills.bundled_dir\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("x.toml:2:16: field \"skills.allow\""),
        "{stdout}"
    );
}
