//! Sessions: the live-session cap and idle timeout (`clawbus.toml`), and per agent the
//! compaction settings and channel bindings (`agents.d/<id>.toml`).
//!
//! ```toml
//! # clawbus.toml
//! [sessions]
//! max_live = 5000          # live session actors; the least recently used idle one is stopped past it
//! idle_timeout = "24h"     # an idle session actor is stopped after this (its state stays on disk)
//! history_cache = 4194304  # bytes of conversation history an agent's live sessions keep in memory;
//!                          # past it the least recently used idle ones are stopped (reloaded from
//!                          # disk on their next turn)
//!
//! # agents.d/<id>.toml
//! [session]
//! context_window = 128000  # tokens the model accepts
//! compaction_threshold = 0.75
//! keep_recent_messages = 8 # kept verbatim after a compaction
//!
//! [[bindings]]             # inbound messages this agent answers
//! channel = "telegram"
//! chat_type = "direct"     # optional
//! peer = "12345"           # optional
//! ```

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::{byte_size, duration};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// Default cap on live session actors.
pub(super) const DEFAULT_MAX_LIVE: usize = 5_000;
/// Default idle time before a session actor is stopped.
pub(super) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Default bytes of conversation history an agent's live sessions keep in memory: without a
/// budget, memory follows every live conversation's length up to its context window. 4 MiB
/// holds the live histories of dozens of long conversations (an agent's 200 sessions of 150
/// turns each hold about 12 MB); 8 MiB filled only after about 40,000 turns of such a load, so
/// memory still rose 9 MiB over the last 10,000 of 30,000 tasks (BENCHMARKS.md).
pub(super) const DEFAULT_HISTORY_CACHE: usize = 4 * 1024 * 1024;

/// `[sessions]` of `clawbus.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionsFile {
    pub max_live: Option<Spanned<usize>>,
    pub idle_timeout: Option<Spanned<DurationText>>,
    pub history_cache: Option<Spanned<i64>>,
}

/// `[session]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionFile {
    pub context_window: Option<Spanned<u64>>,
    pub compaction_threshold: Option<Spanned<f64>>,
    pub keep_recent_messages: Option<Spanned<usize>>,
}

/// One `[[bindings]]` entry of an agent file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BindingFile {
    pub channel: Spanned<String>,
    pub chat_type: Option<String>,
    pub peer: Option<String>,
}

/// Gateway-wide session settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsDef {
    /// Live session actors at most.
    pub max_live: usize,
    /// Idle time before a session actor stops.
    pub idle_timeout: Duration,
    /// Bytes of conversation history an agent's live sessions keep in memory, about; past it
    /// the least recently used idle sessions stop.
    pub history_cache: usize,
}

impl Default for SessionsDef {
    fn default() -> Self {
        Self {
            max_live: DEFAULT_MAX_LIVE,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            history_cache: DEFAULT_HISTORY_CACHE,
        }
    }
}

/// An agent's session settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDef {
    /// Tokens the model accepts.
    pub context_window: u64,
    /// Fraction of the window past which older turns are compacted.
    pub compaction_threshold: f64,
    /// Messages kept verbatim after a compaction.
    pub keep_recent_messages: usize,
}

impl Default for SessionDef {
    fn default() -> Self {
        Self {
            context_window: 128_000,
            compaction_threshold: 0.75,
            keep_recent_messages: 8,
        }
    }
}

/// A channel binding: inbound messages matching it go to this agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingDef {
    /// The channel (`telegram`, `webhook`, …).
    pub channel: String,
    /// Only this chat type (`direct`, `group`), when set.
    pub chat_type: Option<String>,
    /// Only this peer, when set.
    pub peer: Option<String>,
}

pub(super) fn sessions_def(
    src: &Source,
    f: &SessionsFile,
    problems: &mut Vec<Problem>,
) -> SessionsDef {
    let mut def = SessionsDef::default();
    if let Some(n) = &f.max_live {
        if *n.get_ref() >= 1 {
            def.max_live = *n.get_ref();
        } else {
            problems.push(src.at(
                Some(n.span()),
                "sessions.max_live",
                "0 is out of range (expected at least 1)",
            ));
        }
    }
    def.idle_timeout = duration(
        src,
        &f.idle_timeout,
        "sessions.idle_timeout",
        def.idle_timeout,
        problems,
    );
    def.history_cache = byte_size(
        src,
        &f.history_cache,
        "sessions.history_cache",
        def.history_cache,
        problems,
    );
    def
}

pub(super) fn session_def(
    src: &Source,
    f: &SessionFile,
    problems: &mut Vec<Problem>,
) -> SessionDef {
    let mut def = SessionDef::default();
    if let Some(n) = &f.context_window {
        if *n.get_ref() >= 256 {
            def.context_window = *n.get_ref();
        } else {
            let message = format!(
                "{} is out of range (expected at least 256 tokens)",
                n.get_ref()
            );
            problems.push(src.at(Some(n.span()), "session.context_window", message));
        }
    }
    if let Some(t) = &f.compaction_threshold {
        let v = *t.get_ref();
        if v > 0.0 && v <= 1.0 {
            def.compaction_threshold = v;
        } else {
            let message =
                format!("{v} is out of range (expected a fraction above 0 and at most 1)");
            problems.push(src.at(Some(t.span()), "session.compaction_threshold", message));
        }
    }
    if let Some(n) = &f.keep_recent_messages {
        def.keep_recent_messages = *n.get_ref();
    }
    def
}

pub(super) fn bindings(
    src: &Source,
    f: &[BindingFile],
    problems: &mut Vec<Problem>,
) -> Vec<BindingDef> {
    let mut out = Vec::new();
    for (i, b) in f.iter().enumerate() {
        let channel = b.channel.get_ref();
        if !super::is_name(channel) {
            let message = format!(
                "invalid channel name {channel:?} (expected lowercase letters, digits, '-' or '_')"
            );
            let field = format!("bindings[{i}].channel");
            problems.push(src.at(Some(b.channel.span()), field, message));
            continue;
        }
        out.push(BindingDef {
            channel: channel.clone(),
            chat_type: b.chat_type.clone(),
            peer: b.peer.clone(),
        });
    }
    out
}
