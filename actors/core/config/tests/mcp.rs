//! `[mcp.servers.<name>]` and the MCP entries of tool policies.

use super::Fixture;
use crate::config::{AgentRule, DEFAULT_MCP_TIMEOUT, McpStart, McpTransport, load, matches};
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
    assert_eq!(
        files.transport,
        McpTransport::Stdio {
            command: "python3".into(),
            args: vec!["-m".into(), "srv".into()],
            env: vec!["FILES_ROOT".into()],
        }
    );
    assert_eq!(files.timeout, Duration::from_secs(5));
    assert_eq!(files.start, McpStart::Eager);
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
        "[mcp.servers.Bad_Name]\ncommand = \"x\"\n\n[mcp.servers.ok]\nenv = [\"sk-secret-value\"]\ntimeout = \"soon\"\nport = 1\n",
    );
    fx.write("agents.d/a.toml", "[tools]\nallow = [\"group:mcp:Nope\"]\n");
    let report = fx.errors(&fx.opts());
    let text = fx.lines(&report).join("\n");
    assert!(
        text.contains("clawbus.toml:1:14: field \"mcp.servers.Bad_Name\": invalid MCP server name"),
        "{text}"
    );
    assert!(
        text.contains("clawbus.toml:7:1: field \"mcp.servers.ok.port\": unknown field"),
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

#[test]
fn http_mcp_servers_are_loaded_with_header_variable_names_and_start() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[mcp.servers.tickets]\nurl = \"http://127.0.0.1:8123/mcp\"\nheaders_env = { Authorization = \"TICKETS_AUTH\", X-Team = \"TEAM\" }\nstart = \"lazy\"\n\n[mcp.servers.remote]\nurl = \"https://mcp.example.com/mcp\"\n",
    );
    let config = load(&fx.opts()).unwrap();
    let tickets = &config.mcp.servers["tickets"];
    let McpTransport::Http { url, headers_env } = &tickets.transport else {
        panic!("{tickets:?}")
    };
    assert_eq!(url, "http://127.0.0.1:8123/mcp");
    assert_eq!(headers_env["Authorization"], "TICKETS_AUTH");
    assert_eq!(headers_env["X-Team"], "TEAM");
    assert_eq!(tickets.start, McpStart::Lazy);
    assert_eq!(tickets.secret_names(), ["TICKETS_AUTH", "TEAM"]);
    assert_eq!(config.mcp.servers["remote"].start, McpStart::Eager);
}

#[test]
fn bad_http_mcp_servers_are_reported_in_place() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        concat!(
            "[mcp.servers.both]\ncommand = \"x\"\nurl = \"https://a.example/mcp\"\n\n",
            "[mcp.servers.plain]\nurl = \"http://mcp.example.com/mcp\"\n\n",
            "[mcp.servers.creds]\nurl = \"https://me:pw@a.example/mcp\"\n\n",
            "[mcp.servers.hdr]\nurl = \"https://a.example/mcp\"\nheaders_env = { \"Bad Header\" = \"X\", Authorization = \"Bearer sk-123\" }\nenv = [\"X\"]\n\n",
            "[mcp.servers.io]\ncommand = \"x\"\nheaders_env = { Authorization = \"X\" }\n\n",
            "[mcp.servers.when]\ncommand = \"x\"\nstart = \"sometimes\"\n\n",
            "[mcp.servers.own]\nurl = \"https://a.example/mcp\"\nheaders_env = { Mcp-Session-Id = \"X\" }\n",
        ),
    );
    let text = fx.lines(&fx.errors(&fx.opts())).join("\n");
    for expected in [
        "clawbus.toml:3:7: field \"mcp.servers.both.url\": both command and url are set",
        "clawbus.toml:6:7: field \"mcp.servers.plain.url\": http:// to \"mcp.example.com\", which is not loopback",
        "clawbus.toml:9:7: field \"mcp.servers.creds.url\": has a user or password",
        "clawbus.toml:13:17: field \"mcp.servers.hdr.headers_env\": \"Bad Header\" is not an HTTP header name",
        "clawbus.toml:13:53: field \"mcp.servers.hdr.headers_env\": not an environment variable name",
        "clawbus.toml:14:8: field \"mcp.servers.hdr.env\": only for a server with a command",
        "clawbus.toml:18:17: field \"mcp.servers.io.headers_env\": only for a server with a url",
        "clawbus.toml:22:9: field \"mcp.servers.when.start\": unknown variant \"sometimes\"",
        "clawbus.toml:26:17: field \"mcp.servers.own.headers_env\": \"Mcp-Session-Id\" is set by the MCP client itself",
    ] {
        assert!(text.contains(expected), "{expected}\nin:\n{text}");
    }
    assert!(
        !text.contains("sk-123"),
        "a misplaced secret is never echoed: {text}"
    );
    assert!(!text.contains("me:pw"), "{text}");
}

#[test]
fn an_http_mcp_server_cannot_be_sandboxed() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[mcp.servers.web]\nurl = \"https://a.example/mcp\"\nsandbox = true\n",
    );
    let text = fx.lines(&fx.errors(&fx.opts())).join("\n");
    assert!(
        text.contains("clawbus.toml:3:11: field \"mcp.servers.web.sandbox\": an HTTP server (url) is not a process of the daemon's to sandbox"),
        "{text}"
    );
}
