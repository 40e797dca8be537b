//! `[mcp.servers.<name>]` of `clawbus.toml`: MCP servers whose tools agents may use, each a
//! command started with the daemon and spoken to over its stdio.
//!
//! ```toml
//! [mcp.servers.files]
//! command = "python3"
//! args = ["-m", "files_server"]
//! env = ["FILES_ROOT"]   # NAMES of variables passed from the daemon's environment, never values
//! timeout = "30s"        # per tool call and tools/list (the start gets at least a minute)
//! sandbox = true         # run it under bubblewrap with the settings of [sandbox] (see below)
//! ```
//!
//! With `sandbox = true` the server runs in the sandbox of `[sandbox]` (bubblewrap only): its own
//! namespaces, a read-only root, no network unless `[sandbox] network` says so, a private `/tmp`,
//! the memory, process, file size and open file limits, and only the variables its `env` names.
//! A server is shared by every agent and lives as long as the daemon, so it gets no workspace
//! (what it must read comes through `[sandbox] binds`), and `cpu_seconds` and `timeout` (limits
//! of one command) do not apply to it.
//!
//! `[mcp.serve] agents = ["researcher"]` names the agents `clawbus mcp serve` exposes to MCP
//! clients as `ask_<agent>` tools (default none).
//!
//! A server's tools are offered as `mcp__<server>__<tool>`; `group:mcp` names every MCP tool and
//! `group:mcp:<server>` those of one server (see `tools.rs`).

use super::duration::DurationText;
use super::span::Source;
use super::{Origin, Problem, SandboxBackend, SandboxDef, Set, is_env_name};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// The default [`McpServerDef::timeout`]: 30 seconds.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest server name: the tool names built from it must stay under the 64 characters
/// model APIs accept.
const MAX_SERVER_NAME: usize = 24;

/// The validated `[mcp]` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpDef {
    /// The servers, by name.
    pub servers: BTreeMap<String, McpServerDef>,
    /// The agents `clawbus mcp serve` exposes as `ask_<agent>` (`[mcp.serve] agents`), in the
    /// file's order; every one names an agent of `agents.d/`.
    pub serve_agents: Vec<String>,
}

/// One `[mcp.servers.<name>]`: a stdio MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerDef {
    /// The program started (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Names of the daemon's environment variables passed to it; it gets no other variable
    /// (besides `PATH` and `HOME`, so a program can be found and run).
    pub env: Vec<String>,
    /// The longest a tool call or `tools/list` may take before it fails with `timeout` (the
    /// start, process and handshake, gets at least a minute).
    pub timeout: Duration,
    /// `sandbox = true`: the sandbox it runs in (`[sandbox]` of `clawbus.toml`), with where
    /// `sandbox = true` was written; `None`: it runs as the daemon's child with a clean
    /// environment only.
    pub sandbox: Option<Set<SandboxDef>>,
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpFile {
    #[serde(default)]
    pub servers: BTreeMap<Spanned<String>, McpServerFile>,
    #[serde(default)]
    pub serve: McpServeFile,
}

/// `[mcp.serve]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServeFile {
    #[serde(default)]
    pub agents: Vec<Spanned<String>>,
}

/// An agent named in `[mcp.serve] agents`, with the problem to report (in place) when no agent
/// file has that id.
pub(super) type ServeRef = (String, Problem);

/// `[mcp.servers.<name>]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpServerFile {
    pub command: Option<Spanned<String>>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<Spanned<String>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub sandbox: Option<Spanned<bool>>,
}

/// Whether `s` may name an MCP server: 1-24 of `a-z 0-9 -`, no `_` (it separates the parts of
/// `mcp__<server>__<tool>`).
pub fn is_server_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SERVER_NAME
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Validates `[mcp]`; a server with a problem is left out. The agents of `[mcp.serve]` come back
/// with the problem each makes when it names no agent (checked once the agents are known).
/// `sandbox` is the file's `[sandbox]`, which a server with `sandbox = true` runs in.
pub(super) fn mcp_def(
    src: &Source,
    f: &McpFile,
    sandbox: &SandboxDef,
    problems: &mut Vec<Problem>,
) -> (McpDef, Vec<ServeRef>) {
    let mut serve_agents: Vec<String> = Vec::new();
    let mut refs = Vec::new();
    for a in &f.serve.agents {
        let id = a.get_ref();
        if serve_agents.contains(id) {
            problems.push(src.at(
                Some(a.span()),
                "mcp.serve.agents",
                format!("agent \"{id}\" is listed twice (expected each agent once)"),
            ));
            continue;
        }
        serve_agents.push(id.clone());
        refs.push((
            id.clone(),
            src.at(
                Some(a.span()),
                "mcp.serve.agents",
                format!("no agent \"{id}\" (expected the id of a file in the agents folder)"),
            ),
        ));
    }
    let mut servers = BTreeMap::new();
    for (name, s) in &f.servers {
        let n = name.get_ref();
        let before = problems.len();
        if !is_server_name(n) {
            problems.push(src.at(
                Some(name.span()),
                format!("mcp.servers.{n}"),
                format!("invalid MCP server name {n:?} (expected 1-{MAX_SERVER_NAME} lowercase letters, digits or '-')"),
            ));
        }
        let command = match &s.command {
            None => {
                problems.push(src.at(
                    Some(name.span()),
                    format!("mcp.servers.{n}.command"),
                    "missing (expected the program that runs the server, e.g. \"npx\" or \"/usr/bin/python3\")",
                ));
                String::new()
            }
            Some(c) if c.get_ref().trim().is_empty() => {
                problems.push(src.at(
                    Some(c.span()),
                    format!("mcp.servers.{n}.command"),
                    "empty (expected the program that runs the server)",
                ));
                String::new()
            }
            Some(c) => c.get_ref().clone(),
        };
        let mut env = Vec::new();
        for v in &s.env {
            if is_env_name(v.get_ref()) {
                env.push(v.get_ref().clone());
            } else {
                // The value is not echoed: a misplaced secret must not end up in a terminal or a log.
                problems.push(src.at(
                    Some(v.span()),
                    format!("mcp.servers.{n}.env"),
                    "not an environment variable name (expected the NAME of a variable to pass, [A-Z_][A-Z0-9_]*, never its value)",
                ));
            }
        }
        let timeout = super::validate::duration(
            src,
            &s.timeout,
            &format!("mcp.servers.{n}.timeout"),
            DEFAULT_MCP_TIMEOUT,
            problems,
        );
        let sandbox = match &s.sandbox {
            Some(on) if *on.get_ref() && sandbox.backend.value != SandboxBackend::Bwrap => {
                problems.push(src.at(
                    Some(on.span()),
                    format!("mcp.servers.{n}.sandbox"),
                    format!(
                        "an MCP server runs only in the bwrap sandbox, but [sandbox] backend = \"{}\" (set [sandbox] backend = \"bwrap\", or sandbox = false)",
                        sandbox.backend.value
                    ),
                ));
                None
            }
            Some(on) if *on.get_ref() => {
                let at = src.at(Some(on.span()), "", "");
                Some(Set {
                    value: sandbox.clone(),
                    origin: Some(Origin {
                        path: at.path,
                        line: at.line,
                        col: at.col,
                    }),
                })
            }
            _ => None,
        };
        if problems.len() == before {
            servers.insert(
                n.clone(),
                McpServerDef {
                    command,
                    args: s.args.clone(),
                    env,
                    timeout,
                    sandbox,
                },
            );
        }
    }
    (
        McpDef {
            servers,
            serve_agents,
        },
        refs,
    )
}
