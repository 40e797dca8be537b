//! The policy layers: profile → deny → availability → channel.

use super::*;
use crate::tools::tests::{error_message, error_type, fixture};
use crate::tools::*;
use clawbus_core::config::{self, Config, LoadOptions};
use serde_json::json;
use std::fs;
use tempfile::TempDir;

/// Loads `clawbus.toml` and one agent file `a.toml` from a tempdir.
fn load(gateway: &str, agent: &str) -> (TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("agents.d")).unwrap();
    fs::write(dir.path().join("clawbus.toml"), gateway).unwrap();
    fs::write(dir.path().join("agents.d/a.toml"), agent).unwrap();
    let opts = LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: dir.path().join("agents.d"),
        state_dir: Some(dir.path().join("state")),
        model_override: None,
    };
    let config = config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    (dir, config)
}

fn tools_of(config: &Config) -> ToolSet {
    agent_tools(&config.agents[0], config, &ToolServices::default())
}

fn layer_of(set: &ToolSet, tool: &str) -> Option<Layer> {
    set.removed()
        .iter()
        .find(|r| r.tool == tool)
        .map(|r| r.layer)
}

#[test]
fn default_profile_is_coding_and_exec_waits_for_an_allowlist() {
    let (_dir, config) = load("", "");
    let set = tools_of(&config);
    let names = set.names();
    assert_eq!(
        names[..4],
        ["read", "write", "edit", "web_fetch"],
        "files and web, in catalogue order: {names:?}"
    );
    assert!(
        names.contains(&"memory_search") && names.contains(&"memory_get"),
        "{names:?}"
    );
    assert_eq!(
        layer_of(&set, "exec"),
        Some(Layer::Availability),
        "nothing allowed yet"
    );
    assert_eq!(layer_of(&set, "message"), Some(Layer::Profile));
    assert_eq!(layer_of(&set, "cron"), Some(Layer::Profile));
    for name in clawbus_core::config::KNOWN_TOOLS {
        assert!(
            names.contains(name) || layer_of(&set, name).is_some(),
            "{name} is either offered or removed by a named layer"
        );
    }
}

#[tokio::test]
async fn a_tool_removed_at_each_layer_is_not_offered_and_is_refused() {
    let (_dir, config) = load(
        "[channels.telegram]\ndeny_tools = [\"group:fs\"]\n",
        "[tools]\nprofile = \"minimal\"\nallow = [\"group:fs\", \"exec\", \"message\"]\ndeny = [\"write\"]\n[exec]\nsecurity = \"deny\"\n",
    );
    let set = tools_of(&config);
    assert_eq!(set.names(), ["read", "edit", "message"]);
    assert_eq!(layer_of(&set, "web_fetch"), Some(Layer::Profile));
    assert_eq!(layer_of(&set, "write"), Some(Layer::Deny));
    assert_eq!(layer_of(&set, "exec"), Some(Layer::Availability));
    let telegram = set.for_channel("telegram");
    assert_eq!(telegram.names(), ["message"]);
    assert_eq!(layer_of(&telegram, "read"), Some(Layer::Channel));
    assert_eq!(set.for_channel("api").names(), set.names());

    let f = fixture();
    fs::write(f.ws().join("n.txt"), "note").unwrap();
    let cases = [
        ("web_fetch", json!({"url": "http://example.com"}), "profile"),
        ("write", json!({"path": "n.txt", "content": "x"}), "deny"),
        ("exec", json!({"command": "ls"}), "availability"),
    ];
    for (tool, args, layer) in cases {
        let out = set.invoke(&f.ctx, tool, &args.to_string(), 1000).await;
        assert_eq!(error_type(&out), "policy_denied", "{tool}");
        assert!(
            error_message(&out).contains(&format!("the {layer} layer")),
            "{}",
            out.text
        );
    }
    let mut ctx = f.ctx.clone();
    ctx.channel = "telegram".into();
    let out = set.invoke(&ctx, "read", r#"{"path":"n.txt"}"#, 1000).await;
    assert_eq!(
        error_type(&out),
        "policy_denied",
        "the channel layer holds at call time too"
    );
    assert!(
        error_message(&out).contains("[channels.telegram] deny_tools"),
        "{}",
        out.text
    );
    let ok = set
        .invoke(&f.ctx, "read", r#"{"path":"n.txt"}"#, 1000)
        .await;
    assert_eq!(
        ok,
        ToolOutput::ok("note"),
        "the same call from another channel runs"
    );
    assert_eq!(fs::read_to_string(f.ws().join("n.txt")).unwrap(), "note");
}

#[test]
fn unknown_tool_names_and_groups_are_config_problems() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("agents.d")).unwrap();
    fs::write(
        dir.path().join("agents.d/a.toml"),
        "[tools]\nprofile = \"coder\"\nallow = [\"group:nope\", \"web_fetch\"]\n[exec]\nsecurity = \"sometimes\"\nallow = [\"ls\", { program = \"git\", args = \"(\" }, 7]\nenv = [\"lower\"]\n",
    )
    .unwrap();
    let opts = LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: dir.path().join("agents.d"),
        state_dir: None,
        model_override: None,
    };
    let report = config::load(&opts).unwrap_err().render();
    for expected in [
        "a.toml:2:11: field \"tools.profile\": unknown profile \"coder\"",
        "a.toml:3:10: field \"tools.allow\": unknown tool \"group:nope\"",
        "a.toml:5:12: field \"exec.security\": unknown mode \"sometimes\"",
        "a.toml:6:16: field \"exec.allow[1]\": args: invalid regex \"(\": unclosed group",
        "a.toml:6:49: field \"exec.allow[2]\": invalid entry of type integer",
        "a.toml:7:8: field \"exec.env\": \"lower\" is not an environment variable name",
    ] {
        assert!(
            report.contains(expected),
            "missing {expected:?} in:\n{report}"
        );
    }
}

#[test]
fn exec_never_passes_a_secret_variable_to_commands_even_when_listed() {
    let (_dir, config) = load(
        "[gateway]\ntoken_env = \"GW_TOKEN\"\n[providers.remote]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"REMOTE_KEY\"\n",
        "[exec]\nsecurity = \"full\"\nenv = [\"GIT_AUTHOR_NAME\", \"REMOTE_KEY\", \"GW_TOKEN\", \"BRAVE_API_KEY\"]\n",
    );
    let def = super::exec_def(&config.agents[0], &config);
    assert_eq!(def.env, ["GIT_AUTHOR_NAME"]);
    assert_eq!(def.security, config.agents[0].exec.security);
}
