//! `[tools]` of an agent and `[channels.<name>]` of `clawbus.toml`: which tools an agent may be
//! offered, by profile, group and name, and which tools a channel never offers.
//!
//! The catalogue is [`KNOWN_TOOLS`]; groups ([`TOOL_GROUPS`]) and profiles ([`Profile`]) name parts
//! of it. `tools.allow` adds names or groups to the profile, `tools.deny` removes them (deny wins).
//! The layers that follow (provider availability, channel) are applied by `crate::tools::policy`.

use super::span::Source;
use super::{KNOWN_TOOLS, Problem};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use toml::Spanned;

/// Named groups of tools, usable in `tools.allow`, `tools.deny` and `deny_tools`.
pub const TOOL_GROUPS: &[(&str, &[&str])] = &[
    ("group:fs", &["read", "write", "edit"]),
    ("group:runtime", &["exec"]),
    ("group:web", &["web_fetch", "web_search"]),
    ("group:memory", &["memory_search", "memory_get"]),
    (
        "group:sessions",
        &[
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
        ],
    ),
    ("group:messaging", &["message"]),
    ("group:agents", &["agent_call"]),
    ("group:automation", &["cron"]),
    ("group:ui", &["browser"]),
];

/// The base set of tools an agent starts from (`tools.profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// `read` only.
    Minimal,
    /// Files, exec, web and memory: `group:fs`, `group:runtime`, `group:web`, `group:memory`.
    /// The default when `[tools]` names no profile.
    #[default]
    Coding,
    /// `message` and the `sessions_*` tools.
    Messaging,
    /// Every tool of the catalogue.
    Full,
}

impl Profile {
    /// Every profile, in documentation order.
    pub const ALL: [Profile; 4] = [
        Profile::Minimal,
        Profile::Coding,
        Profile::Messaging,
        Profile::Full,
    ];

    /// The name used in files (`coding`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Coding => "coding",
            Self::Messaging => "messaging",
            Self::Full => "full",
        }
    }

    /// Parses a profile name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether the profile includes `tool`.
    pub fn includes(self, tool: &str) -> bool {
        let groups: &[&str] = match self {
            Self::Minimal => return tool == "read",
            Self::Coding => &["group:fs", "group:runtime", "group:web", "group:memory"],
            Self::Messaging => &["group:messaging", "group:sessions"],
            Self::Full => {
                return (KNOWN_TOOLS.contains(&tool) && !super::OPT_IN_TOOLS.contains(&tool))
                    || tool.starts_with(MCP_PREFIX);
            }
        };
        groups
            .iter()
            .filter_map(|g| expand(g))
            .any(|tools| tools.contains(&tool))
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tools a name or `group:…` entry stands for; `None` when it is neither.
pub fn expand(entry: &str) -> Option<Vec<&'static str>> {
    if let Some(name) = KNOWN_TOOLS.iter().find(|t| **t == entry) {
        return Some(vec![name]);
    }
    TOOL_GROUPS
        .iter()
        .find(|(group, _)| *group == entry)
        .map(|(_, tools)| tools.to_vec())
}

/// The prefix of every MCP tool name: `mcp__<server>__<tool>`.
pub const MCP_PREFIX: &str = "mcp__";
/// The group of every MCP tool; `group:mcp:<server>` names those of one server.
pub const MCP_GROUP: &str = "group:mcp";

/// The name MCP server `server`'s tool `tool` is offered as: `mcp__<server>__<tool>`.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("{MCP_PREFIX}{server}__{tool}")
}

/// Whether entry `entry` (a tool name, a `group:…`, `group:mcp[:<server>]` or an MCP tool
/// name) stands for `tool`.
pub fn matches(entry: &str, tool: &str) -> bool {
    if entry == MCP_GROUP {
        return tool.starts_with(MCP_PREFIX);
    }
    if let Some(server) = entry.strip_prefix("group:mcp:") {
        return tool
            .strip_prefix(MCP_PREFIX)
            .and_then(|rest| rest.strip_prefix(server))
            .is_some_and(|rest| rest.starts_with("__"));
    }
    if entry.starts_with(MCP_PREFIX) {
        return entry == tool;
    }
    expand(entry).is_some_and(|tools| tools.contains(&tool))
}

/// Whether `entry` is a well-formed MCP entry: `group:mcp`, `group:mcp:<server>` or
/// `mcp__<server>__<tool>`.
fn is_mcp_entry(entry: &str) -> bool {
    if entry == MCP_GROUP {
        return true;
    }
    if let Some(server) = entry.strip_prefix("group:mcp:") {
        return super::mcp::is_server_name(server);
    }
    entry
        .strip_prefix(MCP_PREFIX)
        .and_then(|rest| rest.split_once("__"))
        .is_some_and(|(server, tool)| super::mcp::is_server_name(server) && !tool.is_empty())
}

/// The first entry of `entries` that stands for `tool`.
pub fn entry_for<'a>(entries: &'a [String], tool: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|e| matches(e, tool))
        .map(String::as_str)
}

/// The `[tools]` section of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsDef {
    /// The base set (default `coding`).
    pub profile: Profile,
    /// Names or groups added to the profile.
    pub allow: Vec<String>,
    /// Names or groups never offered, even if the profile or `allow` has them.
    pub deny: Vec<String>,
}

/// Why the agent's own policy (profile, then allow/deny) keeps or removes a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRule {
    /// In the profile or in `tools.allow`, and not denied.
    Allowed,
    /// Neither in the profile nor in `tools.allow`.
    NotInProfile,
    /// Removed by this `tools.deny` entry.
    Denied(String),
}

impl ToolsDef {
    /// What the profile and `allow`/`deny` say about `tool`.
    pub fn rule(&self, tool: &str) -> AgentRule {
        if !self.profile.includes(tool) && entry_for(&self.allow, tool).is_none() {
            return AgentRule::NotInProfile;
        }
        match entry_for(&self.deny, tool) {
            Some(entry) => AgentRule::Denied(entry.to_string()),
            None => AgentRule::Allowed,
        }
    }
}

/// One `[channels.<name>]` section of `clawbus.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelDef {
    /// Tools (names or groups) never offered to runs that came from this channel.
    pub deny_tools: Vec<String>,
    /// The agent that answers messages on this channel that no `[[bindings]]` entry claims;
    /// without one such messages are refused (404 `unbound`).
    pub agent: Option<crate::ids::AgentId>,
    /// Bot API polling (`[channels.telegram]` with `token_env`); `None`: the channel does not poll.
    pub telegram: Option<super::TelegramDef>,
}

/// `[tools]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolsFile {
    pub profile: Option<Spanned<String>>,
    pub allow: Option<Vec<Spanned<String>>>,
    pub deny: Option<Vec<Spanned<String>>>,
}

/// `[channels.<name>]` of `clawbus.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChannelFile {
    pub deny_tools: Option<Vec<Spanned<String>>>,
    /// The agent that answers messages no binding claims.
    pub agent: Option<Spanned<String>>,
    /// Telegram only: the bot token's environment variable (see `telegram.rs`).
    pub token_env: Option<Spanned<String>>,
    /// Telegram only: the Bot API server.
    pub base_url: Option<Spanned<String>>,
    /// Telegram only: chat ids that may talk to the agent.
    pub allow_chats: Option<Spanned<Vec<i64>>>,
    /// Telegram only: the `getUpdates` long-poll timeout.
    pub poll_timeout: Option<Spanned<super::duration::DurationText>>,
}

/// Validates `[tools]`.
pub(super) fn tools_def(src: &Source, f: &ToolsFile, problems: &mut Vec<Problem>) -> ToolsDef {
    let mut def = ToolsDef::default();
    if let Some(p) = &f.profile {
        match Profile::parse(p.get_ref()) {
            Some(profile) => def.profile = profile,
            None => {
                let names: Vec<&str> = Profile::ALL.iter().map(|p| p.as_str()).collect();
                problems.push(src.at(
                    Some(p.span()),
                    "tools.profile",
                    format!(
                        "unknown profile {:?} (expected one of: {})",
                        p.get_ref(),
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    def.allow = tool_names(src, f.allow.as_deref(), "tools.allow", problems);
    def.deny = tool_names(src, f.deny.as_deref(), "tools.deny", problems);
    def
}

/// Validates every `[channels.<name>]`.
pub(super) fn channels(
    src: &Source,
    channels: &BTreeMap<Spanned<String>, ChannelFile>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, ChannelDef> {
    channels
        .iter()
        .map(|(name, c)| {
            if !super::is_name(name.get_ref()) {
                problems.push(src.at(
                    Some(name.span()),
                    format!("channels.{}", name.get_ref()),
                    format!(
                        "invalid channel name {:?} (expected lowercase letters, digits, '-' or '_', as in [[bindings]] channel)",
                        name.get_ref()
                    ),
                ));
            }
            let field = format!("channels.{}.deny_tools", name.get_ref());
            let deny_tools = tool_names(src, c.deny_tools.as_deref(), &field, problems);
            let agent = c.agent.as_ref().and_then(|a| {
                match crate::ids::AgentId::parse(a.get_ref()) {
                    Ok(id) => Some(id),
                    Err(e) => {
                        problems.push(src.at(
                            Some(a.span()),
                            format!("channels.{}.agent", name.get_ref()),
                            e.to_string(),
                        ));
                        None
                    }
                }
            });
            let keys = super::telegram::TelegramKeys {
                token_env: &c.token_env,
                base_url: &c.base_url,
                allow_chats: &c.allow_chats,
                poll_timeout: &c.poll_timeout,
            };
            let telegram = super::telegram::telegram_def(src, name.get_ref(), keys, problems);
            (
                name.get_ref().clone(),
                ChannelDef {
                    deny_tools,
                    agent,
                    telegram,
                },
            )
        })
        .collect()
}

/// Checks that every entry is a known tool or group.
pub(super) fn tool_names(
    src: &Source,
    names: Option<&[Spanned<String>]>,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let names = names.unwrap_or_default();
    let unknown = |n: &str| expand(n).is_none() && !is_mcp_entry(n);
    for name in names.iter().filter(|n| unknown(n.get_ref())) {
        let groups: Vec<&str> = TOOL_GROUPS.iter().map(|(g, _)| *g).collect();
        problems.push(src.at(
            Some(name.span()),
            field,
            format!(
                "unknown tool {:?} (expected one of: {}, or a group: {}, group:mcp, group:mcp:<server>, or an MCP tool mcp__<server>__<tool>)",
                name.get_ref(),
                KNOWN_TOOLS.join(", "),
                groups.join(", ")
            ),
        ));
    }
    names.iter().map(|n| n.get_ref().clone()).collect()
}
