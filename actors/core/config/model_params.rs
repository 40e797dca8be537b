//! `[model_params]` of an agent file and `[providers.x] max_tokens`: request parameters, checked
//! for type and range, a `tool_choice` checked against the agent's tool policy.

use super::span::Source;
use super::tools::AgentRule;
use super::{KNOWN_TOOLS, Problem, ProviderKind, ToolsDef};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

/// `tool_choice`: whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some tool (Anthropic: `any`).
    Required,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// `reasoning_effort`: how hard a reasoning model thinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEffort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
}

impl ReasoningEffort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// `stop`: one stop sequence, or several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `stop = "END"`.
    One(String),
    /// `stop = ["END", "###"]`.
    Many(Vec<String>),
}

impl Stop {
    /// As written: a string or an array (OpenAI accepts both).
    pub fn to_json(&self) -> Value {
        match self {
            Self::One(s) => Value::String(s.clone()),
            Self::Many(v) => Value::from(v.clone()),
        }
    }

    /// Always a list (Anthropic's `stop_sequences`).
    pub fn to_list(&self) -> Value {
        match self {
            Self::One(s) => Value::from(vec![s.clone()]),
            Self::Many(v) => Value::from(v.clone()),
        }
    }
}

/// The validated `[model_params]` of an agent; `None` fields are not sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelParams {
    /// Sampling temperature, 0 to 2.
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1.
    pub top_p: Option<f64>,
    /// The most tokens one answer may have (overrides `[providers.x] max_tokens`).
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Option<Stop>,
    /// Sampling seed (OpenAI-compatible servers only).
    pub seed: Option<i64>,
    /// Whether and which tool the model must call (see `model::params::tool_choice_for`).
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one answer.
    pub parallel_tool_calls: Option<bool>,
    /// Effort of reasoning models (OpenAI-compatible servers only).
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Merged into the request body last, key by key: server-specific knobs.
    pub extra: Map<String, Value>,
}

/// Body keys `extra` may not set: the client owns them.
pub const RESERVED_BODY_KEYS: &[&str] = &["model", "messages", "stream", "tools", "system"];

/// `[model_params]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelParamsFile {
    pub temperature: Option<Spanned<f64>>,
    pub top_p: Option<Spanned<f64>>,
    pub max_tokens: Option<Spanned<i64>>,
    /// A string or an array of strings, checked here for a clearer message than serde's.
    pub stop: Option<Spanned<toml::Value>>,
    pub seed: Option<Spanned<i64>>,
    pub tool_choice: Option<Spanned<String>>,
    pub parallel_tool_calls: Option<bool>,
    pub reasoning_effort: Option<Spanned<String>>,
    pub extra: Option<Spanned<toml::Table>>,
}

/// Checks `[model_params]`. `tools` is the agent's tool policy (a `tool_choice` naming a tool
/// must be one it can have); `kind` is the agent's provider kind when known (the Messages API has
/// no `seed` nor `reasoning_effort`).
pub(super) fn model_params(
    src: &Source,
    f: &ModelParamsFile,
    tools: &ToolsDef,
    kind: Option<ProviderKind>,
    problems: &mut Vec<Problem>,
) -> ModelParams {
    let mut out = ModelParams {
        temperature: ranged(src, &f.temperature, "temperature", 2.0, problems),
        top_p: ranged(src, &f.top_p, "top_p", 1.0, problems),
        parallel_tool_calls: f.parallel_tool_calls,
        ..ModelParams::default()
    };
    if let Some(n) = &f.max_tokens {
        out.max_tokens = positive(src, n, "model_params.max_tokens", problems);
    }
    if let Some(stop) = &f.stop {
        out.stop = self::stop(src, stop, problems);
    }
    let unsupported = |field: &str, span, problems: &mut Vec<Problem>| {
        problems.push(src.at(
            Some(span),
            format!("model_params.{field}"),
            "not supported by anthropic providers (expected it only for an openai-kind model, or set it with model_params.extra)",
        ));
    };
    if let Some(seed) = &f.seed {
        match kind {
            Some(ProviderKind::Anthropic) => unsupported("seed", seed.span(), problems),
            _ => out.seed = Some(*seed.get_ref()),
        }
    }
    if let Some(effort) = &f.reasoning_effort {
        let parsed = match effort.get_ref().as_str() {
            "low" => Some(ReasoningEffort::Low),
            "medium" => Some(ReasoningEffort::Medium),
            "high" => Some(ReasoningEffort::High),
            other => {
                problems.push(src.at(
                    Some(effort.span()),
                    "model_params.reasoning_effort",
                    format!("unknown effort {other:?} (expected one of: low, medium, high)"),
                ));
                None
            }
        };
        match (parsed, kind) {
            (Some(_), Some(ProviderKind::Anthropic)) => {
                unsupported("reasoning_effort", effort.span(), problems)
            }
            (parsed, _) => out.reasoning_effort = parsed,
        }
    }
    if let Some(choice) = &f.tool_choice {
        out.tool_choice = tool_choice(src, choice, tools, problems);
    }
    if let Some(extra) = &f.extra {
        for key in extra.get_ref().keys() {
            if RESERVED_BODY_KEYS.contains(&key.as_str()) {
                problems.push(src.at(
                    Some(extra.span()),
                    format!("model_params.extra.{key}"),
                    format!(
                        "{key:?} is set by clawbus itself (expected other keys than: {})",
                        RESERVED_BODY_KEYS.join(", ")
                    ),
                ));
                continue;
            }
            match serde_json::to_value(&extra.get_ref()[key]) {
                Ok(v) => {
                    out.extra.insert(key.clone(), v);
                }
                Err(e) => problems.push(src.at(
                    Some(extra.span()),
                    format!("model_params.extra.{key}"),
                    format!("cannot be sent as JSON: {e} (expected a string, number, boolean, array or table)"),
                )),
            }
        }
    }
    out
}

/// `[providers.x] max_tokens`: positive; an `anthropic` provider gets its default without one.
pub(super) fn provider_max_tokens(
    src: &Source,
    value: &Option<Spanned<i64>>,
    field: &str,
    kind: ProviderKind,
    problems: &mut Vec<Problem>,
) -> Option<u32> {
    let set = value
        .as_ref()
        .and_then(|n| positive(src, n, field, problems));
    match kind {
        ProviderKind::Anthropic => Some(set.unwrap_or(super::DEFAULT_ANTHROPIC_MAX_TOKENS)),
        _ => set,
    }
}

fn positive(
    src: &Source,
    n: &Spanned<i64>,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Option<u32> {
    match u32::try_from(*n.get_ref()) {
        Ok(v) if v > 0 => Some(v),
        _ => {
            problems.push(src.at(
                Some(n.span()),
                field,
                format!(
                    "{} is out of range (expected a number of tokens from 1 to {})",
                    n.get_ref(),
                    u32::MAX
                ),
            ));
            None
        }
    }
}

fn ranged(
    src: &Source,
    value: &Option<Spanned<f64>>,
    name: &str,
    max: f64,
    problems: &mut Vec<Problem>,
) -> Option<f64> {
    let value = value.as_ref()?;
    let v = *value.get_ref();
    if (0.0..=max).contains(&v) {
        return Some(v);
    }
    problems.push(src.at(
        Some(value.span()),
        format!("model_params.{name}"),
        format!("{v} is out of range (expected a number from 0 to {max})"),
    ));
    None
}

fn stop(src: &Source, value: &Spanned<toml::Value>, problems: &mut Vec<Problem>) -> Option<Stop> {
    let parsed = match value.get_ref() {
        toml::Value::String(s) if !s.is_empty() => Some(Stop::One(s.clone())),
        toml::Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|i| i.as_str().filter(|s| !s.is_empty()).map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Stop::Many),
        _ => None,
    };
    if parsed.is_none() {
        problems.push(src.at(
            Some(value.span()),
            "model_params.stop",
            "not a stop sequence (expected a non-empty string or a non-empty array of non-empty strings)",
        ));
    }
    parsed
}

fn tool_choice(
    src: &Source,
    value: &Spanned<String>,
    tools: &ToolsDef,
    problems: &mut Vec<Problem>,
) -> Option<ToolChoice> {
    let name = value.get_ref().as_str();
    let why = match name {
        "auto" => return Some(ToolChoice::Auto),
        "required" => return Some(ToolChoice::Required),
        "none" => return Some(ToolChoice::None),
        tool if !KNOWN_TOOLS.contains(&tool) => format!("unknown tool {tool:?}"),
        tool => match tools.rule(tool) {
            AgentRule::Allowed => return Some(ToolChoice::Tool(tool.to_owned())),
            AgentRule::NotInProfile => format!(
                "the agent cannot have tool {tool:?}: it is not in its profile nor in tools.allow"
            ),
            AgentRule::Denied(entry) => {
                format!("the agent cannot have tool {tool:?}: tools.deny removes it ({entry:?})")
            }
        },
    };
    problems.push(src.at(
        Some(value.span()),
        "model_params.tool_choice",
        format!("{why} (expected auto, required, none, or the name of a tool the agent can have)"),
    ));
    None
}
