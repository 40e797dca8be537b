//! `[mcp.servers.<name>]` and the MCP entries of tool policies.

use super::Fixture;
use crate::config::{AgentRule, DEFAULT_MCP_TIMEOUT, load, matches};
use std::time::Duration;

#[test]
fn mcp_servers_are_loaded_with_env_names_and_timeout() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[mcp.servers.files]\ncommand = \"python3\"\nargs = [\"-m\", \"srv\"]\nenv = [\"FILES_ROOT\"]\ntimeout = \"5s\"\n\n[mcp.servers.git]\ncommand = \"git-mcp\"\n",
    );
    fx.write(
        "agents.d/a.toml",
        "[tools]\nallow = [\"group:mcp:files\", \"mcp__git__log\"]\ndeny = [\"mcp__files__rm\"]\n",
    );
    let config = load(&fx.opts()).unwrap();
    let files = &config.mcp.servers["files"];
    assert_eq!(files.command, "python3");
    assert_eq!(files.args, ["-m", "srv"]);
    assert_eq!(files.env, ["FILES_ROOT"]);
    assert_eq!(files.timeout, Duration::from_secs(5));
    assert_eq!(config.mcp.servers["git"].timeout, DEFAULT_MCP_TIMEOUT);
    let tools = &config.agent("a").unwrap().tools;
    assert_eq!(tools.rule("mcp__files__ls"), AgentRule::Allowed);
    assert_eq!(tools.rule("mcp__git__log"), AgentRule::Allowed);
    assert_eq!(tools.rule("mcp__git__push"), AgentRule::NotInProfile);
    assert_eq!(
        tools.rule("mcp__files__rm"),
        AgentRule::Denied("mcp__files__rm".into())
    );
}

#[test]
fn mcp_groups_match_by_server() {
    assert!(matches("group:mcp", "mcp__a__x"));
    assert!(!matches("group:mcp", "read"));
    assert!(matches("group:mcp:a", "mcp__a__x"));
    assert!(!matches("group:mcp:a", "mcp__ab__x"));
    assert!(matches("mcp__a__x", "mcp__a__x"));
    assert!(!matches("mcp__a__x", "mcp__a__y"));
    assert!(matches("group:fs", "read"));
}

#[test]
fn bad_mcp_servers_are_reported_in_place() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[mcp.servers.Bad_Name]\ncommand = \"x\"\n\n[mcp.servers.ok]\nenv = [\"sk-secret-value\"]\ntimeout = \"soon\"\nurl = 1\n",
    );
    fx.write("agents.d/a.toml", "[tools]\nallow = [\"group:mcp:Nope\"]\n");
    let report = fx.errors(&fx.opts());
    let text = fx.lines(&report).join("\n");
    assert!(
        text.contains("clawbus.toml:1:14: field \"mcp.servers.Bad_Name\": invalid MCP server name"),
        "{text}"
    );
    assert!(
        text.contains("clawbus.toml:7:1: field \"mcp.servers.ok.url\": unknown field"),
        "{text}"
    );
    assert!(
        text.contains(
            "clawbus.toml:5:8: field \"mcp.servers.ok.env\": not an environment variable name"
        ),
        "{text}"
    );
    assert!(
        !text.contains("sk-secret-value"),
        "a misplaced secret is never echoed: {text}"
    );
    assert!(
        text.contains(
            "agents.d/a.toml:2:10: field \"tools.allow\": unknown tool \"group:mcp:Nope\""
        ),
        "{text}"
    );
}

#[test]
fn an_mcp_server_without_a_command_is_refused() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[mcp.servers.files]\nargs = [\"x\"]\n");
    let text = fx.lines(&fx.errors(&fx.opts())).join("\n");
    assert!(
        text.contains("clawbus.toml:1:14: field \"mcp.servers.files.command\": missing"),
        "{text}"
    );
}

#[test]
fn mcp_serve_agents_are_loaded_and_unknown_ones_reported_in_place() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[mcp.serve]\nagents = [\"a\"]\n");
    fx.write("agents.d/a.toml", "");
    assert_eq!(load(&fx.opts()).unwrap().mcp.serve_agents, ["a"]);
    fx.write(
        "clawbus.toml",
        "[mcp.serve]\nagents = [\"a\", \"ghost\", \"a\"]\n",
    );
    let report = fx.errors(&fx.opts());
    let text = fx.lines(&report).join("\n");
    assert!(
        text.contains("clawbus.toml:2:16: field \"mcp.serve.agents\": no agent \"ghost\""),
        "{text}"
    );
    assert!(
        text.contains("clawbus.toml:2:25: field \"mcp.serve.agents\": agent \"a\" is listed twice"),
        "{text}"
    );
}

#[test]
fn mcp_serve_agents_default_to_none() {
    let fx = Fixture::new();
    fx.write("agents.d/a.toml", "");
    assert!(load(&fx.opts()).unwrap().mcp.serve_agents.is_empty());
}

#[test]
fn a_sandboxed_mcp_server_takes_the_sandbox_section_and_where_it_was_turned_on() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[sandbox]\nmemory_mb = 256\n\n[mcp.servers.files]\ncommand = \"srv\"\nsandbox = true\n\n[mcp.servers.git]\ncommand = \"git-mcp\"\n",
    );
    let config = load(&fx.opts()).unwrap();
    let sandbox = config.mcp.servers["files"].sandbox.as_ref().unwrap();
    assert_eq!(sandbox.value.memory_mb.value, 256);
    let at = sandbox.origin.as_ref().unwrap();
    assert_eq!((at.line, at.col), (6, 11), "{at:?}");
    assert_eq!(config.mcp.servers["git"].sandbox, None, "off by default");
}

#[test]
fn a_sandboxed_mcp_server_needs_the_bwrap_backend() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[sandbox]\nbackend = \"docker\"\n\n[mcp.servers.files]\ncommand = \"srv\"\nsandbox = true\n",
    );
    let text = fx.lines(&fx.errors(&fx.opts())).join("\n");
    assert!(
        text.contains("clawbus.toml:6:11: field \"mcp.servers.files.sandbox\": an MCP server runs only in the bwrap sandbox, but [sandbox] backend = \"docker\""),
        "{text}"
    );
}
