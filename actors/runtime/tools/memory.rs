//! The `memory_search` and `memory_get` tools.

use super::{Tool, ToolContext, ToolOutput, blocking, confine, parse_args};
use crate::memory::{MAX_FILE_BYTES, MEMORY_DIR, MEMORY_FILE, MemoryIndex};
use async_trait::async_trait;
use bus::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Results when the call gives no `k`.
const DEFAULT_K: usize = 5;
/// Results one call returns at most.
const MAX_K: usize = 50;
/// Characters of a chunk's text shown in a search result; `memory_get` has the rest.
const SNIPPET_CHARS: usize = 700;
/// Lines `memory_get` returns at most in one call.
const MAX_GET_LINES: usize = 2000;

type Indexes = Arc<Mutex<HashMap<PathBuf, Arc<Mutex<MemoryIndex>>>>>;

/// `memory_search {query, k?}`: the best-matching chunks of the workspace's memory files.
/// Keeps one [`MemoryIndex`] per workspace, refreshed (changed files only) before each search.
#[derive(Clone)]
pub struct MemorySearchTool {
    indexes: Indexes,
    clock: Arc<dyn Clock>,
}

impl Default for MemorySearchTool {
    fn default() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }
}

impl MemorySearchTool {
    /// A search tool whose recency decay counts from `clock`'s now.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            indexes: Arc::default(),
            clock,
        }
    }
}

#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    k: Option<usize>,
}

#[async_trait]
impl Tool for MemorySearchTool {
    fn name(&self) -> &'static str {
        "memory_search"
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Search your memory (MEMORY.md and every file under memory/, including older daily logs) \
         by keywords. Returns the best-matching passages, newer notes first among equals, each \
         with its file and line range; call memory_get for more of a file."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "query": { "type": "string", "description": "Keywords to look for." },
                "k": { "type": "integer", "minimum": 1, "description": "Most results to return. Default 5, at most 50." }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: SearchArgs = match parse_args("memory_search", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let index = {
            let mut all = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
            all.entry(ctx.workspace.clone()).or_default().clone()
        };
        let now =
            DateTime::<Utc>::from_timestamp_millis(self.clock.now_ms() as i64).unwrap_or_default();
        let workspace = ctx.workspace.clone();
        blocking("memory_search", move || {
            let mut index = index.lock().unwrap_or_else(|e| e.into_inner());
            search(&mut index, &workspace, &args, now)
        })
        .await
    }
}

fn search(
    index: &mut MemoryIndex,
    workspace: &Path,
    args: &SearchArgs,
    now: DateTime<Utc>,
) -> ToolOutput {
    if let Err(e) = index.refresh(workspace) {
        tracing::warn!(tool = "memory_search", workspace = %workspace.display(), error = %e, "Memory index not refreshed.");
        return ToolOutput::error("io", "the memory files could not be read");
    }
    let k = args.k.unwrap_or(DEFAULT_K).clamp(1, MAX_K);
    let hits = index.search(&args.query, k, now);
    let results: Vec<serde_json::Value> = hits
        .iter()
        .map(|h| {
            json!({
                "path": h.path,
                "from_line": h.from_line,
                "to_line": h.to_line,
                "score": (h.score * 1000.0).round() / 1000.0,
                "text": snippet(&h.text),
            })
        })
        .collect();
    let note = if results.is_empty() {
        "no memory matches these keywords; try other words"
    } else {
        "use memory_get with path, from_line and to_line to read more"
    };
    ToolOutput::ok(
        json!({ "query": args.query, "results": results, "files_searched": index.file_count(), "note": note })
            .to_string(),
    )
}

fn snippet(text: &str) -> String {
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// `memory_get {path, from_line?, to_line?}`: lines of `MEMORY.md` or a file under `memory/`
/// (1-based, inclusive; the whole file by default, at most 2000 lines). Other paths are refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryGetTool;

#[derive(Deserialize)]
struct GetArgs {
    path: String,
    from_line: Option<usize>,
    to_line: Option<usize>,
}

#[async_trait]
impl Tool for MemoryGetTool {
    fn name(&self) -> &'static str {
        "memory_get"
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Read lines of a memory file: MEMORY.md or a file under memory/ (such as a daily log \
         memory/2026-03-01.md or a path memory_search returned). Lines are 1-based and inclusive; \
         without from_line/to_line the whole file (at most 2000 lines)."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "MEMORY.md or memory/<file>.md, relative to the workspace." },
                "from_line": { "type": "integer", "minimum": 1, "description": "First line (1-based). Default 1." },
                "to_line": { "type": "integer", "minimum": 1, "description": "Last line (inclusive). Default: the end, at most 2000 lines." }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: GetArgs = match parse_args("memory_get", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let workspace = ctx.workspace.clone();
        blocking("memory_get", move || get(&workspace, &args)).await
    }
}

fn get(workspace: &Path, args: &GetArgs) -> ToolOutput {
    let shown = &args.path;
    let refused = || {
        ToolOutput::error(
            "path_refused",
            format!(
                "path {shown:?} is not a memory file (expected {MEMORY_FILE} or {MEMORY_DIR}/<file>)"
            ),
        )
    };
    let (root, real) = match workspace
        .canonicalize()
        .map_err(|e| e.to_string())
        .and_then(|root| {
            Ok((
                root.clone(),
                confine(&root, shown).map_err(|e| e.to_string())?,
            ))
        }) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(tool = "memory_get", path = %shown, error = %e, "Path refused.");
            return ToolOutput::error("path_refused", e);
        }
    };
    if real != root.join(MEMORY_FILE) && !real.starts_with(root.join(MEMORY_DIR)) {
        tracing::warn!(tool = "memory_get", path = %shown, "Path outside the memory files refused.");
        return refused();
    }
    let meta = match std::fs::metadata(&real) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => {
            return ToolOutput::error("not_a_file", format!("path {shown:?} is not a file"));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error("not_found", format!("memory file {shown:?} does not exist"));
        }
        Err(e) => {
            tracing::warn!(tool = "memory_get", path = %shown, error = %e, "Memory file unreadable.");
            return ToolOutput::error("io", format!("memory file {shown:?} cannot be read"));
        }
    };
    if meta.len() > MAX_FILE_BYTES {
        return ToolOutput::error(
            "io",
            format!("memory file {shown:?} is larger than {MAX_FILE_BYTES} bytes"),
        );
    }
    let text = match std::fs::read_to_string(&real) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return ToolOutput::error("not_utf8", format!("file {shown:?} is not UTF-8 text"));
        }
        Err(e) => {
            tracing::warn!(tool = "memory_get", path = %shown, error = %e, "Memory file unreadable.");
            return ToolOutput::error("io", format!("memory file {shown:?} cannot be read"));
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let from = args.from_line.unwrap_or(1).max(1);
    if from > total.max(1) {
        return ToolOutput::error(
            "offset_out_of_range",
            format!("from_line {from} is past the end of {shown:?} ({total} lines)"),
        );
    }
    let last = from + MAX_GET_LINES - 1;
    let to = args.to_line.unwrap_or(total).min(total).min(last);
    if to < from && total > 0 {
        return ToolOutput::error(
            "invalid_arguments",
            format!("to_line {to} is before from_line {from}"),
        );
    }
    let shown_lines = lines.get(from - 1..to).unwrap_or_default().join("\n");
    ToolOutput::ok(
        json!({ "path": shown, "from_line": from, "to_line": to, "total_lines": total, "text": shown_lines })
            .to_string(),
    )
}
