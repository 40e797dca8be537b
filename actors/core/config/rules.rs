//! The scripted model's rules files (`agents.d/<id>/<name>.rules.toml`), read with the same parser
//! as every other file, so their problems read the same: `path:line:col: field "x": … (expected …)`.

use super::file;
use super::span::Source;
use super::{FileReport, Problem};
use serde::de::DeserializeOwned;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A problem a rules file's own checks found: where (a byte span of the text), which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawProblem {
    /// Byte span in the text; `None` for the file as a whole.
    pub span: Option<Range<usize>>,
    /// The key concerned (`match`, `args`, …); empty for a whole rule.
    pub field: String,
    /// What is wrong, ending with `(expected …)`.
    pub message: String,
}

/// Parses `text` (the file at `path`) into `T` and, when its shape is sound, runs `validate` on
/// it: the value when nothing is wrong, and every problem in position order.
pub fn check_text<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    validate: impl FnOnce(&T) -> Vec<RawProblem>,
) -> (Option<T>, Vec<Problem>) {
    let src = Source { path, text };
    let parsed = file::parse::<T>(&src);
    // The checks run on a sound shape only: a dropped key would make them report its rule again.
    let more = parsed
        .value
        .as_ref()
        .filter(|_| parsed.problems.is_empty())
        .map(validate)
        .unwrap_or_default();
    let more = more
        .into_iter()
        .map(|p| src.at(p.span, p.field, p.message))
        .collect();
    let mut parsed = parsed;
    let mut value = parsed.value.take();
    let mut problems = parsed.merge(more);
    // Within one rule a key is named alone (`field "reply"`), as the rule's own checks name it.
    for p in &mut problems {
        if let Some(rest) = p.field.strip_prefix("rule[") {
            if let Some((_, key)) = rest.split_once("].") {
                p.field = key.to_string();
            }
        }
    }
    if !problems.is_empty() {
        value = None;
    }
    (value, problems)
}

/// Every `<agents_dir>/<id>/*.rules.toml`, sorted.
pub fn rules_files(agents_dir: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(agents_dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dirs
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.filter_map(Result::ok).map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".rules.toml"))
        })
        .collect();
    files.sort();
    files
}

/// The report of one file whose problems `check` found (an unreadable file is one problem).
pub fn file_report(path: &Path, check: impl FnOnce(&str) -> Vec<Problem>) -> FileReport {
    let problems = match std::fs::read_to_string(path) {
        Ok(text) => check(&text),
        Err(e) => vec![super::validate::unreadable(path, &e)],
    };
    FileReport {
        path: path.to_path_buf(),
        problems,
    }
}
