//! The text of the system prompt, layer by layer, within the caps.

use super::files::FileCache;
use super::report::{FileReport, LayerReport};
use crate::memory::{MEMORY_FILE, daily_log};
use chrono::NaiveDate;
use clawbus_core::config::PromptDef;
use std::path::Path;

/// Workspace files of layer 1 (`soul`).
pub const SOUL_FILES: &[&str] = &["SOUL.md"];
/// Workspace files of layer 2 (`workspace`), in order.
pub const WORKSPACE_FILES: &[&str] = &["AGENTS.md", "TOOLS.md", "IDENTITY.md", "USER.md"];

/// One layer's text and what it is made of.
pub(super) struct Layer {
    pub name: &'static str,
    pub text: String,
}

impl Layer {
    pub(super) fn report(&self) -> LayerReport {
        LayerReport {
            name: self.name,
            chars: self.text.chars().count(),
            placement: "system",
        }
    }
}

/// What is left of the total cap while files are added.
pub(super) struct Budget {
    pub caps: PromptDef,
    pub total_left: usize,
}

impl Budget {
    pub(super) fn new(caps: &PromptDef) -> Self {
        Self {
            caps: caps.clone(),
            total_left: caps.total_max_chars,
        }
    }
}

/// Which end of a cut file is kept: the head of instructions, the tail (newest entries) of a
/// daily log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Head,
    Tail,
}

/// Layers 1 and 2: each file present, under its name, within the file and total caps.
pub(super) fn file_layer(
    name: &'static str,
    title: &str,
    files: &[&str],
    workspace: &Path,
    cache: &FileCache,
    budget: &mut Budget,
    reports: &mut Vec<FileReport>,
) -> Layer {
    let mut text = String::new();
    for file in files {
        let content = cache.read(workspace, file);
        let limit = budget.caps.file_max_chars.min(budget.total_left);
        let cap = if budget.caps.file_max_chars <= budget.total_left {
            "file"
        } else {
            "total"
        };
        let (block, report) = file_block(
            name,
            file,
            file,
            content.as_deref(),
            limit,
            cap,
            Keep::Head,
            &budget.caps,
        );
        budget.total_left -= report.injected_chars;
        text.push_str(&block);
        reports.push(report);
    }
    if !text.is_empty() {
        text.insert_str(0, &format!("# {title}\n"));
    }
    Layer { name, text }
}

/// The names a day's memory layer shows: made once a day, not every turn.
pub(super) struct MemoryNames {
    /// The day.
    pub date: NaiveDate,
    today: String,
    today_shown: String,
    /// Yesterday's log and how it is shown.
    yesterday: Option<(String, String)>,
    heading: String,
}

impl MemoryNames {
    pub(super) fn of(date: NaiveDate) -> Self {
        let today = daily_log(date);
        Self {
            date,
            today_shown: format!("{today} (today)"),
            yesterday: date.pred_opt().map(|y| {
                let log = daily_log(y);
                let shown = format!("{log} (yesterday)");
                (log, shown)
            }),
            heading: format!(
                "# Memory\nDurable facts live in {MEMORY_FILE}, the daily log in memory/YYYY-MM-DD.md (today: {today}); find older notes with memory_search and memory_get.\n"
            ),
            today,
        }
    }
}

/// Layer 3: MEMORY.md, yesterday's and today's daily log, within the memory cap (and what is
/// left of the total). Today's log is served first and keeps its tail, then MEMORY.md its head,
/// then yesterday's log its tail; they are shown oldest first.
pub(super) fn memory_layer(
    names: &MemoryNames,
    workspace: &Path,
    cache: &FileCache,
    budget: &mut Budget,
    reports: &mut Vec<FileReport>,
) -> Layer {
    let mut memory_left = budget.caps.memory_max_chars.min(budget.total_left);
    let memory_cap = if budget.caps.memory_max_chars <= budget.total_left {
        "memory"
    } else {
        "total"
    };
    // (path, shown as, keep) in the order the budget serves them.
    let mut wanted = vec![
        (names.today.as_str(), names.today_shown.as_str(), Keep::Tail),
        (MEMORY_FILE, MEMORY_FILE, Keep::Head),
    ];
    if let Some((log, shown)) = &names.yesterday {
        wanted.push((log.as_str(), shown.as_str(), Keep::Tail));
    }
    let mut blocks: Vec<(&str, String, FileReport)> = Vec::new();
    for (path, shown, keep) in wanted {
        let content = cache.read(workspace, path);
        let (limit, cap) = if budget.caps.file_max_chars < memory_left {
            (budget.caps.file_max_chars, "file")
        } else {
            (memory_left, memory_cap)
        };
        let (block, report) = file_block(
            "memory",
            path,
            shown,
            content.as_deref(),
            limit,
            cap,
            keep,
            &budget.caps,
        );
        memory_left -= report.injected_chars;
        budget.total_left -= report.injected_chars;
        blocks.push((path, block, report));
    }
    let order = [
        Some(MEMORY_FILE),
        names.yesterday.as_ref().map(|(log, _)| log.as_str()),
        Some(names.today.as_str()),
    ];
    let mut text = names.heading.clone();
    for path in order.iter().flatten() {
        if let Some(i) = blocks.iter().position(|(p, _, _)| p == path) {
            let (_, block, report) = blocks.remove(i);
            text.push_str(&block);
            reports.push(report);
        }
    }
    Layer {
        name: "memory",
        text,
    }
}

/// The block of one file (heading, text, truncation marker) and its report line.
#[allow(clippy::too_many_arguments)]
fn file_block(
    layer: &'static str,
    path: &str,
    shown: &str,
    content: Option<&str>,
    limit: usize,
    cap: &'static str,
    keep: Keep,
    caps: &PromptDef,
) -> (String, FileReport) {
    let mut report = FileReport {
        path: path.to_string(),
        layer,
        present: content.is_some(),
        chars: 0,
        injected_chars: 0,
        truncated: false,
        cut_by: None,
    };
    let Some(content) = content else {
        return (String::new(), report);
    };
    let content = content.trim_end();
    let chars = content.chars().count();
    report.chars = chars;
    if chars == 0 {
        return (String::new(), report);
    }
    let mut block = format!("\n## {shown}\n");
    if chars <= limit {
        report.injected_chars = chars;
        block.push_str(content);
        block.push('\n');
        return (block, report);
    }
    report.injected_chars = limit;
    report.truncated = true;
    report.cut_by = Some(cap);
    let why = match cap {
        "total" => format!("; total cap of {} chars reached", caps.total_max_chars),
        "memory" => format!("; memory cap of {} chars reached", caps.memory_max_chars),
        _ => String::new(),
    };
    match keep {
        Keep::Head => {
            let kept = head(content, limit);
            if !kept.is_empty() {
                block.push_str(kept);
                block.push('\n');
            }
            block.push_str(&format!(
                "[… truncated: kept {limit} of {chars} chars of {path}{why}]\n"
            ));
        }
        Keep::Tail => {
            let which = if limit == 0 { "" } else { "the last " };
            block.push_str(&format!(
                "[… truncated: kept {which}{limit} of {chars} chars of {path}{why}]\n"
            ));
            let kept = tail(content, chars, limit);
            if !kept.is_empty() {
                block.push_str(kept);
                block.push('\n');
            }
        }
    }
    (block, report)
}

/// The first `n` chars of `s`.
pub(super) fn head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((cut, _)) => &s[..cut],
        None => s,
    }
}

/// The last `n` chars of `s`, which has `total` chars.
fn tail(s: &str, total: usize, n: usize) -> &str {
    if n >= total {
        return s;
    }
    match s.char_indices().nth(total - n) {
        Some((cut, _)) => &s[cut..],
        None => "",
    }
}
