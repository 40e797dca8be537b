//! The built-in scripted model: regex rules from a TOML file, no network.
//!
//! ```toml
//! [[rule]]
//! match = "read (?P<path>\\S+)"  # regex on the last user message
//! tool = "read"                 # call this tool…
//! args = { path = "$path" }     # …with these args ($name / ${name} = capture group)
//! then = "Here is {{result}}"   # reply once the tool result is back ($name: a capture)
//!
//! [[rule]]
//! match = "(?i)hello"
//! reply = "Hello! I am a scripted agent."
//! ```
//! The first matching rule wins; with no match the model answers `echo: <last user message>`.

use std::ops::Range;
use std::path::Path;
use std::sync::LazyLock;

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::accumulate::truncate_chars;
use super::{ChatModel, ChatRequest, ModelError, ModelReply, Role, ToolCall};
use clawbus_core::config::rules::RawProblem;

/// How much of a tool result `{{result}}` carries.
const RESULT_CHARS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(rename = "match")]
    pattern: Spanned<String>,
    reply: Option<Spanned<String>>,
    tool: Option<Spanned<String>>,
    args: Option<Spanned<toml::Table>>,
    then: Option<Spanned<String>>,
}

#[derive(Debug)]
enum Action {
    Reply(String),
    Tool { name: String, args: Value },
}

#[derive(Debug)]
struct Rule {
    re: Regex,
    action: Action,
    then: Option<String>,
}

/// A model that answers from regex rules: deterministic, offline, for demos and tests.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    rules: Vec<Rule>,
}

impl ScriptedModel {
    /// A model with no rules: it answers `echo: <last user message>`.
    pub fn echo() -> Self {
        Self::default()
    }

    /// Loads rules from a TOML file; errors read `path:line:col: field "x": … (expected …)`, one
    /// per line, all of them.
    pub(crate) fn from_rules_file(path: &Path) -> Result<Self, RulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        parse(&text, path)
    }

    #[cfg(test)]
    /// Loads rules from TOML text; errors name the source as `<rules>`.
    pub(crate) fn from_rules_str(s: &str) -> Result<Self, RulesError> {
        parse(s, Path::new("<rules>"))
    }

    /// Every problem of a rules file, in the format of every other file `clawbus check` reads.
    pub fn check_rules_file(path: &Path) -> clawbus_core::config::FileReport {
        clawbus_core::config::rules::file_report(path, |text| {
            clawbus_core::config::rules::check_text(path, text, rule_problems).1
        })
    }

    fn matching_rule(&self, text: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.re.is_match(text))
    }
}

/// A rules file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RulesError {
    /// The file could not be read.
    #[error("{}: cannot read rules file: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Every problem found in it, one a line (`path:line:col: field "x": …`).
    #[error("{}", lines(.0))]
    Problems(Vec<clawbus_core::config::Problem>),
}

/// Problems one a line.
fn lines(problems: &[clawbus_core::config::Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

fn parse(text: &str, path: &Path) -> Result<ScriptedModel, RulesError> {
    // Each rule's regex is compiled once, by the check, and kept.
    let mut compiled = Vec::new();
    let (file, problems) = clawbus_core::config::rules::check_text(path, text, |f: &RulesFile| {
        let (problems, regexes) = checked(f);
        compiled = regexes;
        problems
    });
    let file = match file {
        Some(f) if problems.is_empty() => f,
        _ => return Err(RulesError::Problems(problems)),
    };
    let mut rules = Vec::new();
    for (spanned, re) in file.rule.into_iter().zip(compiled) {
        let raw = spanned.into_inner();
        // Checked above: the regex compiles and exactly one action is set.
        let Some(re) = re else {
            continue;
        };
        let action = match (raw.reply, raw.tool) {
            (Some(reply), None) => Action::Reply(reply.into_inner()),
            (None, Some(tool)) => {
                let args = raw.args.map(Spanned::into_inner).unwrap_or_default();
                Action::Tool {
                    name: tool.into_inner(),
                    args: serde_json::to_value(args).unwrap_or(Value::Null),
                }
            }
            _ => continue,
        };
        rules.push(Rule {
            re,
            action,
            then: raw.then.map(Spanned::into_inner),
        });
    }
    Ok(ScriptedModel { rules })
}

/// What the shape of a rules file cannot say: bad regexes, actions, capture references.
fn rule_problems(file: &RulesFile) -> Vec<RawProblem> {
    checked(file).0
}

/// [`rule_problems`], and each rule's regex (`None` where it does not compile).
fn checked(file: &RulesFile) -> (Vec<RawProblem>, Vec<Option<Regex>>) {
    let mut regexes = Vec::with_capacity(file.rule.len());
    let mut problems = Vec::new();
    let mut add = |span: Option<Range<usize>>, field: &str, message: String| {
        problems.push(RawProblem {
            span,
            field: field.to_owned(),
            message,
        });
    };
    for spanned in &file.rule {
        let raw = spanned.get_ref();
        let re = match Regex::new(raw.pattern.get_ref()) {
            Ok(re) => Some(re),
            Err(e) => {
                add(
                    Some(raw.pattern.span()),
                    "match",
                    format!(
                        "invalid regex: {} (expected a regular expression matched against the last user message)",
                        one_line(&e.to_string())
                    ),
                );
                None
            }
        };
        match (&raw.reply, &raw.tool) {
            (Some(_), None) => {
                for (field, span) in [
                    ("args", raw.args.as_ref().map(Spanned::span)),
                    ("then", raw.then.as_ref().map(Spanned::span)),
                ] {
                    if let Some(span) = span {
                        add(
                            Some(span),
                            field,
                            "only allowed with \"tool\", not \"reply\" (expected it in a rule with tool = \"…\")".to_owned(),
                        );
                    }
                }
            }
            (None, Some(_)) => {
                if let (Some(re), Some(args)) = (&re, &raw.args) {
                    for name in unknown_references(args.get_ref(), re) {
                        add(
                            Some(spanned.span()),
                            "args",
                            format!("\"${name}\" is not a capture group of \"match\" (expected a group of the rule's regex, e.g. (?P<{name}>…))"),
                        );
                    }
                }
            }
            (Some(_), Some(tool)) => add(
                Some(tool.span()),
                "tool",
                "a rule has either \"reply\" or \"tool\", not both (expected one of them)".to_owned(),
            ),
            (None, None) => add(
                Some(spanned.span()),
                "",
                "rule needs one of \"reply\" or \"tool\", has neither (expected reply = \"…\" or tool = \"…\")".to_owned(),
            ),
        }
        regexes.push(re);
    }
    (problems, regexes)
}

/// The `$name` / `${name}` in the args that name no capture group of the rule's regex.
fn unknown_references(args: &toml::Table, re: &Regex) -> Vec<String> {
    static REFERENCE: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"\$(?:\{([^}]*)\}|([A-Za-z0-9_]+))").ok());
    let Some(reference) = REFERENCE.as_ref() else {
        return Vec::new();
    };
    let mut strings = Vec::new();
    collect_strings(&toml::Value::Table(args.clone()), &mut strings);
    let mut unknown = Vec::new();
    for s in strings {
        for caps in reference.captures_iter(&s.replace("$$", "")) {
            let Some(name) = caps.get(1).or_else(|| caps.get(2)).map(|m| m.as_str()) else {
                continue;
            };
            let known = match name.parse::<usize>() {
                Ok(n) => n < re.captures_len(),
                Err(_) => re.capture_names().flatten().any(|n| n == name),
            };
            if !known {
                unknown.push(name.to_owned());
            }
        }
    }
    unknown
}

fn collect_strings(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        toml::Value::Table(t) => t.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

/// Replaces `$name` / `${name}` in every string of `v` with the capture.
fn expand(v: &Value, caps: &regex::Captures<'_>) -> Value {
    match v {
        Value::String(s) => {
            let mut out = String::new();
            caps.expand(s, &mut out);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| expand(i, caps)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, i)| (k.clone(), expand(i, caps)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn reply_text(text: String) -> ModelReply {
    ModelReply {
        text: Some(text),
        finish_reason: Some("stop".to_owned()),
        ..ModelReply::default()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        let last_user = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.as_deref())
            .unwrap_or("");
        let rule = self.matching_rule(last_user);
        if let Some(last) = req.messages.last().filter(|m| m.role == Role::Tool) {
            let result = truncate_chars(last.content.as_deref().unwrap_or(""), RESULT_CHARS);
            let template = rule.and_then(|r| r.then.as_deref()).unwrap_or("{{result}}");
            // Captures first (`$name`, `${name}`; `$$` is a literal `$`), then the result, whose
            // own `$` signs must stay as they are.
            let mut expanded = String::new();
            match rule.and_then(|r| r.re.captures(last_user)) {
                Some(caps) => caps.expand(template, &mut expanded),
                None => expanded.push_str(template),
            }
            return Ok(reply_text(expanded.replace("{{result}}", &result)));
        }
        let Some(rule) = rule else {
            return Ok(reply_text(format!("echo: {last_user}")));
        };
        match &rule.action {
            Action::Reply(text) => Ok(reply_text(text.clone())),
            Action::Tool { name, args } => {
                let Some(caps) = rule.re.captures(last_user) else {
                    return Err(ModelError::Script(format!(
                        "scripted model {:?}: rule /{}/ matched but gave no captures",
                        req.model, rule.re
                    )));
                };
                let assistants = req
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::Assistant)
                    .count();
                let call = ToolCall {
                    id: format!("call_{}", assistants + 1),
                    name: name.clone(),
                    arguments: expand(args, &caps).to_string(),
                };
                Ok(ModelReply {
                    text: None,
                    tool_calls: vec![call],
                    finish_reason: Some("tool_calls".to_owned()),
                    usage: None,
                    model: None,
                    served_model: None,
                })
            }
        }
    }
}
