//! The process's recent log lines, kept in memory for OpenClaw's `logs.tail`: the binary's log
//! writer copies each line here as well as to stderr ([`LogRing::writer`]). At most
//! [`MAX_BYTES`] are kept; the oldest lines go first. A line's position is the count of bytes
//! written before it since the process started (`cursor` on the wire), so a client that asks
//! again from the cursor it got reads only what came after.

use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};

/// How many bytes of lines are kept.
pub const MAX_BYTES: usize = 1 << 20;

/// Recent log lines.
#[derive(Debug, Default)]
pub struct LogRing {
    inner: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// `(position, line)`, oldest first.
    lines: VecDeque<(u64, String)>,
    kept: usize,
    /// Bytes written since the start: the next line's position.
    written: u64,
    /// A line not ended yet.
    partial: String,
}

/// What [`LogRing::tail`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The lines, oldest first.
    pub lines: Vec<String>,
    /// Where the next read starts.
    pub cursor: u64,
    /// True when lines after the given cursor were dropped before they could be read.
    pub truncated: bool,
}

impl LogRing {
    /// The ring of this process.
    pub fn global() -> &'static LogRing {
        static RING: OnceLock<LogRing> = OnceLock::new();
        RING.get_or_init(LogRing::default)
    }

    /// A writer that adds what it is given to the ring.
    pub fn writer(&'static self) -> RingWriter {
        RingWriter(self)
    }

    /// Adds text (complete lines are kept; ANSI colour codes are removed).
    pub fn push(&self, text: &str) {
        let Ok(mut ring) = self.inner.lock() else {
            return;
        };
        let ring = &mut *ring;
        ring.partial.push_str(&strip_ansi(text));
        while let Some(end) = ring.partial.find('\n') {
            let line: String = ring.partial.drain(..=end).collect();
            let line = line.trim_end_matches(['\n', '\r']).to_string();
            let at = ring.written;
            ring.written += line.len() as u64 + 1;
            ring.kept += line.len();
            ring.lines.push_back((at, line));
            while ring.kept > MAX_BYTES {
                match ring.lines.pop_front() {
                    Some((_, old)) => ring.kept -= old.len(),
                    None => break,
                }
            }
        }
    }

    /// The last `limit` lines at or after `cursor` (all kept ones without it).
    pub fn tail(&self, limit: usize, cursor: Option<u64>) -> Tail {
        let Ok(ring) = self.inner.lock() else {
            return Tail {
                lines: Vec::new(),
                cursor: 0,
                truncated: false,
            };
        };
        let from = cursor.unwrap_or(0);
        let after: Vec<&(u64, String)> = ring.lines.iter().filter(|(at, _)| *at >= from).collect();
        let skip = after.len().saturating_sub(limit);
        let oldest = ring.lines.front().map_or(ring.written, |(at, _)| *at);
        Tail {
            lines: after[skip..].iter().map(|(_, l)| l.clone()).collect(),
            cursor: ring.written,
            truncated: skip > 0 || (cursor.is_some() && from < oldest),
        }
    }

    /// Bytes written since the start.
    pub fn size(&self) -> u64 {
        self.inner.lock().map_or(0, |r| r.written)
    }
}

/// An `io::Write` into a [`LogRing`].
#[derive(Debug, Clone, Copy)]
pub struct RingWriter(&'static LogRing);

impl std::io::Write for RingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_whole_without_colours_and_read_from_a_cursor() {
        let ring = LogRing::default();
        ring.push("\u{1b}[32mINFO\u{1b}[0m one\ntwo");
        assert_eq!(
            ring.tail(10, None).lines,
            ["INFO one"],
            "a partial line waits"
        );
        ring.push(" halves\nthree\n");
        let all = ring.tail(10, None);
        assert_eq!(all.lines, ["INFO one", "two halves", "three"]);
        assert_eq!(ring.tail(1, None).lines, ["three"]);
        ring.push("four\n");
        let next = ring.tail(10, Some(all.cursor));
        assert_eq!(next.lines, ["four"]);
        assert!(!next.truncated);
    }

    #[test]
    fn the_oldest_lines_go_past_the_bound() {
        let ring = LogRing::default();
        let line = "x".repeat(1000);
        for _ in 0..(MAX_BYTES / 1000 + 10) {
            ring.push(&format!("{line}\n"));
        }
        let kept = ring.tail(usize::MAX, None).lines.len();
        assert!(kept * 1000 <= MAX_BYTES, "{kept} lines kept");
        assert!(ring.tail(10, Some(0)).truncated);
    }
}
