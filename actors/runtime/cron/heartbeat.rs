//! Heartbeats: per agent, a periodic turn in its main session asking it to follow
//! `HEARTBEAT.md` (from `[heartbeat]` in its file). A heartbeat is a scheduler job of payload
//! kind [`PayloadKind::Heartbeat`], so it has the same at-most-once fires (request id
//! `heartbeat:<agent>:<scheduled ms>`), leases and history as any job; what differs is here:
//!
//! - a beat is skipped, with no task submitted (no model call), when `HEARTBEAT.md` is missing or
//!   holds nothing besides Markdown headings and blank lines, or outside the active hours;
//! - a reply that is `HEARTBEAT_OK` (with at most [`ACK_MAX_CHARS`] other characters) is not
//!   delivered; any other reply is announced to the `to` channel. Every reply is published on
//!   `events.cron.<jobId>`.

pub(crate) use clawbus_core::jobs::heartbeat::{
    HEARTBEAT_FILE, HEARTBEAT_OK, HeartbeatSpec, has_content, in_hours, is_ack, job_id,
};

use super::job::{Job, PayloadKind};
use super::settings::Settings;
use std::path::Path;

/// The largest `HEARTBEAT.md` put into a turn, in bytes (the rest is cut).
const MAX_FILE_BYTES: usize = 64 * 1024;

/// The content of the agent's `HEARTBEAT.md` when it has any (see [`has_content`]).
pub(crate) fn read(settings: &Settings, agent: &str) -> Option<String> {
    let dir = settings.workspaces.as_deref()?;
    read_file(&dir.join(agent).join(HEARTBEAT_FILE))
}

fn read_file(path: &Path) -> Option<String> {
    let mut text = std::fs::read_to_string(path).ok()?;
    if text.len() > MAX_FILE_BYTES {
        let mut cut = MAX_FILE_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    has_content(&text).then_some(text)
}

/// The task text of a beat: the instruction and the file's content.
pub(crate) fn message(content: &str) -> String {
    format!(
        "[heartbeat] Read {HEARTBEAT_FILE} (below, from your workspace) and follow it strictly. \
         Do not repeat old tasks from earlier conversations. If nothing needs attention, reply \
         exactly {HEARTBEAT_OK}.\n\n--- {HEARTBEAT_FILE} ---\n{content}"
    )
}

/// Why the fire of `job` at `scheduled_ms` does not run (a heartbeat with nothing to do, or a
/// fire outside its active hours); `None` when it runs.
pub(crate) fn skip_reason(settings: &Settings, job: &Job, scheduled_ms: u64) -> Option<String> {
    if let Some(hours) = &job.active_hours {
        if !in_hours(hours, scheduled_ms) {
            return Some("outside active hours".into());
        }
    }
    if job.payload.kind == PayloadKind::Heartbeat && read(settings, &job.agent).is_none() {
        return Some(format!("{HEARTBEAT_FILE} is missing or has no content"));
    }
    None
}
