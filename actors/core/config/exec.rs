//! `[exec]` of an agent: how the `exec` tool decides and runs commands.
//!
//! ```toml
//! [exec]
//! security = "allowlist"      # deny | allowlist | ask | full
//! allow = ["ls", "git status*", { program = "git", args = "^push( |$)", deny_args = "--force" }]
//! timeout_s = 120
//! env = ["GIT_AUTHOR_NAME"]
//! approval_timeout = "120s"
//! shell = false               # full mode only: run command lines with operators through /bin/sh
//! ```
//!
//! A string entry is a glob (`*`, `?`, `\` escapes) on the whole command line as it will run, each
//! argument shell-quoted when it needs to be. A table entry has either `command` (the same glob) or
//! `program` (a glob on the program as written: a glob without `/` matches only bare names found on
//! `PATH`), with `args` (a regex that must match the arguments joined by spaces) and `deny_args` (a
//! regex that refuses the command when it matches, whatever other entries say). `shell = true` on
//! an entry is the only way a shell, or a command line with shell operators, gets past the
//! allowlist.

use super::duration::DurationText;
use super::span::{Source, describe};
use super::validate::duration;
use super::{Problem, is_env_name};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;
use toml::Spanned;

/// Default limit on one command.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(120);
/// Default wait for a person to answer an approval request.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// How `exec` treats a command (`exec.security`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecSecurity {
    /// Never runs anything; the tool is not offered.
    Deny,
    /// Runs what an allowlist entry matches, refuses the rest (the default).
    #[default]
    Allowlist,
    /// Runs what an entry matches, asks a person about the rest.
    Ask,
    /// Runs any single program (shell operators only with `exec.shell = true`).
    Full,
}

impl ExecSecurity {
    /// Every mode, in documentation order.
    pub const ALL: [ExecSecurity; 4] = [Self::Deny, Self::Allowlist, Self::Ask, Self::Full];

    /// The name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Allowlist => "allowlist",
            Self::Ask => "ask",
            Self::Full => "full",
        }
    }
}

impl fmt::Display for ExecSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A compiled regex that compares by its source text (so definitions stay comparable).
#[derive(Debug, Clone)]
pub struct ArgsPattern(pub regex::Regex);

impl PartialEq for ArgsPattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// One `exec.allow` entry.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecRule {
    /// A glob on the whole command line (a string entry, or `{ command = "…" }`).
    Command {
        /// The glob.
        pattern: String,
        /// Whether a shell or shell operators may run under this entry.
        shell: bool,
    },
    /// A program glob with optional regexes on its arguments.
    Program {
        /// Glob on the program as written (`git`, `/usr/bin/*`).
        program: String,
        /// Must match the arguments joined by single spaces, when given.
        args: Option<ArgsPattern>,
        /// Refuses the command when it matches the joined arguments.
        deny_args: Option<ArgsPattern>,
        /// Whether this program may be a shell.
        shell: bool,
    },
}

impl ExecRule {
    /// Whether the entry lets a shell run.
    pub fn allows_shell(&self) -> bool {
        match self {
            Self::Command { shell, .. } | Self::Program { shell, .. } => *shell,
        }
    }
}

impl fmt::Display for ExecRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shell = |s: bool| if s { ", shell = true" } else { "" };
        match self {
            Self::Command {
                pattern,
                shell: false,
            } => write!(f, "{pattern:?}"),
            Self::Command { pattern, shell: s } => {
                write!(f, "{{ command = {pattern:?}{} }}", shell(*s))
            }
            Self::Program {
                program,
                args,
                deny_args,
                shell: s,
            } => {
                write!(f, "{{ program = {program:?}")?;
                if let Some(a) = args {
                    write!(f, ", args = {:?}", a.0.as_str())?;
                }
                if let Some(d) = deny_args {
                    write!(f, ", deny_args = {:?}", d.0.as_str())?;
                }
                write!(f, "{} }}", shell(*s))
            }
        }
    }
}

/// The `[exec]` section of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecDef {
    /// The approval mode.
    pub security: ExecSecurity,
    /// What runs without asking (allowlist and ask modes).
    pub allow: Vec<ExecRule>,
    /// Default and maximum limit on one command (`timeout_s`); a call may ask for less.
    pub timeout: Duration,
    /// Names of extra environment variables passed to commands, besides PATH, HOME, LANG, TZ.
    pub env: Vec<String>,
    /// How long an `ask` waits for a person before it counts as denied.
    pub approval_timeout: Duration,
    /// Full mode only: run command lines with shell operators through `/bin/sh -c`.
    pub shell: bool,
}

impl Default for ExecDef {
    fn default() -> Self {
        Self {
            security: ExecSecurity::default(),
            allow: Vec::new(),
            timeout: DEFAULT_EXEC_TIMEOUT,
            env: Vec::new(),
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            shell: false,
        }
    }
}

/// `[exec]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecFile {
    pub security: Option<Spanned<String>>,
    pub allow: Option<Vec<Spanned<toml::Value>>>,
    pub timeout_s: Option<Spanned<u64>>,
    pub env: Option<Vec<Spanned<String>>>,
    pub approval_timeout: Option<Spanned<DurationText>>,
    pub shell: Option<bool>,
}

/// A table entry of `exec.allow`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleTable {
    program: Option<String>,
    command: Option<String>,
    args: Option<String>,
    deny_args: Option<String>,
    shell: Option<bool>,
}

/// Validates `[exec]`.
pub(super) fn exec_def(src: &Source, f: &ExecFile, problems: &mut Vec<Problem>) -> ExecDef {
    let mut def = ExecDef::default();
    if let Some(s) = &f.security {
        match ExecSecurity::ALL
            .into_iter()
            .find(|m| m.as_str() == s.get_ref())
        {
            Some(mode) => def.security = mode,
            None => problems.push(src.at(
                Some(s.span()),
                "exec.security",
                format!(
                    "unknown mode {:?} (expected one of: deny, allowlist, ask, full)",
                    s.get_ref()
                ),
            )),
        }
    }
    for (i, entry) in f.allow.iter().flatten().enumerate() {
        match rule(entry.get_ref()) {
            Ok(rule) => def.allow.push(rule),
            Err(message) => {
                problems.push(src.at(Some(entry.span()), format!("exec.allow[{i}]"), message))
            }
        }
    }
    if let Some(t) = &f.timeout_s {
        match *t.get_ref() {
            n @ 1..=86_400 => def.timeout = Duration::from_secs(n),
            n => problems.push(src.at(
                Some(t.span()),
                "exec.timeout_s",
                format!("{n} is out of range (expected 1 to 86400 seconds)"),
            )),
        }
    }
    for name in f.env.iter().flatten() {
        if is_env_name(name.get_ref()) {
            def.env.push(name.get_ref().clone());
        } else {
            problems.push(src.at(
                Some(name.span()),
                "exec.env",
                format!(
                    "{:?} is not an environment variable name (expected [A-Z_][A-Z0-9_]*)",
                    name.get_ref()
                ),
            ));
        }
    }
    def.approval_timeout = duration(
        src,
        &f.approval_timeout,
        "exec.approval_timeout",
        DEFAULT_APPROVAL_TIMEOUT,
        problems,
    );
    def.shell = f.shell.unwrap_or(false);
    def
}

fn rule(value: &toml::Value) -> Result<ExecRule, String> {
    let table = match value {
        toml::Value::String(s) if s.trim().is_empty() => {
            return Err("empty pattern (expected a glob such as \"git status*\")".into());
        }
        toml::Value::String(s) => {
            return Ok(ExecRule::Command {
                pattern: s.clone(),
                shell: false,
            });
        }
        toml::Value::Table(_) => value
            .clone()
            .try_into::<RuleTable>()
            .map_err(|e| describe(e.message().trim()))?,
        other => {
            return Err(format!(
                "invalid entry of type {} (expected a glob string or a table such as {{ program = \"git\", args = \"^status\" }})",
                other.type_str()
            ));
        }
    };
    let regex = |field: &str, text: &Option<String>| -> Result<Option<ArgsPattern>, String> {
        text.as_deref()
            .map(|t| {
                regex::Regex::new(t).map(ArgsPattern).map_err(|e| {
                    let e = e.to_string();
                    let why = e.lines().last().unwrap_or_default().trim();
                    let why = why.strip_prefix("error: ").unwrap_or(why);
                    format!(
                        "{field}: invalid regex {t:?}: {why} (expected a regular expression matched against the arguments joined by spaces, e.g. \"^status( |$)\")"
                    )
                })
            })
            .transpose()
    };
    let shell = table.shell.unwrap_or(false);
    match (table.program, table.command) {
        (Some(_), Some(_)) => Err("has both program and command (expected one of them)".into()),
        (None, None) => Err("has neither program nor command (expected one of them)".into()),
        (None, Some(_)) if table.args.is_some() || table.deny_args.is_some() => Err(
            "args and deny_args apply to program entries (expected program = \"…\" with them)"
                .into(),
        ),
        (Some(p), None) | (None, Some(p)) if p.trim().is_empty() => {
            Err("empty pattern (expected a glob)".into())
        }
        (None, Some(pattern)) => Ok(ExecRule::Command { pattern, shell }),
        (Some(program), None) => Ok(ExecRule::Program {
            program,
            args: regex("args", &table.args)?,
            deny_args: regex("deny_args", &table.deny_args)?,
            shell,
        }),
    }
}
