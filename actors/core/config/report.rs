//! Problems found while checking the configuration, and the ✓/✗ report `clawbus check` prints.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with one file, pointing at the offending place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (or a pseudo path such as `<--model>` for a flag).
    pub path: PathBuf,
    /// 1-based line; 0 when the problem has no position (a file name, a flag, an I/O error).
    pub line: usize,
    /// 1-based column in characters; 0 when the problem has no position.
    pub col: usize,
    /// Dotted field name (`limits.turn_timeout`); empty when no field is concerned.
    pub field: String,
    /// What is wrong, ending with `(expected …)`.
    pub message: String,
}

/// `<path>:<line>:<col>: field "<dotted.field>": <what is wrong> (expected <what>)`.
///
/// Without a position the `:<line>:<col>` part is left out, without a field the `field "…": ` part.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "field {:?}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// The outcome of examining one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    /// The file examined.
    pub path: PathBuf,
    /// Everything wrong with it, in position order; empty = ✓.
    pub problems: Vec<Problem>,
}

/// The outcome of examining every file: `clawbus.toml` if present, then each agent file by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    /// One entry per file examined.
    pub files: Vec<FileReport>,
}

impl CheckReport {
    /// True when no file has a problem.
    pub fn is_ok(&self) -> bool {
        self.files.iter().all(|f| f.problems.is_empty())
    }

    /// Every problem of every file, in report order.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.files.iter().flat_map(|f| f.problems.iter())
    }

    /// `✓ <path>` or `✗ <path>` per file, each ✗ followed by its problems indented two spaces.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for file in &self.files {
            let mark = if file.problems.is_empty() {
                '✓'
            } else {
                '✗'
            };
            out.push_str(&format!("{mark} {}\n", file.path.display()));
            for problem in &file.problems {
                out.push_str(&format!("  {problem}\n"));
            }
        }
        out
    }
}

/// Every problem, one per line (without the ✓ lines), so the report works as an error value.
impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.problems().count();
        write!(f, "configuration has {count} problem(s)")?;
        for problem in self.problems() {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CheckReport {}
