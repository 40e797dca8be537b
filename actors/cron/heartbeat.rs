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

use super::job::{
    ActiveHours, CatchUp, Delivery, Job, JobId, JobSource, Payload, PayloadKind, Schedule,
    SessionTarget,
};
use super::settings::Settings;
use chrono::Timelike;
use std::path::Path;

/// The reply meaning "nothing needs attention".
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// At most this many characters besides [`HEARTBEAT_OK`] and a reply is still an acknowledgement.
pub const ACK_MAX_CHARS: usize = 300;
/// The file a heartbeat reads, in the agent's workspace.
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";
/// The largest `HEARTBEAT.md` put into a turn, in bytes (the rest is cut).
const MAX_FILE_BYTES: usize = 64 * 1024;

/// One agent's heartbeat, as declared (`[heartbeat]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSpec {
    /// The agent.
    pub agent: String,
    /// The period, ms (> 0).
    pub every_ms: u64,
    /// The hours it may run in; `None`: always.
    pub active_hours: Option<ActiveHours>,
    /// Where a real reply goes (`announce` to `channel:to`), or nowhere.
    pub delivery: Delivery,
    /// Off: the job is kept, disabled.
    pub enabled: bool,
}

/// The id of an agent's heartbeat job: `heartbeat-<agent>`.
pub fn job_id(agent: &str) -> Result<JobId, String> {
    JobId::parse(&format!("heartbeat-{agent}"))
}

impl HeartbeatSpec {
    /// The job it describes (creation time and anchor kept from `existing`).
    pub fn job(&self, now_ms: u64, existing: Option<&Job>) -> Result<Job, String> {
        Ok(Job {
            id: job_id(&self.agent)?,
            name: format!("heartbeat of {}", self.agent),
            agent: self.agent.clone(),
            schedule: Schedule::Every {
                every_ms: self.every_ms.max(1),
                anchor_ms: None,
            },
            payload: Payload {
                kind: PayloadKind::Heartbeat,
                message: format!("follow {HEARTBEAT_FILE}"),
            },
            session: SessionTarget::Main,
            delivery: self.delivery.clone(),
            enabled: self.enabled,
            catch_up: CatchUp::None,
            delete_after_run: false,
            created_at: existing.map_or(now_ms, |j| j.created_at),
            updated_at: existing.map_or(now_ms, |j| j.updated_at),
            source: JobSource::Heartbeat,
            active_hours: self.active_hours.clone(),
            created_by: None,
        })
    }
}

/// True when `md` holds something besides Markdown headings and blank lines.
pub fn has_content(md: &str) -> bool {
    md.lines()
        .map(str::trim)
        .any(|l| !l.is_empty() && !l.starts_with('#'))
}

/// True when a reply is an acknowledgement: [`HEARTBEAT_OK`] at its start or end, with at most
/// [`ACK_MAX_CHARS`] other characters.
pub fn is_ack(reply: &str) -> bool {
    let t = reply.trim();
    let rest = if let Some(r) = t.strip_prefix(HEARTBEAT_OK) {
        r
    } else if let Some(r) = t.strip_suffix(HEARTBEAT_OK) {
        r
    } else {
        return false;
    };
    rest.trim().chars().count() <= ACK_MAX_CHARS
}

/// The content of the agent's `HEARTBEAT.md` when it has any (see [`has_content`]).
pub fn read(settings: &Settings, agent: &str) -> Option<String> {
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
pub fn message(content: &str) -> String {
    format!(
        "[heartbeat] Read {HEARTBEAT_FILE} (below, from your workspace) and follow it strictly. \
         Do not repeat old tasks from earlier conversations. If nothing needs attention, reply \
         exactly {HEARTBEAT_OK}.\n\n--- {HEARTBEAT_FILE} ---\n{content}"
    )
}

/// Whether `ms` (Unix ms) falls within `hours`; an unknown timezone counts as always.
pub fn in_hours(hours: &ActiveHours, ms: u64) -> bool {
    if hours.start_min == hours.end_min {
        return true;
    }
    let Ok(tz) = hours.tz.parse::<chrono_tz::Tz>() else {
        return true;
    };
    let Some(utc) = chrono::DateTime::from_timestamp_millis(i64::try_from(ms).unwrap_or(i64::MAX))
    else {
        return true;
    };
    let local = utc.with_timezone(&tz);
    let minute = u16::try_from(local.hour() * 60 + local.minute()).unwrap_or(0);
    if hours.start_min < hours.end_min {
        (hours.start_min..hours.end_min).contains(&minute)
    } else {
        minute >= hours.start_min || minute < hours.end_min
    }
}

/// Parses `HH:MM-HH:MM` (24 h; `24:00` allowed as an end) into minutes after midnight.
pub fn parse_hours(text: &str) -> Result<(u16, u16), String> {
    let bad = || {
        format!("invalid active hours {text:?} (expected \"HH:MM-HH:MM\", e.g. \"08:00-22:00\")")
    };
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let minutes = |s: &str, end: bool| -> Option<u16> {
        let (h, m) = s.trim().split_once(':')?;
        let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
        let ok = m < 60 && (h < 24 || (end && h == 24 && m == 0));
        ok.then_some(h * 60 + m)
    };
    let start = minutes(a, false).ok_or_else(bad)?;
    let end = minutes(b, true).ok_or_else(bad)?;
    Ok((start, end % (24 * 60)))
}

/// Why the fire of `job` at `scheduled_ms` does not run (a heartbeat with nothing to do, or a
/// fire outside its active hours); `None` when it runs.
pub fn skip_reason(settings: &Settings, job: &Job, scheduled_ms: u64) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_acks_and_hours() {
        assert!(!has_content("# Heartbeat\n\n## Tasks\n  \n"));
        assert!(has_content("# H\n- check the inbox\n"));
        assert!(is_ack("HEARTBEAT_OK"));
        assert!(is_ack("  HEARTBEAT_OK all quiet"));
        assert!(is_ack("nothing to do. HEARTBEAT_OK"));
        assert!(!is_ack(&format!("HEARTBEAT_OK {}", "x".repeat(301))));
        assert!(!is_ack("The build is broken."));
        assert_eq!(parse_hours("08:00-22:00"), Ok((480, 1320)));
        assert_eq!(parse_hours("22:00-24:00"), Ok((1320, 0)));
        assert!(parse_hours("8-22").is_err());
        assert!(parse_hours("25:00-01:00").is_err());
        let h = ActiveHours {
            start_min: 480,
            end_min: 1320,
            tz: "Europe/Paris".into(),
        };
        let ms = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .map(|d| d.timestamp_millis() as u64)
                .unwrap_or_default()
        };
        assert!(in_hours(&h, ms("2026-01-05T08:00:00+01:00")));
        assert!(!in_hours(&h, ms("2026-01-05T07:59:00+01:00")));
        assert!(!in_hours(&h, ms("2026-01-05T22:00:00+01:00")));
        let night = ActiveHours {
            start_min: 1320,
            end_min: 360,
            tz: "UTC".into(),
        };
        assert!(in_hours(&night, ms("2026-01-05T23:00:00Z")));
        assert!(!in_hours(&night, ms("2026-01-05T12:00:00Z")));
    }
}
