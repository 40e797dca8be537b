//! The `edit` tool: exact-match replacement in a text file of the workspace.

use super::read::{open, open_error};
use super::write::store;
use super::{Tool, ToolContext, ToolError, ToolOutput, blocking, confine, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use std::io::Read;
use std::path::Path;

/// Largest file `edit` works on.
const MAX_FILE_BYTES: u64 = 8 << 20;

/// `edit {path, old_string, new_string, replace_all?}`: replaces the one exact occurrence of
/// `old_string` (every occurrence with `replace_all`) and writes the file back atomically. Fails
/// clearly when the text is missing or, without `replace_all`, not unique. Confined like `write`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

#[async_trait]
impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn description(&self) -> &'static str {
        "Replace text in a file of your workspace. `old_string` must match the file exactly \
         (whitespace included) and only once, unless `replace_all` is true; include surrounding \
         lines to make it unique. Read the file first."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "File path, relative to the workspace." },
                "old_string": { "type": "string", "description": "The exact text to replace." },
                "new_string": { "type": "string", "description": "The text to put in its place." },
                "replace_all": { "type": "boolean", "description": "Replace every occurrence. Default false." }
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("edit", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let workspace = ctx.workspace.clone();
        blocking("edit", move || edit(&workspace, &args)).await
    }
}

fn edit(workspace: &Path, args: &Args) -> ToolOutput {
    let shown = &args.path;
    if args.old_string.is_empty() {
        return ToolError::new("invalid_arguments", "old_string is empty")
            .suggest("give the exact text to replace; use write to create a file")
            .into();
    }
    if args.old_string == args.new_string {
        return ToolOutput::error(
            "invalid_arguments",
            "old_string and new_string are the same; nothing would change",
        );
    }
    let path = match confine(workspace, shown) {
        Ok(path) => path,
        Err(e) => {
            tracing::warn!(tool = "edit", path = %shown, error = %e, "Path refused.");
            return ToolOutput::error("path_refused", e);
        }
    };
    let text = match load(&path, shown) {
        Ok(text) => text,
        Err(out) => return out,
    };
    let count = text.matches(args.old_string.as_str()).count();
    let replace_all = args.replace_all.unwrap_or(false);
    let new = match count {
        0 => {
            return ToolError::new("no_match", format!("old_string not found in {shown}"))
                .suggest(
                    "read the file and copy the text exactly, including whitespace and line breaks",
                )
                .into();
        }
        1 => text.replacen(args.old_string.as_str(), &args.new_string, 1),
        _ if replace_all => text.replace(args.old_string.as_str(), &args.new_string),
        n => {
            return ToolError::new(
                "ambiguous_match",
                format!("old_string matches {n} times in {shown}; add context or set replace_all"),
            )
            .suggest("include the lines around the place to change so that it matches once")
            .into();
        }
    };
    if let Err(out) = store(workspace, shown, &new) {
        return out;
    }
    let noun = if count == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    ToolOutput::ok(format!("edited {shown}: replaced {count} {noun}"))
}

/// The file's text, refusing directories, binary and non-UTF-8 files and huge files.
fn load(path: &Path, shown: &str) -> Result<String, ToolOutput> {
    let file = open(path).map_err(|e| open_error(shown, &e))?;
    let meta = file.metadata().map_err(|e| io_error(shown, &e))?;
    if meta.is_dir() {
        return Err(ToolOutput::error(
            "is_directory",
            format!("path {shown:?} is a directory, not a file"),
        ));
    }
    if !meta.is_file() {
        return Err(ToolOutput::error(
            "not_a_file",
            format!("path {shown:?} is not a regular file"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolOutput::error(
            "too_large",
            format!(
                "file {shown:?} is {} bytes; edit works on files up to {MAX_FILE_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(shown, &e))?;
    if bytes.contains(&0) {
        return Err(ToolOutput::error(
            "binary_file",
            format!("file {shown:?} is binary, not text"),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error("not_utf8", format!("file {shown:?} is not UTF-8 text")))
}

fn io_error(shown: &str, e: &std::io::Error) -> ToolOutput {
    tracing::warn!(tool = "edit", path = %shown, error = %e, "Edit failed.");
    ToolOutput::error("io", format!("cannot edit {shown:?}: {e}"))
}
