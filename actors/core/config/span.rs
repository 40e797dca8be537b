//! Turning byte spans and toml/serde messages into [`Problem`]s people can act on.

use super::Problem;
use std::ops::Range;
use std::path::Path;

/// The text of one file, so problems can be placed at `line:col`.
pub(super) struct Source<'a> {
    /// The file, as shown in problems.
    pub path: &'a Path,
    /// Its contents.
    pub text: &'a str,
}

impl Source<'_> {
    /// A problem at the start of `span` (no position when `span` is `None`); `message` is a
    /// sentence or a parser's typed error, shown as it displays.
    pub(super) fn at(
        &self,
        span: Option<Range<usize>>,
        field: impl Into<String>,
        message: impl std::fmt::Display,
    ) -> Problem {
        let (line, col) = span.map_or((0, 0), |s| line_col(self.text, s.start));
        Problem {
            path: self.path.to_path_buf(),
            line,
            col,
            field: field.into(),
            message: message.to_string(),
        }
    }
}

/// A problem about a whole file or a flag, with no position in any text.
pub(super) fn positionless(path: &Path, field: &str, message: impl std::fmt::Display) -> Problem {
    Problem {
        path: path.to_path_buf(),
        line: 0,
        col: 0,
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// 1-based line and 1-based column (in characters) of a byte offset.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// Best guess at the dotted key on the line of a syntax error: the nearest `[table]` header above
/// plus the key before `=` (the recovered tree's spans are not trustworthy after a syntax error).
pub(super) fn syntax_field(text: &str, offset: usize) -> String {
    let (line_no, _) = line_col(text, offset);
    let lines: Vec<&str> = text.lines().collect();
    let Some(line) = lines.get(line_no.saturating_sub(1)).map(|l| l.trim()) else {
        return String::new();
    };
    let header = |l: &str| {
        let name = l
            .trim_start_matches('[')
            .split(']')
            .next()
            .unwrap_or_default();
        unquote(name)
    };
    if line.starts_with('[') {
        return header(line);
    }
    let key = match line.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => unquote(key),
        _ => return String::new(),
    };
    let table = lines[..line_no.saturating_sub(1)]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['))
        .map(header);
    match table {
        Some(table) if !table.is_empty() => format!("{table}.{key}"),
        _ => key,
    }
}

/// `a . "b c"` → `a.b c`.
fn unquote(key: &str) -> String {
    let parts: Vec<&str> = key
        .split('.')
        .map(|p| p.trim().trim_matches(['"', '\'']))
        .collect();
    parts.join(".")
}

/// The field named in serde's "missing field `x`" message.
pub(super) fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(name, _)| name)
}

/// Rewrites a toml/serde message as `<what is wrong> (expected <what>)`.
pub(super) fn describe(message: &str) -> String {
    if missing_field(message).is_some() {
        return "missing (expected a value for this required field)".to_string();
    }
    let Some((what, expected)) = message.split_once(", expected ") else {
        let expected = match message {
            "duplicate key" => "each key once per table",
            m if m.contains("there are no fields") => "no fields here",
            _ => "valid TOML",
        };
        return format!("{} (expected {expected})", quote_ticks(message));
    };
    let expected = if what.starts_with("unknown field") || what.starts_with("unknown variant") {
        let names = ticked(expected);
        if names.is_empty() {
            expected.to_string()
        } else {
            format!("one of: {}", names.join(", "))
        }
    } else {
        pretty_type(expected)
    };
    format!("{} (expected {expected})", quote_ticks(what))
}

/// The `` `name` `` tokens of a serde list such as "`a`, `b` or `c`".
fn ticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// `` `x` `` → `"x"`, matching how the rest of the messages quote values.
fn quote_ticks(s: &str) -> String {
    if s.matches('`').count() % 2 == 0 {
        s.replace('`', "\"")
    } else {
        s.to_string()
    }
}

/// Serde's Rust type names in words.
fn pretty_type(expected: &str) -> String {
    match expected {
        "u8" => "an integer from 0 to 255".to_string(),
        "u16" => "an integer from 0 to 65535".to_string(),
        "u32" => "an integer from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a non-negative integer".to_string(),
        "i32" | "i64" | "isize" => "an integer".to_string(),
        "a sequence" => "an array".to_string(),
        "a map" => "a table".to_string(),
        s if s.starts_with("struct ") => "a table".to_string(),
        s => s.to_string(),
    }
}
