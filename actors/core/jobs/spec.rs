//! What a user gives to add or update a job ([`JobSpec`]), checked into a [`Job`] with typed
//! errors that name the field.

use super::expr::CronExpr;
use super::job::{
    CatchUp, Delivery, DeliveryMode, Job, JobId, JobSource, Payload, PayloadKind, Schedule,
    SessionTarget,
};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A schedule as given: like [`Schedule`], but a cron timezone may be left to the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ScheduleSpec {
    /// Once, at an RFC 3339 instant.
    At {
        /// The instant, RFC 3339 (`2026-03-08T09:00:00-05:00`).
        at: String,
    },
    /// Every `every_ms`, from `anchor_ms` (default: the job's creation).
    Every {
        /// The period in ms, > 0.
        every_ms: u64,
        /// The anchor (Unix ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<u64>,
    },
    /// A 5- or 6-field cron expression in `tz` (default: the gateway's timezone).
    Cron {
        /// The expression.
        expr: String,
        /// An IANA timezone name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
    },
}

/// A job as a user describes it (CLI, HTTP, the agent `cron` tool, `[[cron]]` tables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// A chosen id (`[A-Za-z0-9_-]`, ≤ 64); a fresh one when absent. Ignored by `update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A name for people (default: the message, shortened).
    #[serde(default)]
    pub name: Option<String>,
    /// The agent it runs on.
    pub agent: String,
    /// When it fires.
    pub schedule: ScheduleSpec,
    /// What a fire asks.
    pub payload: Payload,
    /// Which session (default `isolated`).
    #[serde(default)]
    pub session: SessionTarget,
    /// Where the final text goes (default: nowhere).
    #[serde(default)]
    pub delivery: Delivery,
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Default `latest`.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// One-shot jobs: delete after the run instead of disabling.
    #[serde(default)]
    pub delete_after_run: bool,
}

fn yes() -> bool {
    true
}

/// Why a spec was refused. Each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The cron expression does not parse.
    #[error("schedule.expr: invalid cron expression {expr:?}: {reason}")]
    InvalidExpression {
        /// The expression.
        expr: String,
        /// The parser's reason.
        #[source]
        reason: super::expr::CronExprError,
    },
    /// The timezone is not an IANA name.
    #[error("schedule.tz: unknown timezone {0:?} (expected an IANA name such as Europe/Paris)")]
    UnknownTimezone(String),
    /// `at` is not RFC 3339.
    #[error("schedule.at: {at:?} is not an RFC 3339 time: {reason}")]
    InvalidAt {
        /// The text.
        at: String,
        /// The parser's reason.
        #[source]
        reason: chrono::ParseError,
    },
    /// `at` is not in the future.
    #[error("schedule.at: {0} is in the past")]
    AtInPast(String),
    /// `every_ms` is 0.
    #[error("schedule.every_ms: must be greater than 0")]
    ZeroInterval,
    /// No agent with that id.
    #[error("agent: unknown agent {agent:?} (known: {known})")]
    UnknownAgent {
        /// The id given.
        agent: String,
        /// The known ids, comma-separated.
        known: String,
    },
    /// The message is empty.
    #[error("payload.message: must not be empty")]
    EmptyMessage,
    /// `announce` without a channel.
    #[error("delivery.channel: required when delivery.mode is \"announce\"")]
    MissingChannel,
    /// The chosen id is malformed.
    #[error("id: {0}")]
    InvalidId(#[source] super::job::JobIdError),
    /// `payload.kind` `heartbeat`, which only `[heartbeat]` declares.
    #[error(
        "payload.kind: \"heartbeat\" jobs come from an agent's [heartbeat] (expected \"systemEvent\" or \"agentTurn\")"
    )]
    ReservedKind,
    /// A `flow` payload that is not `{"flow": …, "inputs": …}`.
    #[error("payload.message: {0}")]
    FlowPayload(String),
    /// A cron expression that never fires.
    #[error("schedule.expr: {0:?} never fires")]
    NeverFires(String),
}

/// What a spec is checked against.
#[derive(Debug, Clone)]
pub struct SpecContext<'a> {
    /// The ids of the configured agents.
    pub agents: &'a BTreeSet<String>,
    /// The timezone of cron schedules that name none (the gateway's configured one).
    pub default_tz: Tz,
    /// Now, Unix ms (an `at` must be later).
    pub now_ms: u64,
}

impl JobSpec {
    /// Checks the spec and builds the job it describes (`id`, `created_at` given by the caller
    /// for an update; a fresh job otherwise).
    pub fn validate(
        &self,
        ctx: &SpecContext<'_>,
        existing: Option<&Job>,
    ) -> Result<Job, SpecError> {
        if !ctx.agents.contains(&self.agent) {
            let known: Vec<&str> = ctx.agents.iter().map(String::as_str).collect();
            return Err(SpecError::UnknownAgent {
                agent: self.agent.clone(),
                known: known.join(", "),
            });
        }
        if self.payload.kind == PayloadKind::Heartbeat {
            return Err(SpecError::ReservedKind);
        }
        if self.payload.message.trim().is_empty() {
            return Err(SpecError::EmptyMessage);
        }
        if self.payload.kind == PayloadKind::Flow {
            super::job::FlowStart::parse(&self.payload.message).map_err(SpecError::FlowPayload)?;
        }
        if self.delivery.mode == DeliveryMode::Announce
            && self
                .delivery
                .channel
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
        {
            return Err(SpecError::MissingChannel);
        }
        let schedule = self.schedule(ctx)?;
        let id = match (existing, &self.id) {
            (Some(job), _) => job.id.clone(),
            (None, Some(id)) => JobId::parse(id).map_err(SpecError::InvalidId)?,
            (None, None) => JobId::random(),
        };
        let name = self
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| self.payload.message.chars().take(40).collect::<String>());
        Ok(Job {
            id,
            name,
            agent: self.agent.clone(),
            schedule,
            payload: self.payload.clone(),
            session: self.session,
            delivery: self.delivery.clone(),
            enabled: self.enabled,
            catch_up: self.catch_up,
            delete_after_run: self.delete_after_run,
            created_at: existing.map_or(ctx.now_ms, |j| j.created_at),
            updated_at: ctx.now_ms,
            source: existing.map_or(JobSource::Api, |j| j.source),
            active_hours: existing.and_then(|j| j.active_hours.clone()),
            created_by: existing.and_then(|j| j.created_by.clone()),
        })
    }

    fn schedule(&self, ctx: &SpecContext<'_>) -> Result<Schedule, SpecError> {
        Ok(match &self.schedule {
            ScheduleSpec::At { at } => {
                let parsed =
                    chrono::DateTime::parse_from_rfc3339(at).map_err(|e| SpecError::InvalidAt {
                        at: at.clone(),
                        reason: e,
                    })?;
                if parsed.timestamp_millis() <= i64::try_from(ctx.now_ms).unwrap_or(i64::MAX) {
                    return Err(SpecError::AtInPast(at.clone()));
                }
                Schedule::At { at: parsed }
            }
            ScheduleSpec::Every {
                every_ms,
                anchor_ms,
            } => {
                if *every_ms == 0 {
                    return Err(SpecError::ZeroInterval);
                }
                Schedule::Every {
                    every_ms: *every_ms,
                    anchor_ms: *anchor_ms,
                }
            }
            ScheduleSpec::Cron { expr, tz } => {
                let tz = match tz {
                    Some(name) => name
                        .parse::<Tz>()
                        .map_err(|_| SpecError::UnknownTimezone(name.clone()))?,
                    None => ctx.default_tz,
                };
                let parsed =
                    CronExpr::parse(expr).map_err(|reason| SpecError::InvalidExpression {
                        expr: expr.clone(),
                        reason,
                    })?;
                let compiled = super::schedule::Compiled::Cron {
                    expr: Box::new(parsed),
                    tz,
                };
                if compiled.next_after(ctx.now_ms).is_none() {
                    return Err(SpecError::NeverFires(expr.clone()));
                }
                Schedule::Cron {
                    expr: expr.clone(),
                    tz: tz.name().to_string(),
                }
            }
        })
    }
}

impl JobSpec {
    /// The spec that describes a stored job.
    pub fn of_job(job: &Job) -> Self {
        Self {
            id: Some(job.id.to_string()),
            name: Some(job.name.clone()),
            agent: job.agent.clone(),
            schedule: match &job.schedule {
                Schedule::At { at } => ScheduleSpec::At {
                    at: at.to_rfc3339(),
                },
                Schedule::Every {
                    every_ms,
                    anchor_ms,
                } => ScheduleSpec::Every {
                    every_ms: *every_ms,
                    anchor_ms: *anchor_ms,
                },
                Schedule::Cron { expr, tz } => ScheduleSpec::Cron {
                    expr: expr.clone(),
                    tz: Some(tz.clone()),
                },
            },
            payload: job.payload.clone(),
            session: job.session,
            delivery: job.delivery.clone(),
            enabled: job.enabled,
            catch_up: job.catch_up,
            delete_after_run: job.delete_after_run,
        }
    }
}
