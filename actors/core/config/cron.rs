//! An agent's own schedule: `[[cron]]` jobs and its `[heartbeat]`, checked here with
//! `file:line:col` problems and synced into the scheduler's store on start.
//!
//! ```toml
//! [[cron]]
//! id = "daily"                     # stored as "<agent>--daily"
//! cron = "0 9 * * 1-5"             # or every = "10m", or at = "2026-03-08T09:00:00+01:00"
//! tz = "Europe/Paris"              # cron only; default: the agent's timezone, else the gateway's
//! message = "Summarise the inbox"  # or system_event = "…"
//! name = "morning summary"         # optional
//! session = "isolated"             # or "main"
//! announce = "telegram:12345"      # optional: channel[:to] the final text goes to
//! catch_up = "latest"              # or "none"
//! enabled = true
//!
//! [heartbeat]
//! every = "30m"                    # default 30m
//! active_hours = "08:00-22:00"     # default: always
//! tz = "Europe/Paris"              # default: the agent's timezone, else the gateway's
//! to = "telegram:12345"            # optional: where a real reply goes
//! enabled = true
//! ```

use super::Problem;
use super::ReplyRoutes;
use super::duration::DurationText;
use super::file::AgentFile;
use super::span::Source;
use super::validate::duration;
use crate::jobs::{
    ActiveHours, CatchUp, Delivery, DeliveryMode, HeartbeatSpec, JobId, JobSpec, Payload,
    PayloadKind, ScheduleSpec, SessionTarget, SpecContext, SpecError,
};
use chrono_tz::Tz;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::time::Duration;
use toml::Spanned;

/// The default heartbeat period.
pub(crate) const DEFAULT_HEARTBEAT_EVERY: Duration = Duration::from_secs(30 * 60);

/// One `[[cron]]` table of an agent file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CronFile {
    pub id: Spanned<String>,
    pub every: Option<Spanned<DurationText>>,
    pub cron: Option<Spanned<String>>,
    pub at: Option<Spanned<String>>,
    pub tz: Option<Spanned<String>>,
    pub message: Option<Spanned<String>>,
    pub system_event: Option<Spanned<String>>,
    pub name: Option<String>,
    pub session: Option<SessionTarget>,
    pub announce: Option<Spanned<String>>,
    pub catch_up: Option<CatchUp>,
    pub enabled: Option<bool>,
}

/// `[heartbeat]` of an agent file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HeartbeatFile {
    pub every: Option<Spanned<DurationText>>,
    pub active_hours: Option<Spanned<String>>,
    pub tz: Option<Spanned<String>>,
    pub to: Option<Spanned<String>>,
    pub enabled: Option<bool>,
}

/// The id a `[[cron]]` job of `agent` is stored under: `<agent>--<id>` (a job id is one token
/// of a topic, a request id and a session key, so it cannot hold `.` or `:`).
pub(crate) fn declared_job_id(agent: &str, id: &str) -> String {
    format!("{agent}--{id}")
}

fn timezone(
    src: &Source,
    tz: &Spanned<String>,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Option<Tz> {
    match tz.get_ref().parse::<Tz>() {
        Ok(t) => Some(t),
        Err(_) => {
            let message = format!(
                "unknown timezone {:?} (expected an IANA name such as \"Europe/Paris\" or \"UTC\")",
                tz.get_ref()
            );
            problems.push(src.at(Some(tz.span()), field, message));
            None
        }
    }
}

/// `channel` or `channel:to`.
fn target(
    src: &Source,
    text: &Spanned<String>,
    field: &str,
    routes: &ReplyRoutes,
    problems: &mut Vec<Problem>,
) -> Option<Delivery> {
    let (channel, to) = match text.get_ref().split_once(':') {
        Some((c, t)) => (c, Some(t.to_string()).filter(|t| !t.is_empty())),
        None => (text.get_ref().as_str(), None),
    };
    if crate::ids::outbound_topic(channel).is_err() {
        let message = format!(
            "invalid target {:?} (expected \"channel:to\", the channel of letters, digits, '-' or '_', e.g. \"telegram:12345\")",
            text.get_ref()
        );
        problems.push(src.at(Some(text.span()), field, message));
        return None;
    }
    if let Some(message) = routes.refuses(channel, to.as_deref()) {
        problems.push(src.at(Some(text.span()), field, message));
        return None;
    }
    Some(Delivery {
        mode: DeliveryMode::Announce,
        channel: Some(channel.to_string()),
        to,
    })
}

/// The agent's timezone when its file names one (the default of its schedules).
fn agent_tz(f: &AgentFile) -> Option<Tz> {
    f.timezone.as_ref().and_then(|t| t.get_ref().parse().ok())
}

/// Turns `[[cron]]` into job specs (ids `<agent>--<id>`), pushing a problem for each bad one
/// (which is then left out). `gateway_tz` is the default timezone; `now_ms` the time a past `at`
/// is judged against.
pub(super) fn cron_jobs(
    src: &Source,
    agent: &str,
    f: &AgentFile,
    gateway_tz: Tz,
    now_ms: u64,
    routes: &ReplyRoutes,
    problems: &mut Vec<Problem>,
) -> Vec<JobSpec> {
    let mut out = Vec::new();
    let mut ids = BTreeSet::new();
    let agents = BTreeSet::from([agent.to_string()]);
    let ctx = SpecContext {
        agents: &agents,
        default_tz: agent_tz(f).unwrap_or(gateway_tz),
        now_ms,
    };
    for (i, c) in f.cron.iter().enumerate() {
        let c = c.get_ref();
        let field = |name: &str| format!("cron[{i}].{name}");
        let before = problems.len();
        let id = declared_job_id(agent, c.id.get_ref());
        if let Err(e) = JobId::parse(c.id.get_ref()).and_then(|_| JobId::parse(&id)) {
            problems.push(src.at(Some(c.id.span()), field("id"), e));
            continue;
        }
        if !ids.insert(c.id.get_ref().clone()) {
            let message = format!(
                "duplicate cron id {:?} (expected each [[cron]] id once per agent)",
                c.id.get_ref()
            );
            problems.push(src.at(Some(c.id.span()), field("id"), message));
            continue;
        }
        let schedule = schedule(src, c, i, problems);
        let payload = match (&c.message, &c.system_event) {
            (Some(m), None) => Some(Payload {
                kind: PayloadKind::AgentTurn,
                message: m.get_ref().clone(),
            }),
            (None, Some(m)) => Some(Payload {
                kind: PayloadKind::SystemEvent,
                message: m.get_ref().clone(),
            }),
            _ => {
                problems.push(src.at(
                    Some(c.id.span()),
                    field("message"),
                    "expected exactly one of message = \"…\" (a task) or system_event = \"…\"",
                ));
                None
            }
        };
        let delivery = match &c.announce {
            Some(a) => target(src, a, &field("announce"), routes, problems),
            None => Some(Delivery::default()),
        };
        let (Some(schedule), Some(payload), Some(delivery)) = (schedule, payload, delivery) else {
            continue;
        };
        if problems.len() > before {
            continue;
        }
        let spec = JobSpec {
            id: Some(id),
            name: c.name.clone(),
            agent: agent.to_string(),
            schedule,
            payload,
            session: c.session.unwrap_or_default(),
            delivery,
            enabled: c.enabled.unwrap_or(true),
            catch_up: c.catch_up.unwrap_or_default(),
            delete_after_run: false,
        };
        match spec.validate(&ctx, None) {
            Ok(_) => out.push(spec),
            Err(e) => {
                let (name, span) = spec_error_at(&e, c);
                let text = e.to_string();
                let message = text.split_once(": ").map_or(text.as_str(), |(_, m)| m);
                problems.push(src.at(Some(span), field(name), message));
            }
        }
    }
    out
}

/// The schedule of one `[[cron]]`: exactly one of `every`, `cron`, `at`.
fn schedule(
    src: &Source,
    c: &CronFile,
    i: usize,
    problems: &mut Vec<Problem>,
) -> Option<ScheduleSpec> {
    let field = |name: &str| format!("cron[{i}].{name}");
    let tz =
        c.tz.as_ref()
            .and_then(|t| timezone(src, t, &field("tz"), problems));
    match (&c.every, &c.cron, &c.at) {
        (Some(_), None, None) => {
            let every = duration(src, &c.every, &field("every"), Duration::ZERO, problems);
            let every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
            (every_ms > 0).then_some(ScheduleSpec::Every {
                every_ms,
                anchor_ms: None,
            })
        }
        (None, Some(expr), None) => {
            if c.tz.is_some() && tz.is_none() {
                return None;
            }
            Some(ScheduleSpec::Cron {
                expr: expr.get_ref().clone(),
                tz: tz.map(|t| t.name().to_string()),
            })
        }
        (None, None, Some(at)) => Some(ScheduleSpec::At {
            at: at.get_ref().clone(),
        }),
        _ => {
            problems.push(src.at(
                Some(c.id.span()),
                field("every"),
                "expected exactly one of every = \"10m\", cron = \"0 9 * * 1-5\" or at = \"<RFC 3339 time>\"",
            ));
            None
        }
    }
}

/// The field and span a spec error points at.
fn spec_error_at(e: &SpecError, c: &CronFile) -> (&'static str, std::ops::Range<usize>) {
    let id = ("id", c.id.span());
    let span_of = |name: &'static str, v: &Option<Spanned<String>>| {
        v.as_ref().map_or(id.clone(), |s| (name, s.span()))
    };
    match e {
        SpecError::InvalidExpression { .. } | SpecError::NeverFires(_) => span_of("cron", &c.cron),
        SpecError::UnknownTimezone(_) => span_of("tz", &c.tz),
        SpecError::InvalidAt { .. } | SpecError::AtInPast(_) => span_of("at", &c.at),
        SpecError::ZeroInterval => c.every.as_ref().map_or(id.clone(), |s| ("every", s.span())),
        SpecError::EmptyMessage => match &c.message {
            Some(m) => ("message", m.span()),
            None => span_of("system_event", &c.system_event),
        },
        SpecError::MissingChannel => span_of("announce", &c.announce),
        _ => id,
    }
}

/// Turns `[heartbeat]` into the agent's heartbeat (enabled by default: a beat with an empty
/// `HEARTBEAT.md` costs nothing).
pub(super) fn heartbeat(
    src: &Source,
    agent: &str,
    f: &AgentFile,
    gateway_tz: Tz,
    routes: &ReplyRoutes,
    problems: &mut Vec<Problem>,
) -> HeartbeatSpec {
    let h = &f.heartbeat;
    let every = duration(
        src,
        &h.every,
        "heartbeat.every",
        DEFAULT_HEARTBEAT_EVERY,
        problems,
    );
    let tz =
        h.tz.as_ref()
            .and_then(|t| timezone(src, t, "heartbeat.tz", problems))
            .or_else(|| agent_tz(f))
            .unwrap_or(gateway_tz);
    let active_hours = h.active_hours.as_ref().and_then(|a| {
        match crate::jobs::heartbeat::parse_hours(a.get_ref()) {
            Ok((start_min, end_min)) => Some(ActiveHours {
                start_min,
                end_min,
                tz: tz.name().to_string(),
            }),
            Err(message) => {
                problems.push(src.at(Some(a.span()), "heartbeat.active_hours", message));
                None
            }
        }
    });
    let delivery =
        h.to.as_ref()
            .and_then(|t| target(src, t, "heartbeat.to", routes, problems))
            .unwrap_or_default();
    HeartbeatSpec {
        agent: agent.to_string(),
        every_ms: u64::try_from(every.as_millis()).unwrap_or(u64::MAX),
        active_hours,
        delivery,
        enabled: h.enabled.unwrap_or(true),
    }
}
