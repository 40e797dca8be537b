//! Phase one: the serde shapes of `clawbus.toml` and `agents.d/<id>.toml`, and a parser that
//! reports every bad entry of a file instead of stopping at the first.
//!
//! Serde stops at the first error, so [`parse`] deserializes from the parsed TOML tree, and on an
//! error removes the entry the error's span points into, records a problem, and tries again. The
//! removed entries fall back to their defaults, and validation does not report them twice.

use super::Problem;
use super::ProviderKind;
use super::span::{Source, describe, missing_field, syntax_field};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue, Deserializer};

/// More bad entries than this in one file and the rest are not looked for.
const MAX_REPAIRS: usize = 64;

/// `clawbus.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    pub state_dir: Option<String>,
    #[serde(default)]
    pub gateway: GatewayFile,
    #[serde(default)]
    pub bus: BusFile,
    #[serde(default)]
    pub providers: BTreeMap<Spanned<String>, Spanned<ProviderFile>>,
    #[serde(default)]
    pub defaults: DefaultsFile,
    #[serde(default)]
    pub sessions: super::session::SessionsFile,
    #[serde(default)]
    pub lanes: super::lanes::LanesFile,
    #[serde(default)]
    pub skills: super::skills::SkillsFile,
    #[serde(default)]
    pub web: super::web::WebFile,
    #[serde(default)]
    pub channels: BTreeMap<Spanned<String>, super::tools::ChannelFile>,
}

/// `[gateway]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GatewayFile {
    pub bind: Option<Spanned<String>>,
    pub port: Option<u16>,
    pub token_env: Option<Spanned<String>>,
}

/// `[bus]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BusFile {
    pub dedup_window: Option<Spanned<String>>,
}

/// `[providers.<name>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderFile {
    pub kind: Option<Spanned<ProviderKind>>,
    pub base_url: Option<Spanned<String>>,
    pub api_key_env: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub max_retries: Option<u32>,
}

/// `[defaults]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DefaultsFile {
    pub model: Option<Spanned<String>>,
}

/// `agents.d/<id>.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentFile {
    pub description: Option<String>,
    pub model: Option<Spanned<String>>,
    #[serde(default)]
    pub limits: LimitsFile,
    #[serde(default)]
    pub tools: super::tools::ToolsFile,
    #[serde(default)]
    pub exec: super::exec::ExecFile,
    /// The agent's IANA time zone (see `prompt.rs`).
    pub timezone: Option<Spanned<String>>,
    #[serde(default)]
    pub prompt: super::prompt::PromptFile,
    #[serde(default)]
    pub session: super::session::SessionFile,
    #[serde(default)]
    pub bindings: Vec<super::session::BindingFile>,
    #[serde(default)]
    pub skills: super::skills::AgentSkillsFile,
}

/// `[limits]` of an agent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub max_iterations: Option<Spanned<u32>>,
    pub turn_timeout: Option<Spanned<String>>,
    pub tool_result_max_chars: Option<Spanned<usize>>,
}

/// The outcome of phase one for one file.
pub(super) struct Parsed<T> {
    /// The shape, minus the entries that were in error; `None` after a syntax error.
    pub value: Option<T>,
    /// Syntax, unknown-field and type problems.
    pub problems: Vec<Problem>,
    /// Dotted paths of the entries dropped, whose later problems are not reported twice.
    pub removed: Vec<String>,
}

impl<T> Parsed<T> {
    /// Adds validation problems, leaving out those about an entry already reported.
    pub fn merge(mut self, more: Vec<Problem>) -> Vec<Problem> {
        let already = |field: &str| {
            self.removed.iter().any(|r| {
                field == r
                    || field
                        .strip_prefix(r.as_str())
                        .is_some_and(|t| t.starts_with('.'))
            })
        };
        let kept: Vec<Problem> = more.into_iter().filter(|p| !already(&p.field)).collect();
        self.problems.extend(kept);
        self.problems.sort_by_key(|p| (p.line, p.col));
        self.problems
    }
}

/// Parses `src` into `T`, collecting every syntax error, or every unknown field and bad type.
pub(super) fn parse<T: DeserializeOwned>(src: &Source) -> Parsed<T> {
    let (mut table, errors) = DeTable::parse_recoverable(src.text);
    let mut problems = Vec::new();
    if !errors.is_empty() {
        for error in &errors {
            let span = error.span();
            let field = span
                .as_ref()
                .map(|s| syntax_field(src.text, s.start))
                .unwrap_or_default();
            let problem = src.at(span, field, describe(error.message()));
            // The parser's recovery often adds a second error on the same line: keep the first.
            if problems
                .last()
                .is_none_or(|p: &Problem| p.line != problem.line)
            {
                problems.push(problem);
            }
        }
        return Parsed {
            value: None,
            problems,
            removed: Vec::new(),
        };
    }
    let mut removed = Vec::new();
    for _ in 0..MAX_REPAIRS {
        let error = match T::deserialize(Deserializer::from(table.clone())) {
            Ok(value) => {
                return Parsed {
                    value: Some(value),
                    problems,
                    removed,
                };
            }
            Err(error) => error,
        };
        let span = error.span();
        let entry = span.as_ref().and_then(|s| entry_at(table.get_ref(), s));
        let mut field = entry.as_deref().unwrap_or_default().join(".");
        if let Some(name) = missing_field(error.message()) {
            field = if field.is_empty() {
                name.to_string()
            } else {
                format!("{field}.{name}")
            };
        }
        problems.push(src.at(span, field, describe(error.message())));
        match entry {
            Some(path) if remove(table.get_mut(), &path) => removed.push(path.join(".")),
            _ => break,
        }
    }
    Parsed {
        value: None,
        problems,
        removed,
    }
}

/// The keys of the table `section` (e.g. the names under `[providers]`), however bad the file.
pub(super) fn section_keys(text: &str, section: &str) -> Vec<String> {
    let (table, _) = DeTable::parse_recoverable(text);
    match table.get_ref().get(section).map(|v| v.get_ref()) {
        Some(DeValue::Table(t)) => t.keys().map(|k| k.get_ref().to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The path of the deepest entry whose key or value span contains `span`.
///
/// A `[table]`'s own span is its header, its entries lie elsewhere, so every table is searched.
fn entry_at(table: &DeTable<'_>, span: &Range<usize>) -> Option<Vec<String>> {
    let mut best: Option<Vec<String>> = None;
    for (key, value) in table.iter() {
        let inner = match value.get_ref() {
            DeValue::Table(t) => entry_at(t, span),
            _ => None,
        };
        let found = match inner {
            Some(mut path) => {
                path.insert(0, key.get_ref().to_string());
                Some(path)
            }
            None if contains(&key.span(), span) || contains(&value.span(), span) => {
                Some(vec![key.get_ref().to_string()])
            }
            None => None,
        };
        let deeper = |path: &Vec<String>| best.as_ref().is_none_or(|b| path.len() > b.len());
        if found.as_ref().is_some_and(deeper) {
            best = found;
        }
    }
    best
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Removes the entry at `path`; false when there is none.
fn remove(table: &mut DeTable<'_>, path: &[String]) -> bool {
    match path {
        [] => false,
        [last] => table.remove(last.as_str()).is_some(),
        [first, rest @ ..] => match table.get_mut(first.as_str()).map(|v| v.get_mut()) {
            Some(DeValue::Table(t)) => remove(t, rest),
            _ => false,
        },
    }
}
