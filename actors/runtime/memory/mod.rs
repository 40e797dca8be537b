//! An agent's memory: plain Markdown files in its workspace, searched on demand.
//!
//! - `MEMORY.md`: durable facts, curated by the agent.
//! - `memory/YYYY-MM-DD.md`: the daily log, one file per day in the agent's time zone.
//!
//! MEMORY.md and today's and yesterday's logs are injected into the system prompt (see
//! [`crate::prompt`], capped); everything else is found with the tools:
//! - [`MemorySearchTool`](crate::tools::MemorySearchTool) (`memory_search {query, k?}`): BM25 over ~paragraph chunks of every
//!   memory file ([`MemoryIndex`], updated incrementally per file), times a recency decay with a
//!   30-day half-life; top-k with file and line range.
//! - [`MemoryGetTool`](crate::tools::MemoryGetTool) (`memory_get {path, from_line?, to_line?}`): lines of one memory file.
//!
//! The seam for hybrid search is [`Retriever`]: BM25 ([`Bm25`]) is one; a vector retriever
//! (or one mixing two others) plugs into `MemoryIndex::search_with`.

mod chunk;
mod index;

#[cfg(test)]
pub(crate) mod tests;

pub use chunk::{Chunk, MAX_CHUNK_LINES, chunks};
pub use index::{
    Bm25, ChunkRef, HALF_LIFE_DAYS, Hit, MAX_FILE_BYTES, MemoryIndex, Refresh, Retriever,
};

use chrono::NaiveDate;

/// The durable-facts file, at the workspace root.
pub(crate) const MEMORY_FILE: &str = "MEMORY.md";
/// The folder of daily logs and other notes, at the workspace root.
pub(crate) const MEMORY_DIR: &str = "memory";

/// The workspace-relative path of the daily log of `day`: `memory/2026-03-01.md`.
pub(crate) fn daily_log(day: NaiveDate) -> String {
    format!("{MEMORY_DIR}/{}.md", day.format("%Y-%m-%d"))
}

/// The date of a daily log path (`memory/2026-03-01.md`, also `memory/2026-03-01-topic.md`);
/// `None` for any other file.
pub(crate) fn daily_log_date(rel: &str) -> Option<NaiveDate> {
    let name = rel.strip_prefix(MEMORY_DIR)?.strip_prefix('/')?;
    let stem = name.strip_suffix(".md")?;
    let date = stem.get(..10)?;
    let rest = &stem[10..];
    if !(rest.is_empty() || rest.starts_with('-')) {
        return None;
    }
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}
