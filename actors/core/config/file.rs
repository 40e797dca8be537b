//! Phase one: the serde shapes of `clawbus.toml` and `agents.d/<id>.toml`, and a parser that
//! reports every bad entry of a file instead of stopping at the first.
//!
//! Serde stops at the first error, so [`parse`] deserializes from the parsed TOML tree, and on an
//! error removes the entry the error's span points into, records a problem, and tries again. The
//! removed entries fall back to their defaults, and validation does not report them twice.

use super::Problem;
use super::ProviderKind;
use super::duration::DurationText;
use super::span::{Source, describe, missing_field, syntax_field};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue, Deserializer};

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
    pub browser: super::browser::BrowserFile,
    #[serde(default)]
    pub channels: BTreeMap<Spanned<String>, super::tools::ChannelFile>,
    #[serde(default)]
    pub webhooks: BTreeMap<Spanned<String>, super::webhooks::WebhookFile>,
    #[serde(default)]
    pub prices: super::prices::PricesFile,
    #[serde(default)]
    pub delivery: super::delivery::DeliveryFile,
    #[serde(default)]
    pub store: super::store::StoreFile,
    #[serde(default)]
    pub cron: super::cron_limits::CronLimitsFile,
    #[serde(default)]
    pub sandbox: super::sandbox::SandboxFile,
    #[serde(default)]
    pub mcp: super::mcp::McpFile,
}

/// `[gateway]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GatewayFile {
    pub bind: Option<Spanned<String>>,
    pub port: Option<u16>,
    pub token_env: Option<Spanned<String>>,
    pub shutdown_grace: Option<Spanned<DurationText>>,
    pub max_body: Option<Spanned<i64>>,
    pub timezone: Option<Spanned<String>>,
    pub ws_max_connections: Option<Spanned<i64>>,
    pub ws_max_buffered: Option<Spanned<i64>>,
    pub control_ui_dir: Option<Spanned<String>>,
}

/// `[bus]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BusFile {
    pub dedup_window: Option<Spanned<DurationText>>,
    pub backend: Option<Spanned<String>>,
    pub ack_wait: Option<Spanned<DurationText>>,
    pub session_lease_ttl: Option<Spanned<DurationText>>,
}

/// `[providers.<name>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderFile {
    pub kind: Option<Spanned<ProviderKind>>,
    pub base_url: Option<Spanned<String>>,
    pub api_key_env: Option<Spanned<String>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub max_retries: Option<u32>,
    pub max_response_bytes: Option<Spanned<i64>>,
    pub max_tokens: Option<Spanned<i64>>,
    pub images: Option<bool>,
    pub breaker_failures: Option<Spanned<i64>>,
    pub breaker_cooldown: Option<Spanned<DurationText>>,
    pub breaker_max_cooldown: Option<Spanned<DurationText>>,
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
    /// Models tried in order when `model` is rate-limited or down.
    #[serde(default)]
    pub fallbacks: Vec<Spanned<String>>,
    #[serde(default)]
    pub limits: LimitsFile,
    #[serde(default)]
    pub retry: super::retry::RetryFile,
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
    #[serde(default)]
    pub cron: Vec<Spanned<super::cron::CronFile>>,
    #[serde(default)]
    pub heartbeat: super::cron::HeartbeatFile,
    #[serde(default)]
    pub model_params: super::model_params::ModelParamsFile,
    /// Shared topics the agent consumes (see `subscribe.rs`).
    #[serde(default)]
    pub subscribe: Vec<Spanned<String>>,
    /// The agents it may reach through `agent_call` and `sessions_spawn` (see `agent.rs`).
    #[serde(default)]
    pub may_call: Vec<Spanned<String>>,
    /// Its sandbox settings over `clawbus.toml`'s (see `sandbox.rs`).
    #[serde(default)]
    pub sandbox: super::sandbox::SandboxFile,
}

/// `[limits]` of an agent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub max_iterations: Option<Spanned<u32>>,
    pub turn_timeout: Option<Spanned<DurationText>>,
    pub tool_result_max_chars: Option<Spanned<usize>>,
    pub max_attempts: Option<Spanned<u32>>,
    pub retry_backoff: Option<Spanned<DurationText>>,
    pub retry_backoff_max: Option<Spanned<DurationText>>,
}

/// The outcome of phase one for one file.
pub(super) struct Parsed<T> {
    /// The shape, minus the entries that were in error; `None` after a syntax error.
    pub value: Option<T>,
    /// Syntax, unknown-field and type problems.
    pub problems: Vec<Problem>,
    /// Dotted paths of the entries dropped, whose later problems are not reported twice.
    pub removed: Vec<String>,
    /// Array elements dropped, as (dotted path of the array, index in the file): validation sees
    /// the later elements shifted down, and its `[i]` are mapped back to the file's.
    pub dropped_elements: Vec<(String, usize)>,
}

impl<T> Parsed<T> {
    /// Adds validation problems, leaving out those about an entry already reported.
    pub(super) fn merge(mut self, more: Vec<Problem>) -> Vec<Problem> {
        let already = |field: &str| {
            self.removed.iter().any(|r| {
                field == r
                    || field
                        .strip_prefix(r.as_str())
                        .is_some_and(|t| t.starts_with(['.', '[']))
            })
        };
        let kept: Vec<Problem> = more
            .into_iter()
            .map(|mut p| {
                p.field = file_index(&p.field, &self.dropped_elements);
                p
            })
            .filter(|p| !already(&p.field))
            .collect();
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
            dropped_elements: Vec::new(),
        };
    }
    // Paths are named from the file as written: removing an array element shifts the later ones.
    let original = table.clone();
    let mut removed = Vec::new();
    let mut dropped_elements = Vec::new();
    for _ in 0..MAX_REPAIRS {
        let error = match T::deserialize(Deserializer::from(table.clone())) {
            Ok(value) => {
                return Parsed {
                    value: Some(value),
                    problems,
                    removed,
                    dropped_elements,
                };
            }
            Err(error) => error,
        };
        let span = error.span();
        let entry = span.as_ref().and_then(|s| entry_at(table.get_ref(), s));
        let in_file = span
            .as_ref()
            .and_then(|s| entry_at(original.get_ref(), s))
            .unwrap_or_default();
        let label = dotted(&in_file);
        let field = match missing_field(error.message()) {
            Some(name) if label.is_empty() => name.to_string(),
            Some(name) => format!("{label}.{name}"),
            None => label.clone(),
        };
        problems.push(src.at(span, field, describe(error.message())));
        match entry {
            Some(path) if remove(table.get_mut(), &path) => {
                if let [array @ .., Step::Index(i)] = in_file.as_slice() {
                    dropped_elements.push((dotted(array), *i));
                }
                removed.push(label);
            }
            _ => break,
        }
    }
    Parsed {
        value: None,
        problems,
        removed,
        dropped_elements,
    }
}

/// `bindings[1].channel` as counted after dropping `bindings[1]` is `bindings[2].channel` in the
/// file.
fn file_index(field: &str, dropped: &[(String, usize)]) -> String {
    for (array, _) in dropped {
        let Some(rest) = field
            .strip_prefix(array.as_str())
            .and_then(|r| r.strip_prefix('['))
        else {
            continue;
        };
        let Some((index, tail)) = rest.split_once(']') else {
            continue;
        };
        let Ok(shifted) = index.parse::<usize>() else {
            continue;
        };
        let gone: Vec<usize> = dropped
            .iter()
            .filter(|(a, _)| a == array)
            .map(|(_, i)| *i)
            .collect();
        let original = (0..)
            .filter(|i| !gone.contains(i))
            .nth(shifted)
            .unwrap_or(shifted);
        return format!("{array}[{original}]{tail}");
    }
    field.to_string()
}

/// The keys of the table `section` (e.g. the names under `[providers]`), however bad the file.
pub(super) fn section_keys(text: &str, section: &str) -> Vec<String> {
    let (table, _) = DeTable::parse_recoverable(text);
    match table.get_ref().get(section).map(|v| v.get_ref()) {
        Some(DeValue::Table(t)) => t.keys().map(|k| k.get_ref().to_string()).collect(),
        _ => Vec::new(),
    }
}

/// One step of a path into a TOML tree: a key of a table or an index into an array.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `exec.allow[2].args`, the way problems name fields.
fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The path of the deepest entry whose key or value span contains `span`.
///
/// A `[table]`'s own span is its header, its entries lie elsewhere, so every table is searched,
/// and so is every array (`[[bindings]]` entries, elements of `allow = [...]`).
fn entry_at(table: &DeTable<'_>, span: &Range<usize>) -> Option<Vec<Step>> {
    let mut best: Option<Vec<Step>> = None;
    for (key, value) in table.iter() {
        let found = match value_at(value, span) {
            Some(mut path) => {
                path.insert(0, Step::Key(key.get_ref().to_string()));
                Some(path)
            }
            None if contains(&key.span(), span) => Some(vec![Step::Key(key.get_ref().to_string())]),
            None => None,
        };
        if found.as_ref().is_some_and(|p| deeper(p, &best)) {
            best = found;
        }
    }
    best
}

/// The path inside `value` (empty = the value itself) of the deepest part containing `span`.
fn value_at(value: &Spanned<DeValue<'_>>, span: &Range<usize>) -> Option<Vec<Step>> {
    let inner = match value.get_ref() {
        DeValue::Table(t) => entry_at(t, span),
        DeValue::Array(items) => {
            let mut best: Option<Vec<Step>> = None;
            for (i, item) in items.iter().enumerate() {
                if let Some(mut path) = value_at(item, span) {
                    path.insert(0, Step::Index(i));
                    if deeper(&path, &best) {
                        best = Some(path);
                    }
                }
            }
            best
        }
        _ => None,
    };
    inner.or_else(|| contains(&value.span(), span).then(Vec::new))
}

fn deeper(path: &[Step], best: &Option<Vec<Step>>) -> bool {
    best.as_ref().is_none_or(|b| path.len() > b.len())
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Removes the entry at `path`; false when there is none.
fn remove(table: &mut DeTable<'_>, path: &[Step]) -> bool {
    let [Step::Key(first), rest @ ..] = path else {
        return false;
    };
    if rest.is_empty() {
        return table.remove(first.as_str()).is_some();
    }
    match table.get_mut(first.as_str()) {
        Some(value) => remove_in(value.get_mut(), rest),
        None => false,
    }
}

/// Removes the part of `value` at the non-empty `path`.
fn remove_in(value: &mut DeValue<'_>, path: &[Step]) -> bool {
    match (value, path) {
        (DeValue::Table(t), _) => remove(t, path),
        (DeValue::Array(items), [Step::Index(i), rest @ ..]) if *i < items.len() => {
            if rest.is_empty() {
                let kept: DeArray<'_> = items
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| j != i)
                    .map(|(_, item)| item.clone())
                    .collect();
                *items = kept;
                true
            } else {
                remove_in(items.as_mut()[*i].get_mut(), rest)
            }
        }
        _ => false,
    }
}
