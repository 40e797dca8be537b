//! Cutting a memory file into chunks and chunks into search terms.

use std::collections::HashMap;

/// A chunk never spans more lines than this; a longer paragraph is cut into windows.
pub const MAX_CHUNK_LINES: usize = 20;

/// A piece of a memory file: a paragraph (with the heading above it), at most
/// [`MAX_CHUNK_LINES`] lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// First line, 1-based.
    pub from_line: usize,
    /// Last line, 1-based, inclusive.
    pub to_line: usize,
    /// The lines, joined with `\n`.
    pub text: String,
    /// Term → how often it occurs in this chunk.
    pub(super) terms: HashMap<String, u32>,
    /// Number of terms (with repeats): the BM25 document length.
    pub(super) len: u32,
}

/// Splits `text` into chunks: paragraphs separated by blank lines, a heading starting a new one
/// and staying with the paragraph below it, long paragraphs cut every [`MAX_CHUNK_LINES`] lines.
pub fn chunks(text: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut current: Vec<(usize, &str)> = Vec::new();
    let flush = |current: &mut Vec<(usize, &str)>, out: &mut Vec<Chunk>| {
        if current.is_empty() {
            return;
        }
        for window in current.chunks(MAX_CHUNK_LINES) {
            let text = window
                .iter()
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n");
            let terms = term_counts(&text);
            let len = terms.values().sum();
            out.push(Chunk {
                from_line: window[0].0,
                to_line: window[window.len() - 1].0,
                text,
                terms,
                len,
            });
        }
        current.clear();
    };
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            // A heading alone is kept for the paragraph below it.
            if !current.iter().all(|(_, l)| is_heading(l)) {
                flush(&mut current, &mut out);
            }
            continue;
        }
        let after_body = current.last().is_some_and(|(_, l)| !is_heading(l));
        if is_heading(line) && after_body {
            flush(&mut current, &mut out);
        }
        current.push((number, line));
    }
    flush(&mut current, &mut out);
    out
}

fn is_heading(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// The search terms of `text`: lowercased runs of letters and digits, at least two characters
/// long unless they are a digit.
pub(super) fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .filter(|w| w.chars().nth(1).is_some() || w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
}

fn term_counts(text: &str) -> HashMap<String, u32> {
    let mut counts = HashMap::new();
    for term in terms(text) {
        *counts.entry(term).or_insert(0) += 1;
    }
    counts
}
