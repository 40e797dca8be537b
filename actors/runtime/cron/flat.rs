//! A job described by flat fields (`every = "10m"`, `message = "…"`), as the CLI flags and the
//! agent `cron` tool take them, turned into a [`JobSpec`]; and a stored [`Job`](super::Job) back into the
//! spec that describes it (so an update can change some fields only).

use super::job::{Delivery, DeliveryMode, Payload, PayloadKind, SessionTarget};
use super::spec::{JobSpec, ScheduleSpec};
use serde::Deserialize;

/// The flat fields; every one optional (an update keeps what is not given).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlatSpec {
    /// A chosen id (add only).
    #[serde(default)]
    pub id: Option<String>,
    /// The agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Once, at this RFC 3339 time.
    #[serde(default)]
    pub at: Option<String>,
    /// Every this long (`10m`, `1h30m`).
    #[serde(default)]
    pub every: Option<String>,
    /// A 5- or 6-field cron expression.
    #[serde(default)]
    pub cron: Option<String>,
    /// The cron expression's IANA timezone.
    #[serde(default)]
    pub tz: Option<String>,
    /// A task for the agent.
    #[serde(default)]
    pub message: Option<String>,
    /// A system line for the agent.
    #[serde(default)]
    pub system_event: Option<String>,
    /// A flow to start (instead of a task for the agent).
    #[serde(default)]
    pub flow: Option<String>,
    /// The flow's inputs.
    #[serde(default)]
    pub inputs: Option<std::collections::BTreeMap<String, String>>,
    /// A name for people.
    #[serde(default)]
    pub name: Option<String>,
    /// `main` or `isolated`.
    #[serde(default)]
    pub session: Option<SessionTarget>,
    /// `channel` or `channel:to`, where the final text goes.
    #[serde(default)]
    pub announce: Option<String>,
    /// Enabled or not.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// `channel` or `channel:to` as an announce delivery.
pub(crate) fn announce(text: &str) -> Delivery {
    let (channel, to) = match text.split_once(':') {
        Some((c, t)) => (c, Some(t.to_string()).filter(|t| !t.is_empty())),
        None => (text, None),
    };
    Delivery {
        mode: DeliveryMode::Announce,
        channel: Some(channel.to_string()),
        to,
    }
}

/// Fields that do not make a job spec; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FlatError {
    /// `every` is not a duration.
    #[error("every: {0}")]
    Every(#[source] clawbus_core::config::DurationError),
    /// More than one of `at`, `every`, `cron`.
    #[error("schedule: give only one of at, every, cron")]
    Schedules,
    /// `tz` without `cron`.
    #[error("tz: only with cron")]
    TzWithoutCron,
    /// More than one of `message`, `system_event` and `flow`.
    #[error("payload: give only one of message, system_event, flow")]
    Payloads,
    /// A new job without a schedule.
    #[error(
        "schedule: one of at (RFC 3339), every (e.g. \"10m\") or cron (e.g. \"0 9 * * 1-5\") is required"
    )]
    NoSchedule,
    /// A new job without a payload.
    #[error("payload: one of message, system_event or flow is required")]
    NoPayload,
}

impl FlatSpec {
    /// The spec these fields describe: over `base` (an update) or a new job of
    /// `default_agent`. The error names the field.
    pub fn into_spec(
        self,
        default_agent: &str,
        base: Option<JobSpec>,
    ) -> Result<JobSpec, FlatError> {
        let schedule = match (&self.at, &self.every, &self.cron) {
            (Some(at), None, None) => Some(ScheduleSpec::At { at: at.clone() }),
            (None, Some(every), None) => {
                let d = clawbus_core::config::parse_duration(every).map_err(FlatError::Every)?;
                let every_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                Some(ScheduleSpec::Every {
                    every_ms,
                    anchor_ms: None,
                })
            }
            (None, None, Some(expr)) => Some(ScheduleSpec::Cron {
                expr: expr.clone(),
                tz: self.tz.clone(),
            }),
            (None, None, None) => None,
            _ => return Err(FlatError::Schedules),
        };
        if self.tz.is_some() && self.cron.is_none() {
            return Err(FlatError::TzWithoutCron);
        }
        let payload = match (&self.message, &self.system_event, &self.flow) {
            (Some(m), None, None) => Some(Payload {
                kind: PayloadKind::AgentTurn,
                message: m.clone(),
            }),
            (None, Some(m), None) => Some(Payload {
                kind: PayloadKind::SystemEvent,
                message: m.clone(),
            }),
            (None, None, Some(f)) => {
                Some(Payload::flow(f, self.inputs.clone().unwrap_or_default()))
            }
            (None, None, None) => None,
            _ => return Err(FlatError::Payloads),
        };
        let mut spec = match base {
            Some(base) => base,
            None => JobSpec {
                id: self.id.clone(),
                name: None,
                agent: self
                    .agent
                    .clone()
                    .unwrap_or_else(|| default_agent.to_string()),
                schedule: schedule.clone().ok_or(FlatError::NoSchedule)?,
                payload: payload.clone().ok_or(FlatError::NoPayload)?,
                session: SessionTarget::default(),
                delivery: Delivery::default(),
                enabled: true,
                catch_up: Default::default(),
                delete_after_run: false,
            },
        };
        if let Some(agent) = self.agent {
            spec.agent = agent;
        }
        if let Some(s) = schedule {
            spec.schedule = s;
        }
        if let Some(p) = payload {
            spec.payload = p;
        }
        if let Some(n) = self.name {
            spec.name = Some(n);
        }
        if let Some(s) = self.session {
            spec.session = s;
        }
        if let Some(a) = self.announce {
            spec.delivery = announce(&a);
        }
        if let Some(e) = self.enabled {
            spec.enabled = e;
        }
        Ok(spec)
    }
}
