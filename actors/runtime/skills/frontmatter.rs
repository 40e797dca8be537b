//! Splitting a `SKILL.md` into its YAML frontmatter and reading the fields clawbus uses.
//!
//! Unknown keys (`homepage`, `license`, `allowed-tools`, other `metadata` vendors) are ignored.
//! A list may be written as a single string (`bins: uv`).

use super::Requirements;
use serde::Deserialize;
use std::borrow::Cow;

/// The fields of a frontmatter that matter here.
#[derive(Debug, Default)]
pub(super) struct Frontmatter {
    pub name: Option<String>,
    pub description: Option<String>,
    pub requires: Requirements,
    pub os: Vec<String>,
    pub always: bool,
}

/// Why a frontmatter was rejected, at a 1-based line of the `SKILL.md` (column 0 = unknown).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FrontmatterError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

#[derive(Deserialize, Default)]
struct Head {
    name: Option<String>,
    description: Option<String>,
    metadata: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize, Default)]
struct WithMetadata {
    #[serde(default)]
    metadata: Metadata,
}

/// `metadata`: the `openclaw` entry (or `clawbus`, which wins when both are given).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    openclaw: Option<OpenClaw>,
    clawbus: Option<OpenClaw>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OpenClaw {
    always: bool,
    os: List,
    requires: Requires,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Requires {
    bins: List,
    any_bins: List,
    env: List,
    config: List,
}

/// A list of strings, or one string standing for a list of one.
#[derive(Deserialize, Default)]
#[serde(from = "OneOrMany")]
struct List(Vec<String>);

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl From<OneOrMany> for List {
    fn from(v: OneOrMany) -> Self {
        match v {
            OneOrMany::One(s) => List(vec![s]),
            OneOrMany::Many(v) => List(v),
        }
    }
}

/// Parses the frontmatter at the top of a `SKILL.md`.
pub(super) fn parse(text: &str) -> Result<Frontmatter, FrontmatterError> {
    let (yaml, offset) = split(text)?;
    if yaml.trim().is_empty() {
        return Err(at(
            1,
            0,
            "empty frontmatter (expected at least `description:`)",
        ));
    }
    let (head, yaml) = match serde_yaml_ng::from_str::<Head>(yaml) {
        Ok(head) => (head, Cow::Borrowed(yaml)),
        Err(e) => {
            // OpenClaw reads `description: Use when: …` line by line; quote such values and retry.
            let quoted = quote_plain_values(yaml);
            match serde_yaml_ng::from_str::<Head>(&quoted) {
                Ok(head) if quoted != yaml => (head, Cow::Owned(quoted)),
                _ => return Err(yaml_error(&e, offset)),
            }
        }
    };
    let yaml = yaml.as_ref();
    let metadata = match head.metadata {
        None => Metadata::default(),
        Some(serde_yaml_ng::Value::String(json)) => {
            serde_json::from_str(&json).map_err(|e| FrontmatterError {
                line: key_line(yaml, "metadata").map_or(1, |l| l + offset),
                col: 0,
                message: format!("`metadata` is a string but not valid JSON: {e}"),
            })?
        }
        Some(_) => {
            serde_yaml_ng::from_str::<WithMetadata>(yaml)
                .map_err(|e| yaml_error(&e, offset))?
                .metadata
        }
    };
    let oc = metadata.clawbus.or(metadata.openclaw).unwrap_or_default();
    Ok(Frontmatter {
        name: head.name.map(|n| n.trim().to_string()),
        description: head.description.map(|d| d.trim().to_string()),
        requires: Requirements {
            bins: clean(oc.requires.bins),
            any_bins: clean(oc.requires.any_bins),
            env: clean(oc.requires.env),
            config: clean(oc.requires.config),
        },
        os: clean(oc.os).iter().map(|o| os_name(o)).collect(),
        always: oc.always,
    })
}

/// OpenClaw's platform names, whatever spelling the skill used.
pub(super) fn os_name(os: &str) -> String {
    match os.to_ascii_lowercase().as_str() {
        "macos" | "mac" | "osx" | "darwin" => "darwin".to_string(),
        "windows" | "win" | "win32" => "win32".to_string(),
        other => other.to_string(),
    }
}

fn clean(list: List) -> Vec<String> {
    list.0
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The YAML between the opening `---` line and the closing `---` (or `...`) line, and how many
/// lines of the file come before it.
fn split(text: &str) -> Result<(&str, usize), FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(at(
            1,
            1,
            "no YAML frontmatter (expected the first line to be \"---\")",
        ));
    }
    let start = first.len();
    let mut end = start;
    for line in lines {
        if matches!(line.trim_end(), "---" | "...") {
            return Ok((&text[start..end], 1));
        }
        end += line.len();
    }
    Err(at(
        1,
        1,
        "the frontmatter is never closed (expected a line \"---\" after it)",
    ))
}

fn at(line: usize, col: usize, message: &str) -> FrontmatterError {
    FrontmatterError {
        line,
        col,
        message: message.to_string(),
    }
}

/// A YAML error placed in the file; the line numbers inside libyaml's message are shifted too.
fn yaml_error(e: &serde_yaml_ng::Error, offset: usize) -> FrontmatterError {
    let (line, col) = e
        .location()
        .map_or((1, 0), |l| (l.line() + offset, l.column()));
    FrontmatterError {
        line,
        col,
        message: format!(
            "invalid frontmatter: {}",
            shift_lines(&e.to_string(), offset)
        ),
    }
}

/// Adds `offset` to every number that follows `line ` in `message`.
fn shift_lines(message: &str, offset: usize) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("line ") {
        let (before, after) = rest.split_at(i + "line ".len());
        out.push_str(before);
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// Top-level `key: plain value` lines whose value holds `": "` (invalid YAML, fine for OpenClaw's
/// line reader) get the value double-quoted; every other line is kept, so line numbers hold.
fn quote_plain_values(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let end = &line[body.len()..];
        let flat = body
            .split_once(':')
            .filter(|(key, _)| {
                !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .map(|(key, value)| (key, value.trim()))
            .filter(|(_, value)| {
                value.contains(": ")
                    && !value.starts_with(['"', '\'', '{', '[', '|', '>', '&', '*', '!'])
            });
        match flat {
            Some((key, value)) => {
                let quoted = serde_json::Value::from(value).to_string();
                out.push_str(&format!("{key}: {quoted}{end}"));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The 1-based line (within `yaml`) of the top-level `key:`.
fn key_line(yaml: &str, key: &str) -> Option<usize> {
    yaml.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}
