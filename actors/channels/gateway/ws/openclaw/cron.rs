//! Cron jobs in OpenClaw's shapes: a stored job as its `CronJob` (`agentId`, `schedule.everyMs`,
//! `sessionTarget`, `wakeMode`, `payload.kind`, `state.nextRunAtMs`), a page of them as
//! `cron.list` answers (`{jobs, total, offset, limit, hasMore, nextOffset, snapshotRevision}`),
//! a run as a `CronRunLogEntry`; and `cron.add` / `cron.update` params into a [`JobSpec`].
//!
//! What clawbus cannot do is refused with a message that names the field: schedules `on-exit`
//! and `stream`, payloads `command` and `script`, `sessionTarget` `current` and `session:<id>`,
//! delivery `webhook`.

use clawbus_runtime::cron::{
    Delivery, DeliveryMode, JobSpec, JobView, Payload, PayloadKind, RunOutcome, RunRecord,
    Schedule, ScheduleSpec, SessionTarget,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// The largest page `cron.list` and `cron.runs` answer (OpenClaw's bound).
pub(crate) const MAX_PAGE: usize = 200;
/// `cron.runs` page size when the client names none.
const DEFAULT_RUNS_PAGE: usize = 50;

/// A stored job as OpenClaw's `CronJob`.
pub(crate) fn job(v: &JobView) -> Value {
    let j = &v.job;
    let schedule = match &j.schedule {
        Schedule::At { at } => json!({ "kind": "at", "at": at.to_rfc3339() }),
        Schedule::Every {
            every_ms,
            anchor_ms,
        } => {
            let mut s = json!({ "kind": "every", "everyMs": every_ms });
            if let Some(a) = anchor_ms {
                s["anchorMs"] = json!(a);
            }
            s
        }
        Schedule::Cron { expr, tz } => json!({ "kind": "cron", "expr": expr, "tz": tz }),
    };
    let payload = match j.payload.kind {
        PayloadKind::AgentTurn => json!({ "kind": "agentTurn", "message": j.payload.message }),
        PayloadKind::SystemEvent => json!({ "kind": "systemEvent", "text": j.payload.message }),
        PayloadKind::Heartbeat => json!({ "kind": "heartbeat" }),
        PayloadKind::Flow => json!({ "kind": "flow", "message": j.payload.message }),
    };
    let mut state = serde_json::Map::new();
    if let Some(next) = v.state.next_fire_ms {
        state.insert("nextRunAtMs".into(), json!(next));
    }
    if let Some(lease) = &v.state.lease {
        state.insert("runningAtMs".into(), json!(lease.scheduled_ms));
    }
    if let Some(o) = v.state.last_outcome {
        state.insert("lastRunStatus".into(), json!(run_status(o)));
    }
    state.insert("consecutiveErrors".into(), json!(v.state.failures));
    let mut out = json!({
        "id": j.id,
        "agentId": j.agent,
        "name": j.name,
        "enabled": j.enabled,
        "deleteAfterRun": j.delete_after_run,
        "createdAtMs": j.created_at,
        "updatedAtMs": j.updated_at,
        "schedule": schedule,
        "sessionTarget": session_target(j.session),
        "wakeMode": "now",
        "payload": payload,
        "delivery": delivery(&j.delivery),
        "state": state,
    });
    if let Some(next) = v.state.next_fire_ms {
        out["nextRunAtMs"] = json!(next);
    }
    out
}

fn session_target(s: SessionTarget) -> &'static str {
    match s {
        SessionTarget::Main => "main",
        SessionTarget::Isolated => "isolated",
    }
}

fn delivery(d: &Delivery) -> Value {
    match d.mode {
        DeliveryMode::None => json!({ "mode": "none" }),
        DeliveryMode::Announce => {
            let mut v = json!({ "mode": "announce", "channel": d.channel });
            if let Some(to) = &d.to {
                v["to"] = json!(to);
            }
            v
        }
    }
}

/// A run's outcome as OpenClaw's `ok` / `error` / `skipped`.
fn run_status(o: RunOutcome) -> &'static str {
    match o {
        RunOutcome::Succeeded => "ok",
        RunOutcome::Skipped => "skipped",
        RunOutcome::Failed | RunOutcome::TimedOut | RunOutcome::Cancelled => "error",
    }
}

/// The filters and page of `cron.list` (the ignored ones are gone, see [`super::fields`]).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListParams {
    /// Disabled jobs too (default: enabled ones only).
    #[serde(default)]
    pub(crate) include_disabled: Option<bool>,
    /// `all`, `enabled` or `disabled`; wins over `includeDisabled`.
    #[serde(default)]
    pub(crate) enabled: Option<String>,
    /// Jobs of this agent only.
    #[serde(default)]
    pub(crate) agent_id: Option<String>,
    /// Jobs whose id or name holds this text (any case).
    #[serde(default)]
    pub(crate) query: Option<String>,
    /// Page size, 1..=200 (default 200).
    #[serde(default)]
    pub(crate) limit: Option<usize>,
    /// Jobs skipped before the page.
    #[serde(default)]
    pub(crate) offset: Option<usize>,
}

/// One page of jobs, as `cron.list` answers it.
pub(crate) fn page(all: &[JobView], p: &ListParams) -> Result<Value, String> {
    let limit = p.limit.unwrap_or(MAX_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(format!("limit: {limit} is out of range (1..={MAX_PAGE})"));
    }
    let wanted = |v: &&JobView| {
        let enabled_ok = match p.enabled.as_deref() {
            Some("all") => true,
            Some("enabled") => v.job.enabled,
            Some("disabled") => !v.job.enabled,
            _ => p.include_disabled.unwrap_or(false) || v.job.enabled,
        };
        let agent_ok = p.agent_id.as_deref().is_none_or(|a| a == v.job.agent);
        let query_ok = p.query.as_deref().is_none_or(|q| {
            let q = q.to_lowercase();
            v.job.name.to_lowercase().contains(&q) || v.job.id.to_string().contains(&q)
        });
        enabled_ok && agent_ok && query_ok
    };
    if let Some(e) = p.enabled.as_deref()
        && !["all", "enabled", "disabled"].contains(&e)
    {
        return Err(format!(
            "enabled: {e:?} is not one of \"all\", \"enabled\", \"disabled\""
        ));
    }
    let chosen: Vec<&JobView> = all.iter().filter(wanted).collect();
    let total = chosen.len();
    let offset = p.offset.unwrap_or(0).min(total);
    let jobs: Vec<Value> = chosen
        .iter()
        .skip(offset)
        .take(limit)
        .map(|v| job(v))
        .collect();
    let next = offset + jobs.len();
    let has_more = next < total;
    let revision = all
        .iter()
        .map(|v| v.job.updated_at)
        .max()
        .unwrap_or(0)
        .wrapping_mul(31)
        .wrapping_add(all.len() as u64);
    Ok(json!({
        "jobs": jobs,
        "total": total,
        "offset": offset,
        "limit": limit,
        "hasMore": has_more,
        "nextOffset": if has_more { json!(next) } else { Value::Null },
        "snapshotRevision": format!("r{revision:x}"),
    }))
}

/// A run as OpenClaw's `CronRunLogEntry`.
pub(crate) fn run_entry(r: &RunRecord, name: &str) -> Value {
    let mut v = json!({
        "ts": r.ended_ms,
        "jobId": r.job_id,
        "jobName": name,
        "action": "finished",
        "status": run_status(r.outcome),
        "runAtMs": r.started_ms,
        "durationMs": r.ended_ms.saturating_sub(r.started_ms),
    });
    if let Some(t) = r.task_id {
        v["runId"] = json!(t);
    }
    if let Some(e) = &r.error {
        v["error"] = json!(e);
    }
    v
}

/// A page of a job's runs, newest first, as `cron.runs` answers it.
pub(crate) fn runs_page(
    runs: &[RunRecord],
    name: &str,
    limit: Option<usize>,
    offset: Option<usize>,
) -> Value {
    let named: Vec<(&RunRecord, &str)> = runs.iter().map(|r| (r, name)).collect();
    named_runs_page(named, limit, offset)
}

/// A page of runs of several jobs (each with its job's name), newest first: `cron.runs` with
/// `scope: "all"`.
pub(crate) fn named_runs_page(
    mut runs: Vec<(&RunRecord, &str)>,
    limit: Option<usize>,
    offset: Option<usize>,
) -> Value {
    runs.sort_by_key(|(r, _)| std::cmp::Reverse((r.ended_ms, r.started_ms)));
    let limit = limit.unwrap_or(DEFAULT_RUNS_PAGE).clamp(1, MAX_PAGE);
    let total = runs.len();
    let offset = offset.unwrap_or(0).min(total);
    let entries: Vec<Value> = runs
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(r, name)| run_entry(r, name))
        .collect();
    let next = offset + entries.len();
    let has_more = next < total;
    json!({
        "entries": entries,
        "total": total,
        "offset": offset,
        "limit": limit,
        "hasMore": has_more,
        "nextOffset": if has_more { json!(next) } else { Value::Null },
    })
}

/// OpenClaw's `schedule`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum OcSchedule {
    /// Once.
    At {
        /// RFC 3339.
        at: String,
    },
    /// Every `everyMs`.
    Every {
        /// The period.
        #[serde(rename = "everyMs")]
        every_ms: u64,
        /// The anchor.
        #[serde(default, rename = "anchorMs")]
        anchor_ms: Option<u64>,
    },
    /// A cron expression.
    Cron {
        /// The expression.
        expr: String,
        /// The timezone.
        #[serde(default)]
        tz: Option<String>,
    },
    /// After a command exits: not here.
    OnExit(IgnoredAny),
    /// On a command's output: not here.
    Stream(IgnoredAny),
}

impl OcSchedule {
    fn spec(self) -> Result<ScheduleSpec, String> {
        match self {
            Self::At { at } => Ok(ScheduleSpec::At { at }),
            Self::Every {
                every_ms,
                anchor_ms,
            } => Ok(ScheduleSpec::Every {
                every_ms,
                anchor_ms,
            }),
            Self::Cron { expr, tz } => Ok(ScheduleSpec::Cron {
                expr,
                tz: tz.filter(|t| !t.is_empty()),
            }),
            Self::OnExit(_) | Self::Stream(_) => {
                Err("schedule.kind: clawbus schedules \"at\", \"every\" and \"cron\" only".into())
            }
        }
    }
}

/// OpenClaw's `payload` (the fields clawbus ignores are gone).
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub(crate) enum OcPayload {
    /// A system line.
    SystemEvent {
        /// The line.
        #[serde(default)]
        text: Option<String>,
    },
    /// A turn.
    AgentTurn {
        /// The message.
        #[serde(default)]
        message: Option<String>,
    },
    /// A command: not here.
    Command(IgnoredAny),
    /// A script: not here.
    Script(IgnoredAny),
}

impl OcPayload {
    fn apply(self, base: Option<&Payload>) -> Result<Payload, String> {
        let keep = |kind| base.filter(|b| b.kind == kind).map(|b| b.message.clone());
        match self {
            Self::AgentTurn { message } => Ok(Payload {
                kind: PayloadKind::AgentTurn,
                message: message
                    .or_else(|| keep(PayloadKind::AgentTurn))
                    .unwrap_or_default(),
            }),
            Self::SystemEvent { text } => Ok(Payload {
                kind: PayloadKind::SystemEvent,
                message: text
                    .or_else(|| keep(PayloadKind::SystemEvent))
                    .unwrap_or_default(),
            }),
            Self::Command(_) | Self::Script(_) => Err(
                "payload.kind: clawbus runs \"agentTurn\" and \"systemEvent\" payloads only".into(),
            ),
        }
    }
}

/// OpenClaw's `delivery`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct OcDelivery {
    /// `none`, `announce` or `webhook`.
    #[serde(default)]
    mode: Option<String>,
    /// The channel (`last` means none in particular).
    #[serde(default)]
    channel: Option<String>,
    /// The recipient.
    #[serde(default)]
    to: Option<Value>,
}

impl OcDelivery {
    fn spec(self) -> Result<Delivery, String> {
        let to = match self.to {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
        };
        match self.mode.as_deref() {
            None | Some("none") => Ok(Delivery::default()),
            Some("announce") => {
                let channel = self.channel.filter(|c| c != "last").ok_or(
                    "delivery.channel: clawbus announces to a named channel (not \"last\")",
                )?;
                Ok(Delivery {
                    mode: DeliveryMode::Announce,
                    channel: Some(channel),
                    to,
                })
            }
            Some(other) => Err(format!(
                "delivery.mode: {other:?} is not supported here (expected \"none\" or \"announce\")"
            )),
        }
    }
}

fn target(s: &str) -> Result<SessionTarget, String> {
    match s {
        "main" => Ok(SessionTarget::Main),
        "isolated" => Ok(SessionTarget::Isolated),
        other => Err(format!(
            "sessionTarget: {other:?} is not supported here (expected \"main\" or \"isolated\")"
        )),
    }
}

/// `cron.add` params (OpenClaw's `CronAddParams`, the ignored fields gone).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AddParams {
    name: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    delete_after_run: Option<bool>,
    schedule: OcSchedule,
    session_target: String,
    payload: OcPayload,
    #[serde(default)]
    delivery: Option<OcDelivery>,
}

impl AddParams {
    /// The job spec; `default_agent` when no `agentId` is given.
    pub(crate) fn spec(self, default_agent: &str) -> Result<JobSpec, String> {
        Ok(JobSpec {
            id: None,
            name: Some(self.name),
            agent: self.agent_id.unwrap_or_else(|| default_agent.to_string()),
            schedule: self.schedule.spec()?,
            payload: self.payload.apply(None)?,
            session: target(&self.session_target)?,
            delivery: self
                .delivery
                .map(OcDelivery::spec)
                .transpose()?
                .unwrap_or_default(),
            enabled: self.enabled.unwrap_or(true),
            catch_up: Default::default(),
            delete_after_run: self.delete_after_run.unwrap_or(false),
        })
    }
}

/// `cron.update` `patch` (OpenClaw's, the ignored fields gone).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Patch {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    delete_after_run: Option<bool>,
    #[serde(default)]
    schedule: Option<OcSchedule>,
    #[serde(default)]
    session_target: Option<String>,
    #[serde(default)]
    payload: Option<OcPayload>,
    #[serde(default)]
    delivery: Option<OcDelivery>,
}

impl Patch {
    /// `base` with the patch's fields changed.
    pub(crate) fn apply(self, mut base: JobSpec) -> Result<JobSpec, String> {
        if let Some(n) = self.name {
            base.name = Some(n);
        }
        if let Some(a) = self.agent_id {
            base.agent = a;
        }
        if let Some(e) = self.enabled {
            base.enabled = e;
        }
        if let Some(d) = self.delete_after_run {
            base.delete_after_run = d;
        }
        if let Some(s) = self.schedule {
            base.schedule = s.spec()?;
        }
        if let Some(t) = self.session_target {
            base.session = target(&t)?;
        }
        if let Some(p) = self.payload {
            base.payload = p.apply(Some(&base.payload))?;
        }
        if let Some(d) = self.delivery {
            base.delivery = d.spec()?;
        }
        Ok(base)
    }
}
