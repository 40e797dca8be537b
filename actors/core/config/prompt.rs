//! An agent's prompt settings: its time zone and the character caps of the system prompt.
//!
//! ```toml
//! timezone = "Europe/Berlin"      # IANA name; default UTC
//!
//! [prompt]
//! file_max_chars = 20000          # one workspace file
//! total_max_chars = 60000         # every workspace and memory file together
//! memory_max_chars = 8000         # MEMORY.md + today's and yesterday's daily logs
//! ```

use super::Problem;
use super::file::AgentFile;
use super::span::Source;
use serde::Deserialize;
use toml::Spanned;

/// Default cap on one workspace file in the system prompt, in characters.
pub const DEFAULT_FILE_MAX_CHARS: usize = 20_000;
/// Default cap on all workspace and memory files together, in characters.
pub const DEFAULT_TOTAL_MAX_CHARS: usize = 60_000;
/// Default cap on the recalled-memory layer, in characters.
pub const DEFAULT_MEMORY_MAX_CHARS: usize = 8_000;
/// No cap may exceed this: a prompt of more characters fits no model's context.
const MAX_CAP: usize = 10_000_000;

/// `[prompt]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PromptFile {
    pub file_max_chars: Option<Spanned<usize>>,
    pub total_max_chars: Option<Spanned<usize>>,
    pub memory_max_chars: Option<Spanned<usize>>,
}

/// The validated prompt settings of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptDef {
    /// The agent's time zone (`timezone`, IANA): the runtime line's clock and the date of
    /// `memory/YYYY-MM-DD.md`.
    pub timezone: chrono_tz::Tz,
    /// Cap on one workspace file (`prompt.file_max_chars`).
    pub file_max_chars: usize,
    /// Cap on all workspace and memory files together (`prompt.total_max_chars`).
    pub total_max_chars: usize,
    /// Cap on the recalled-memory layer (`prompt.memory_max_chars`).
    pub memory_max_chars: usize,
}

impl Default for PromptDef {
    fn default() -> Self {
        Self {
            timezone: chrono_tz::UTC,
            file_max_chars: DEFAULT_FILE_MAX_CHARS,
            total_max_chars: DEFAULT_TOTAL_MAX_CHARS,
            memory_max_chars: DEFAULT_MEMORY_MAX_CHARS,
        }
    }
}

/// Turns `timezone` and `[prompt]` into a [`PromptDef`], pushing a problem for each bad value
/// (which then keeps its default).
pub(super) fn prompt_def(src: &Source, f: &AgentFile, problems: &mut Vec<Problem>) -> PromptDef {
    let mut def = PromptDef::default();
    if let Some(tz) = &f.timezone {
        match tz.get_ref().parse::<chrono_tz::Tz>() {
            Ok(parsed) => def.timezone = parsed,
            Err(_) => problems.push(src.at(
                Some(tz.span()),
                "timezone",
                format!(
                    "unknown time zone {:?} (expected an IANA name such as \"Europe/Berlin\" or \"UTC\")",
                    tz.get_ref()
                ),
            )),
        }
    }
    let p = &f.prompt;
    let mut cap = |value: &Option<Spanned<usize>>, field: &str, slot: &mut usize| {
        if let Some(v) = value {
            if (1..=MAX_CAP).contains(v.get_ref()) {
                *slot = *v.get_ref();
            } else {
                let message = format!(
                    "{} is out of range (expected 1 to {MAX_CAP} characters)",
                    v.get_ref()
                );
                problems.push(src.at(Some(v.span()), field, message));
            }
        }
    };
    cap(
        &p.file_max_chars,
        "prompt.file_max_chars",
        &mut def.file_max_chars,
    );
    cap(
        &p.total_max_chars,
        "prompt.total_max_chars",
        &mut def.total_max_chars,
    );
    cap(
        &p.memory_max_chars,
        "prompt.memory_max_chars",
        &mut def.memory_max_chars,
    );
    def
}
