//! The `[lanes]` section of `clawbus.toml`: global lanes and their concurrency caps.
//!
//! ```toml
//! [lanes]
//! main = 4           # turns of inbound messages (default 4)
//! cron = 1           # scheduled jobs (default 1)
//! subagent = 8       # work spawned by other runs (default 8)
//! research = 2       # any other name [a-z0-9_-]+ adds a lane
//! warn_after = "2s"  # a wait longer than this is logged as a warning (reserved key, not a lane)
//! ```
//!
//! The three built-in lanes always exist; a file only changes their caps or adds lanes. Caps are
//! 1..=1024.

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// The lane of turns started by inbound messages.
pub const MAIN_LANE: &str = "main";
/// The lane of scheduled jobs.
pub const CRON_LANE: &str = "cron";
/// The lane of work spawned by other runs.
pub const SUBAGENT_LANE: &str = "subagent";
/// The largest cap a lane may have.
pub const MAX_LANE_CAP: usize = 1024;
/// Default threshold above which a lane wait is logged as a warning.
pub const DEFAULT_WARN_AFTER: Duration = Duration::from_secs(2);
/// The key of `[lanes]` that sets the warning threshold rather than a lane.
const WARN_AFTER_KEY: &str = "warn_after";

/// `[lanes]`: lane names to caps, plus the reserved `warn_after`. Values are checked in
/// [`lanes_def`] so every bad one gets its own `line:col`.
pub(super) type LanesFile = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// The validated `[lanes]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanesDef {
    /// Every lane by name with its concurrency cap (1..=1024); always holds `main`, `cron` and
    /// `subagent`.
    pub caps: BTreeMap<String, usize>,
    /// A run that waited longer than this for its slot is logged as a warning.
    pub warn_after: Duration,
}

impl Default for LanesDef {
    fn default() -> Self {
        Self {
            caps: BTreeMap::from([
                (MAIN_LANE.to_string(), 4),
                (CRON_LANE.to_string(), 1),
                (SUBAGENT_LANE.to_string(), 8),
            ]),
            warn_after: DEFAULT_WARN_AFTER,
        }
    }
}

/// Validates `[lanes]` over the defaults, pushing one problem per bad entry.
pub(super) fn lanes_def(src: &Source, file: &LanesFile, problems: &mut Vec<Problem>) -> LanesDef {
    let mut def = LanesDef::default();
    for (name, value) in file {
        let key = name.get_ref();
        let field = format!("lanes.{key}");
        if key == WARN_AFTER_KEY {
            let text = match value.get_ref() {
                toml::Value::String(s) => Some(Spanned::new(value.span(), DurationText(s.clone()))),
                _ => {
                    problems.push(src.at(
                        Some(value.span()),
                        field,
                        "not a duration (expected a string such as \"2s\" or \"500ms\")",
                    ));
                    continue;
                }
            };
            def.warn_after = duration(src, &text, &field, DEFAULT_WARN_AFTER, problems);
            continue;
        }
        if !super::is_name(key) {
            problems.push(src.at(
                Some(name.span()),
                field,
                format!("invalid lane name {key:?} (expected a-z, 0-9, '-' or '_')"),
            ));
            continue;
        }
        match value.get_ref() {
            toml::Value::Integer(n) if (1..=MAX_LANE_CAP as i64).contains(n) => {
                def.caps.insert(key.clone(), *n as usize);
            }
            toml::Value::Integer(n) => problems.push(src.at(
                Some(value.span()),
                field,
                format!("lane cap {n} out of range (expected 1 to {MAX_LANE_CAP} concurrent runs)"),
            )),
            other => problems.push(src.at(
                Some(value.span()),
                field,
                format!(
                    "{} is not a lane cap (expected an integer from 1 to {MAX_LANE_CAP}, e.g. {key} = 4)",
                    other.type_str()
                ),
            )),
        }
    }
    def
}
