//! `[sandbox]`: strict defaults, the agent's settings over `clawbus.toml`'s, where each was set,
//! and every bad value placed.

use super::Fixture;
use crate::config::{NetworkMode, SandboxMode, WorkspaceAccess, load};
use std::time::Duration;

#[test]
fn defaults_are_off_strict_and_marked_as_defaults() {
    let fx = Fixture::new();
    fx.write("agents.d/a.toml", "");
    let config = load(&fx.opts()).unwrap();
    let s = &config.agent("a").unwrap().sandbox;
    assert_eq!(s.mode.value, SandboxMode::Off);
    assert_eq!(s.network.value, NetworkMode::None, "no network by default");
    assert!(s.env.value.is_empty(), "no variable passes by default");
    assert!(s.binds.value.is_empty());
    assert_eq!(s.max_processes.source(), "default");
    assert!(!s.applies(false) && !s.applies(true));
}

#[test]
fn agent_settings_override_the_gateway_defaults_field_by_field() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[sandbox]\nmode = \"all\"\nmemory_mb = 256\nenv = [\"LANG\"]\n",
    );
    fx.write(
        "agents.d/a.toml",
        "[sandbox]\nmode = \"non-main\"\nworkspace = \"ro\"\ntimeout = \"5s\"\nbinds = [\"/opt/data:ro\", \"/srv/out:rw\"]\n",
    );
    fx.write("agents.d/b.toml", "");
    let config = load(&fx.opts()).unwrap();
    let a = &config.agent("a").unwrap().sandbox;
    assert_eq!(a.mode.value, SandboxMode::NonMain);
    assert!(
        a.applies(false) && !a.applies(true),
        "non-main spares the main session only"
    );
    assert_eq!(a.workspace.value, WorkspaceAccess::Ro);
    assert_eq!(
        a.memory_mb.value, 256,
        "unset in the agent: clawbus.toml's value"
    );
    assert_eq!(a.timeout.value, Duration::from_secs(5));
    assert_eq!(a.binds.value.len(), 2);
    assert!(a.binds.value[1].writable && !a.binds.value[0].writable);
    let rel = |s: String| s.replace(&format!("{}/", fx.dir.path().display()), "");
    assert_eq!(rel(a.mode.source()), "agents.d/a.toml:2:8");
    assert_eq!(rel(a.memory_mb.source()), "clawbus.toml:3:13");
    assert_eq!(a.cpu_seconds.source(), "default");
    let b = &config.agent("b").unwrap().sandbox;
    assert_eq!(b.mode.value, SandboxMode::All);
    assert_eq!(b.env.value, ["LANG"]);
    assert_eq!(config.sandbox.mode.value, SandboxMode::All);
}

#[test]
fn every_bad_sandbox_value_is_placed() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[sandbox]\nmode = \"sometimes\"\nnetwork = \"allow\"\nbackend = \"docker\"\n",
    );
    fx.write(
        "agents.d/a.toml",
        "[sandbox]\nworkspace = \"rwx\"\ncpu_seconds = 0\nmemory_mb = -5\ntimeout = \"0s\"\nenv = [\"lower\"]\nbinds = [\"rel/path:ro\", \"/x\", \"/a/../b:rw\"]\n",
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    let expected = [
        "clawbus.toml:2:8: field \"sandbox.mode\": unknown value \"sometimes\" (expected one of: off, non-main, all)",
        "clawbus.toml:3:11: field \"sandbox.network\": network = \"allow\" needs the names it allows",
        "clawbus.toml:3:11: field \"sandbox.network\": network = \"allow\" is not supported with backend \"docker\" yet",
        "agents.d/a.toml:2:13: field \"sandbox.workspace\": unknown value \"rwx\" (expected one of: none, ro, rw)",
        "agents.d/a.toml:3:15: field \"sandbox.cpu_seconds\": 0 is out of range",
        "agents.d/a.toml:4:13: field \"sandbox.memory_mb\": -5 is out of range",
        "agents.d/a.toml:5:11: field \"sandbox.timeout\":",
        "agents.d/a.toml:6:8: field \"sandbox.env\": \"lower\" is not an environment variable name",
        "agents.d/a.toml:7:10: field \"sandbox.binds\": \"rel/path:ro\" is not an absolute path",
        "agents.d/a.toml:7:25: field \"sandbox.binds\": \"/x\" has no :ro or :rw",
        "agents.d/a.toml:7:31: field \"sandbox.binds\": \"/a/../b:rw\" contains \"..\"",
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(want), "{line:?} must start with {want:?}");
    }
}

#[test]
fn unknown_sandbox_fields_are_refused() {
    let fx = Fixture::new();
    fx.write("agents.d/a.toml", "[sandbox]\nnetwrk = \"none\"\n");
    let lines = fx.lines(&fx.errors(&fx.opts()));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].starts_with("agents.d/a.toml:2:1:"), "{lines:#?}");
    assert!(lines[0].contains("netwrk"), "{lines:#?}");
}

#[test]
fn allow_takes_domain_patterns_and_needs_at_least_one() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[sandbox]\nnetwork = \"allow\"\nallow_domains = [\"Example.COM\", \"*.pypi.org\"]\n",
    );
    fx.write("agents.d/a.toml", "");
    fx.write("agents.d/b.toml", "[sandbox]\nallow_domains = []\n");
    let lines = fx.lines(&fx.errors(&fx.opts()));
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("clawbus.toml:2:11: field \"sandbox.network\": network = \"allow\" needs the names it allows"),
        "an empty list in the agent's file leaves allow with nothing: {lines:#?}"
    );
    fx.write("agents.d/b.toml", "");
    let config = load(&fx.opts()).unwrap();
    let a = &config.agent("a").unwrap().sandbox;
    assert_eq!(a.network.value, NetworkMode::Allow);
    assert_eq!(a.allow_domains.value, ["example.com", "*.pypi.org"]);
    assert!(a.allows_domain("EXAMPLE.com.") && a.allows_domain("files.pypi.org"));
    assert!(
        !a.allows_domain("pypi.org"),
        "*. is below the name, not the name"
    );
    assert!(!a.allows_domain("www.example.com") && !a.allows_domain("evilpypi.org"));

    fx.write(
        "agents.d/b.toml",
        "[sandbox]\nallow_domains = [\"https://x.com\", \"x.com:443\", \"10.0.0.1\", \"*.*.x.com\", \"\", \"ok.com\"]\nimage = \"--privileged\"\n",
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    let expected = [
        "agents.d/b.toml:2:18: field \"sandbox.allow_domains\": \"https://x.com\" is not a domain pattern",
        "agents.d/b.toml:2:35: field \"sandbox.allow_domains\": \"x.com:443\" is not a domain pattern",
        "agents.d/b.toml:2:48: field \"sandbox.allow_domains\": \"10.0.0.1\" is an IP address",
        "agents.d/b.toml:2:60: field \"sandbox.allow_domains\": \"*.*.x.com\" is not a domain pattern",
        "agents.d/b.toml:2:73: field \"sandbox.allow_domains\": \"\" is not a domain pattern",
        "agents.d/b.toml:3:9: field \"sandbox.image\": \"--privileged\" is not an image reference",
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(want), "{line:?} must start with {want:?}");
    }
}
