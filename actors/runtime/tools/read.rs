//! The `read` tool: lines of a UTF-8 text file in the workspace.

use super::{Tool, ToolContext, ToolOutput, blocking, confine, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Lines shown when the call gives no `limit`.
pub(crate) const DEFAULT_LIMIT: u64 = 2000;
/// Bytes of file text one call collects at most, whatever the limit, so a huge file cannot fill
/// memory; the agent's result cap usually cuts far earlier.
const MAX_BYTES: usize = 4 << 20;

/// `read {path, offset?, limit?}`: the text of a file in the workspace, from line `offset`
/// (1-based), at most `limit` lines (2000 by default). Binary and non-UTF-8 files are refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "read"
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn description(&self) -> &'static str {
        "Read a UTF-8 text file in your workspace. `path` is relative to the workspace. Returns the \
         file's text, at most 2000 lines unless `limit` says otherwise; `offset` is the 1-based line \
         to start at, for paging through long files."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "File path, relative to the workspace." },
                "offset": { "type": "integer", "minimum": 1, "description": "First line to return (1-based). Default 1." },
                "limit": { "type": "integer", "minimum": 1, "description": "Most lines to return. Default 2000." }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("read", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let workspace = ctx.workspace.clone();
        blocking("read", move || read(&workspace, &args)).await
    }
}

fn read(workspace: &Path, args: &Args) -> ToolOutput {
    let shown = &args.path;
    let path = match confine(workspace, shown) {
        Ok(path) => path,
        Err(e) => {
            tracing::warn!(tool = "read", path = %shown, error = %e, "Path refused.");
            return ToolOutput::error("path_refused", e);
        }
    };
    let file = match open(&path) {
        Ok(file) => file,
        Err(e) => return open_error(shown, &e),
    };
    match file.metadata() {
        Ok(meta) if meta.is_dir() => {
            return ToolOutput::error(
                "is_directory",
                format!("path {shown:?} is a directory, not a file"),
            );
        }
        Ok(meta) if !meta.is_file() => {
            return ToolOutput::error(
                "not_a_file",
                format!("path {shown:?} is not a regular file"),
            );
        }
        Ok(_) => {}
        Err(e) => return io_error(shown, &e),
    }
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let lines = match collect(&mut BufReader::new(file), start, limit) {
        Ok(Collected::Binary) => {
            return ToolOutput::error("binary_file", format!("file {shown:?} is binary, not text"));
        }
        Ok(Collected::PastEnd { total }) => {
            return ToolOutput::error(
                "offset_out_of_range",
                format!("offset {start} is past the end of {shown:?} ({total} lines)"),
            );
        }
        Ok(Collected::Lines(lines)) => lines,
        Err(e) => return io_error(shown, &e),
    };
    let Ok(mut text) = String::from_utf8(lines.bytes) else {
        return ToolOutput::error("not_utf8", format!("file {shown:?} is not UTF-8 text"));
    };
    let next = lines.next_line;
    match lines.stop {
        Stop::Eof => {}
        Stop::Limit if args.limit.is_none() => text.push_str(&format!(
            "[more lines follow; call read with offset={next} to continue]"
        )),
        Stop::Limit => {}
        Stop::Budget { partial } => {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            if partial {
                text.push_str(&format!(
                    "[line {next} is longer than {MAX_BYTES} bytes; only its start is shown]"
                ));
            } else {
                text.push_str(&format!(
                    "[stopped after {MAX_BYTES} bytes; call read with offset={next} to continue]"
                ));
            }
        }
    }
    ToolOutput::ok(text)
}

/// Opens without following a symlink in the final component (confine resolved it already; this
/// closes the window where it is swapped for a link) and without blocking on a FIFO.
pub(super) fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

pub(super) fn open_error(shown: &str, e: &io::Error) -> ToolOutput {
    if e.kind() == io::ErrorKind::NotFound {
        return ToolOutput::error("not_found", format!("file {shown:?} not found"));
    }
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) {
        return ToolOutput::error(
            "path_refused",
            format!("path {shown:?} became a symlink while being opened"),
        );
    }
    io_error(shown, e)
}

fn io_error(shown: &str, e: &io::Error) -> ToolOutput {
    tracing::warn!(tool = "read", path = %shown, error = %e, "Read failed.");
    ToolOutput::error("io", format!("cannot read {shown:?}: {e}"))
}

enum Collected {
    Binary,
    PastEnd { total: u64 },
    Lines(Lines),
}

struct Lines {
    bytes: Vec<u8>,
    /// The first line not (fully) shown.
    next_line: u64,
    stop: Stop,
}

enum Stop {
    Eof,
    Limit,
    /// The byte budget ran out; `partial` when one over-long line was cut.
    Budget {
        partial: bool,
    },
}

/// Skips to line `start`, then collects up to `limit` whole lines within [`MAX_BYTES`].
fn collect(reader: &mut impl BufRead, start: u64, limit: u64) -> io::Result<Collected> {
    let mut line = 1u64;
    while line < start {
        match skip_line(reader)? {
            Skipped::Line => line += 1,
            Skipped::Eof => return Ok(Collected::PastEnd { total: line - 1 }),
            Skipped::Binary => return Ok(Collected::Binary),
        }
    }
    let end = start.saturating_add(limit);
    let mut bytes = Vec::new();
    let stop = loop {
        if reader.fill_buf()?.is_empty() {
            if line == start && start > 1 {
                return Ok(Collected::PastEnd { total: line - 1 });
            }
            break Stop::Eof;
        }
        if line >= end {
            break Stop::Limit;
        }
        let room = MAX_BYTES - bytes.len();
        if room == 0 {
            break Stop::Budget { partial: false };
        }
        let before = bytes.len();
        let n = reader
            .by_ref()
            .take(room as u64)
            .read_until(b'\n', &mut bytes)?;
        if bytes[before..].contains(&0) {
            return Ok(Collected::Binary);
        }
        if bytes.last() != Some(&b'\n') && n == room && !reader.fill_buf()?.is_empty() {
            if before > 0 {
                bytes.truncate(before);
                break Stop::Budget { partial: false };
            }
            let keep = match std::str::from_utf8(&bytes) {
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                _ => bytes.len(),
            };
            bytes.truncate(keep);
            break Stop::Budget { partial: true };
        }
        line += 1;
    };
    Ok(Collected::Lines(Lines {
        bytes,
        next_line: line,
        stop,
    }))
}

enum Skipped {
    Line,
    Eof,
    Binary,
}

/// Skips one line without holding it in memory.
fn skip_line(reader: &mut impl BufRead) -> io::Result<Skipped> {
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(if any { Skipped::Line } else { Skipped::Eof });
        }
        any = true;
        if buf.contains(&0) {
            return Ok(Skipped::Binary);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(Skipped::Line);
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}
