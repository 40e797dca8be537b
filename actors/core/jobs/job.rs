//! A cron job as stored and listed, in OpenClaw's shape (`schedule`, `payload`, `session`,
//! `delivery`), with typed ids and enums.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A text that is not a job id ([`JobId::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid job id {given:?} (expected 1-64 characters of A-Z, a-z, 0-9, '-' or '_')")]
pub struct JobIdError {
    /// The text given.
    pub given: String,
}

/// A job's id: 1–64 characters of `[A-Za-z0-9_-]` (a UUIDv7 unless the caller chose one), so it
/// is one token of a topic (`events.cron.<id>`), a request id and a session key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// A fresh, time-ordered id.
    pub fn random() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    /// Checks a caller-chosen id.
    pub fn parse(s: &str) -> Result<Self, JobIdError> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(JobIdError {
                given: s.to_string(),
            })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// When a job fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Schedule {
    /// Once, at an instant (RFC 3339 on the wire).
    At {
        /// The instant.
        at: DateTime<FixedOffset>,
    },
    /// Every `every_ms` milliseconds, at `anchor_ms + k × every_ms` (the anchor defaults to the
    /// job's creation time).
    Every {
        /// The period, > 0.
        every_ms: u64,
        /// The instant the periods count from (Unix ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<u64>,
    },
    /// A 5-field (`min hour dom month dow`) or 6-field (seconds first) cron expression,
    /// evaluated in the IANA timezone `tz`; see [`super::schedule`] for DST.
    Cron {
        /// The expression as the user wrote it.
        expr: String,
        /// The IANA timezone name (`Europe/Paris`).
        tz: String,
    },
}

impl Schedule {
    /// True for the one-shot `at` schedule.
    pub fn is_one_shot(&self) -> bool {
        matches!(self, Self::At { .. })
    }
}

/// What kind of turn a fire starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PayloadKind {
    /// Wakes the agent with a system line (the message, marked `SYSTEM_EVENT_MARKER`).
    SystemEvent,
    /// Gives the agent the message as a task.
    AgentTurn,
    /// Starts a run of a flow (through the flow engine's start topic, under the fire's request
    /// id): the message is `{"flow": "<name>", "inputs": {...}}` ([`FlowStart`]).
    Flow,
    /// An agent's heartbeat (from `[heartbeat]`): a turn in its main session asking it to follow
    /// `HEARTBEAT.md`; skipped without a model call when that file has no content, and a
    /// `HEARTBEAT_OK` reply is not delivered (see [`super::heartbeat`]).
    Heartbeat,
}

/// The marker put before a `systemEvent` message in the task text.
pub(crate) const SYSTEM_EVENT_MARKER: &str = "[system event] ";

/// What a fire asks of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// System line or task.
    pub kind: PayloadKind,
    /// The text (non-empty).
    pub message: String,
}

impl Payload {
    /// The task text sent to the agent: the message, after the system marker for `systemEvent`.
    pub fn task_text(&self) -> String {
        match self.kind {
            PayloadKind::SystemEvent => format!("{SYSTEM_EVENT_MARKER}{}", self.message),
            PayloadKind::AgentTurn | PayloadKind::Heartbeat | PayloadKind::Flow => {
                self.message.clone()
            }
        }
    }

    /// A flow payload for `flow` with `inputs`.
    pub fn flow(flow: &str, inputs: std::collections::BTreeMap<String, String>) -> Self {
        let start = FlowStart {
            flow: flow.to_string(),
            inputs,
        };
        Self {
            kind: PayloadKind::Flow,
            message: serde_json::to_string(&start).unwrap_or_default(),
        }
    }
}

/// What a `flow` payload starts: the flow's name and its inputs (as `--input k=v` gives them,
/// read as each input's declared type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowStart {
    /// The flow.
    pub flow: String,
    /// Its inputs.
    #[serde(default)]
    pub inputs: std::collections::BTreeMap<String, String>,
}

impl FlowStart {
    /// Reads a `flow` payload's message; the error says what is wrong.
    pub fn parse(message: &str) -> Result<Self, String> {
        let start: Self = serde_json::from_str(message)
            .map_err(|e| format!("{e} (expected {{\"flow\": \"<name>\", \"inputs\": {{...}}}})"))?;
        if start.flow.trim().is_empty() {
            return Err("the flow name is empty (expected a flow of flows.d/)".into());
        }
        Ok(start)
    }
}

/// Which session a fire runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionTarget {
    /// The agent's main session, `agent:<id>:main`.
    Main,
    /// A fresh session per run, `agent:<id>:cron:<jobId>:<scheduled ms>`.
    #[default]
    Isolated,
}

/// Whether the final text of a run is delivered somewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeliveryMode {
    /// Published to `channel.<channel>.out` (never a `NO_REPLY` text).
    Announce,
    /// Kept in the run's task record only.
    #[default]
    None,
}

/// Where the final text of a run goes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Delivery {
    /// Announce or not.
    pub mode: DeliveryMode,
    /// The channel announced to (required for `announce`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The recipient on that channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// What happens to fires missed while no scheduler ran (or more than the grace late).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CatchUp {
    /// The most recent missed fire runs once; the older ones are recorded as skipped.
    #[default]
    Latest,
    /// Every missed fire is recorded as skipped.
    None,
}

/// Where a job was declared, so a sync from the agent files touches only its own jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobSource {
    /// Added through the CLI, HTTP or the agent `cron` tool; the file sync leaves it alone.
    #[default]
    Api,
    /// A `[[cron]]` table of an agent file (id `<agent>--<id>`).
    File,
    /// An agent's `[heartbeat]` (id `heartbeat-<agent>`).
    Heartbeat,
}

/// The hours of the day a job may fire in (`08:00-22:00`), in a timezone; fires outside them
/// are skipped. `start == end` means all day; `start > end` wraps past midnight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveHours {
    /// Minutes after midnight the window opens (inclusive).
    pub start_min: u16,
    /// Minutes after midnight the window closes (exclusive).
    pub end_min: u16,
    /// The IANA timezone the hours are read in.
    pub tz: String,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// A name for people.
    pub name: String,
    /// The agent it runs on.
    pub agent: String,
    /// When it fires.
    pub schedule: Schedule,
    /// What a fire asks.
    pub payload: Payload,
    /// Which session a fire runs in.
    pub session: SessionTarget,
    /// Where the final text goes.
    #[serde(default)]
    pub delivery: Delivery,
    /// Disabled jobs never fire on schedule.
    pub enabled: bool,
    /// The missed-fire policy.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// One-shot jobs: deleted after their run instead of disabled.
    #[serde(default)]
    pub delete_after_run: bool,
    /// Unix ms.
    pub created_at: u64,
    /// Unix ms.
    pub updated_at: u64,
    /// Where it was declared.
    #[serde(default)]
    pub source: JobSource,
    /// When set, fires outside these hours are skipped (heartbeats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_hours: Option<ActiveHours>,
    /// `agent:<id>` for a job a model created through the `cron` tool (such jobs are held to
    /// `[cron] min_interval` and `max_agent_jobs`); `None` for jobs people made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// The [`Job::created_by`] of a job the model of `agent` created.
pub fn created_by_agent(agent: &str) -> String {
    format!("agent:{agent}")
}

/// A span of milliseconds as people write it: `10m`, `1h30m`, `1d`, `1s500ms`, `0ms`; the same
/// form `every = "…"` takes.
pub fn human_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
        (1, "ms"),
    ];
    if ms == 0 {
        return "0ms".into();
    }
    let mut rest = ms;
    let mut out = String::new();
    for (size, unit) in UNITS {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

impl fmt::Display for Schedule {
    /// `at 2026-03-08T09:00:00+01:00`, `every 10m`, `cron "0 9 * * 1-5" Europe/Paris`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::At { at } => write!(f, "at {}", at.to_rfc3339()),
            Self::Every { every_ms, .. } => write!(f, "every {}", human_ms(*every_ms)),
            Self::Cron { expr, tz } => write!(f, "cron {expr:?} {tz}"),
        }
    }
}
