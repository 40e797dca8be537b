//! The memory index: chunks of every memory file, kept up to date file by file.

use super::chunk::{self, Chunk};
use super::{MEMORY_DIR, MEMORY_FILE, daily_log_date};
use crate::workspace::{FileStamp, confine};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::Path;

/// A memory file bigger than this is left out of the index (with a warning).
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// At most this many memory files are indexed; the rest are left out (with a warning).
pub(super) const MAX_FILES: usize = 10_000;
/// Half-life of the recency decay: a note this many days old counts half as much.
pub const HALF_LIFE_DAYS: f64 = 30.0;

#[derive(Debug)]
struct IndexedFile {
    stamp: FileStamp,
    /// When the note was written, for the decay: the file name's date for a daily log, else
    /// the modification time.
    written: Written,
    chunks: Vec<Chunk>,
}

#[derive(Debug, Clone, Copy)]
enum Written {
    Day(NaiveDate),
    At(DateTime<Utc>),
    Unknown,
}

/// What a [`MemoryIndex::refresh`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refresh {
    /// Memory files found.
    pub files: usize,
    /// Files read and chunked again because they are new or changed.
    pub rechunked: usize,
    /// Files dropped from the index because they are gone.
    pub removed: usize,
}

/// One chunk as a [`Retriever`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRef<'a> {
    /// The file, relative to the workspace (`MEMORY.md`, `memory/2026-03-01.md`).
    pub path: &'a str,
    /// The chunk.
    pub chunk: &'a Chunk,
}

/// A search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The file, relative to the workspace.
    pub path: String,
    /// First line, 1-based.
    pub from_line: usize,
    /// Last line, 1-based, inclusive.
    pub to_line: usize,
    /// Relevance times recency decay: what the results are ordered by.
    pub score: f64,
    /// The retriever's relevance alone.
    pub relevance: f64,
    /// The recency factor, `0.5^(age_days / 30)`.
    pub decay: f64,
    /// The chunk's text.
    pub text: String,
}

/// Scores chunks for a query. [`Bm25`] is the one there is; a vector retriever plugs in here
/// later, and hybrid search becomes a retriever that mixes the scores of two others.
pub trait Retriever: Send + Sync {
    /// The relevance of each chunk of `index` (in [`MemoryIndex::chunks`] order) to `query`;
    /// 0 means no match, and such chunks are never returned.
    fn relevance(&self, index: &MemoryIndex, query: &str) -> Vec<f64>;
}

/// Okapi BM25 over the chunks' terms.
#[derive(Debug, Clone, Copy)]
pub struct Bm25 {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalisation.
    pub b: f64,
}

impl Default for Bm25 {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

impl Retriever for Bm25 {
    fn relevance(&self, index: &MemoryIndex, query: &str) -> Vec<f64> {
        let mut query_terms: Vec<String> = chunk::terms(query).collect();
        query_terms.sort();
        query_terms.dedup();
        let n = index.chunk_count as f64;
        let avg_len = if index.chunk_count == 0 {
            1.0
        } else {
            (index.term_count as f64 / n).max(1.0)
        };
        let idf: Vec<(&str, f64)> = query_terms
            .iter()
            .filter_map(|t| {
                let df = f64::from(*index.df.get(t)?);
                Some((t.as_str(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln()))
            })
            .collect();
        index
            .chunks()
            .map(|c| {
                let len = f64::from(c.chunk.len);
                idf.iter()
                    .filter_map(|(t, idf)| {
                        let tf = f64::from(*c.chunk.terms.get(*t)?);
                        let norm = self.k1 * (1.0 - self.b + self.b * len / avg_len);
                        Some(idf * tf * (self.k1 + 1.0) / (tf + norm))
                    })
                    .sum()
            })
            .collect()
    }
}

/// Every chunk of `MEMORY.md` and `memory/**/*.md` of one workspace, with the document
/// frequencies BM25 needs. [`refresh`](Self::refresh) re-reads only files whose size,
/// modification time or inode changed.
#[derive(Debug, Default)]
pub struct MemoryIndex {
    files: BTreeMap<String, IndexedFile>,
    /// Term → number of chunks containing it.
    df: HashMap<String, u32>,
    chunk_count: usize,
    term_count: u64,
}

impl MemoryIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the index up to date with the workspace's memory files.
    pub fn refresh(&mut self, workspace: &Path) -> io::Result<Refresh> {
        let root = workspace.canonicalize()?;
        let mut found = Vec::new();
        if root.join(MEMORY_FILE).exists() {
            found.push(MEMORY_FILE.to_string());
        }
        list_markdown(&root, MEMORY_DIR, &mut found);
        if found.len() > MAX_FILES {
            tracing::warn!(workspace = %root.display(), files = found.len(), max = MAX_FILES, "Too many memory files; only the first are indexed.");
            found.truncate(MAX_FILES);
        }
        let mut report = Refresh {
            files: found.len(),
            ..Refresh::default()
        };
        let present: HashSet<&String> = found.iter().collect();
        let gone: Vec<String> = self
            .files
            .keys()
            .filter(|k| !present.contains(k))
            .cloned()
            .collect();
        for path in gone {
            self.remove(&path);
            report.removed += 1;
        }
        for rel in found {
            let Some((real, meta)) = confined_file(&root, &rel) else {
                if self.files.contains_key(&rel) {
                    self.remove(&rel);
                    report.removed += 1;
                }
                continue;
            };
            let stamp = FileStamp::of(&meta);
            if self.files.get(&rel).is_some_and(|f| f.stamp == stamp) {
                continue;
            }
            self.remove(&rel);
            if meta.len() > MAX_FILE_BYTES {
                tracing::warn!(path = %rel, bytes = meta.len(), max = MAX_FILE_BYTES, "Memory file too big; left out of the index.");
                continue;
            }
            let text = match std::fs::read_to_string(&real) {
                Ok(text) => text,
                Err(e) => {
                    tracing::warn!(path = %rel, error = %e, "Memory file unreadable; left out of the index.");
                    continue;
                }
            };
            let written = match daily_log_date(&rel) {
                Some(day) => Written::Day(day),
                None => meta
                    .modified()
                    .map(|t| Written::At(t.into()))
                    .unwrap_or(Written::Unknown),
            };
            self.insert(
                rel,
                IndexedFile {
                    stamp,
                    written,
                    chunks: chunk::chunks(&text),
                },
            );
            report.rechunked += 1;
        }
        Ok(report)
    }

    /// Every chunk, file by file in path order.
    pub fn chunks(&self) -> impl Iterator<Item = ChunkRef<'_>> {
        self.files
            .iter()
            .flat_map(|(path, f)| f.chunks.iter().map(move |chunk| ChunkRef { path, chunk }))
    }

    /// Number of files indexed.
    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The `k` best chunks for `query` by BM25 with recency decay as of `now`.
    pub fn search(&self, query: &str, k: usize, now: DateTime<Utc>) -> Vec<Hit> {
        self.search_with(&Bm25::default(), query, k, now)
    }

    /// The `k` best chunks for `query` by `retriever`'s relevance times the recency decay
    /// (`0.5^(age_days / 30)`, age from the daily log's date, else the file's mtime).
    pub(crate) fn search_with(
        &self,
        retriever: &dyn Retriever,
        query: &str,
        k: usize,
        now: DateTime<Utc>,
    ) -> Vec<Hit> {
        let relevance = retriever.relevance(self, query);
        let mut hits: Vec<Hit> = self
            .files
            .iter()
            .flat_map(|(path, f)| f.chunks.iter().map(move |c| (path, f.written, c)))
            .zip(relevance)
            .filter(|(_, r)| *r > 0.0)
            .map(|((path, written, c), relevance)| {
                let decay = decay(written, now);
                Hit {
                    path: path.clone(),
                    from_line: c.from_line,
                    to_line: c.to_line,
                    score: relevance * decay,
                    relevance,
                    decay,
                    text: c.text.clone(),
                }
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(k);
        hits
    }

    fn insert(&mut self, path: String, file: IndexedFile) {
        for c in &file.chunks {
            for term in c.terms.keys() {
                *self.df.entry(term.clone()).or_insert(0) += 1;
            }
            self.term_count += u64::from(c.len);
        }
        self.chunk_count += file.chunks.len();
        self.files.insert(path, file);
    }

    fn remove(&mut self, path: &str) {
        let Some(file) = self.files.remove(path) else {
            return;
        };
        for c in &file.chunks {
            for term in c.terms.keys() {
                if let Some(n) = self.df.get_mut(term) {
                    *n -= 1;
                    if *n == 0 {
                        self.df.remove(term);
                    }
                }
            }
            self.term_count -= u64::from(c.len);
        }
        self.chunk_count -= file.chunks.len();
    }
}

fn decay(written: Written, now: DateTime<Utc>) -> f64 {
    let age_days = match written {
        Written::Day(day) => (now.date_naive() - day).num_days() as f64,
        Written::At(at) => (now - at).num_seconds() as f64 / 86_400.0,
        Written::Unknown => 0.0,
    };
    0.5f64.powf(age_days.max(0.0) / HALF_LIFE_DAYS)
}

/// The real path and metadata of memory file `rel`, if it is a regular file that stays inside
/// the workspace.
fn confined_file(root: &Path, rel: &str) -> Option<(std::path::PathBuf, std::fs::Metadata)> {
    let real = match confine(root, rel) {
        Ok(real) => real,
        Err(e) => {
            tracing::warn!(path = %rel, error = %e, "Memory file refused; left out of the index.");
            return None;
        }
    };
    if real != root.join(MEMORY_FILE) && !real.starts_with(root.join(MEMORY_DIR)) {
        tracing::warn!(path = %rel, "Memory file links outside the memory files; left out of the index.");
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    meta.is_file().then_some((real, meta))
}

/// Adds `dir/**/*.md` (paths relative to `root`, `/`-separated) to `out`, sorted.
fn list_markdown(root: &Path, dir: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return;
    };
    let mut names: Vec<(String, bool)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let is_dir = e.file_type().ok()?.is_dir();
            (!name.starts_with('.')).then_some((name, is_dir))
        })
        .collect();
    names.sort();
    for (name, is_dir) in names {
        let rel = format!("{dir}/{name}");
        if is_dir {
            if out.len() <= MAX_FILES {
                list_markdown(root, &rel, out);
            }
        } else if name.ends_with(".md") {
            out.push(rel);
        }
    }
}
