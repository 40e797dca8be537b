//! Heartbeat specs: what `[heartbeat]` of an agent file declares and the rules on a reply
//! (`HEARTBEAT_OK`, `NO_REPLY`). Reading `HEARTBEAT.md` and deciding a beat are the scheduler's
//! (`cron::heartbeat`).

use super::job::{
    ActiveHours, CatchUp, Delivery, Job, JobId, JobIdError, JobSource, Payload, PayloadKind,
    Schedule, SessionTarget,
};
use chrono::Timelike;

/// The reply meaning "nothing needs attention".
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// At most this many characters besides [`HEARTBEAT_OK`] and a reply is still an acknowledgement.
pub const ACK_MAX_CHARS: usize = 300;
/// The file a heartbeat reads, in the agent's workspace.
pub const HEARTBEAT_FILE: &str = "HEARTBEAT.md";
/// The reply that is never delivered.
pub const NO_REPLY: &str = "NO_REPLY";

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
pub fn job_id(agent: &str) -> Result<JobId, JobIdError> {
    JobId::parse(&format!("heartbeat-{agent}"))
}

impl HeartbeatSpec {
    /// The job it describes (creation time and anchor kept from `existing`).
    pub fn job(&self, now_ms: u64, existing: Option<&Job>) -> Result<Job, JobIdError> {
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

/// A text that is not active hours (`parse_hours`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid active hours {given:?} (expected \"HH:MM-HH:MM\", e.g. \"08:00-22:00\")")]
pub struct HoursError {
    /// The text given.
    pub given: String,
}

/// Parses `HH:MM-HH:MM` (24 h; `24:00` allowed as an end) into minutes after midnight.
pub(crate) fn parse_hours(text: &str) -> Result<(u16, u16), HoursError> {
    let bad = || HoursError {
        given: text.to_string(),
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
