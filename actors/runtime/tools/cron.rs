//! The `cron` tool: an agent schedules its own future work (`list | add | update | remove |
//! run | runs`). An agent sees and manages only its own jobs; jobs it adds run on it, are marked
//! `created_by: "agent:<id>"`, fire at most every `[cron] min_interval` and number at most
//! `[cron] max_agent_jobs` per agent (refused as `too_frequent` / `too_many_jobs`).

use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::cron::{CronError, FlatSpec, JobId, JobSpec, Scheduler, StoreError};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::fmt;
use std::sync::Arc;

/// `cron {action, id?, …job fields}` over the process's scheduler; without one it is
/// unavailable.
#[derive(Clone)]
pub(crate) struct CronTool {
    scheduler: Option<Arc<Scheduler>>,
}

impl fmt::Debug for CronTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronTool")
            .field("scheduler", &self.scheduler.is_some())
            .finish()
    }
}

impl CronTool {
    /// A tool managing `scheduler`'s jobs.
    pub(crate) fn new(scheduler: Option<Arc<Scheduler>>) -> Self {
        Self { scheduler }
    }
}

/// What the tool is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    List,
    Add,
    Update,
    Remove,
    Run,
    Runs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: Action,
    #[serde(flatten)]
    job: FlatSpec,
}

fn cron_error(e: CronError) -> ToolOutput {
    match e {
        CronError::Spec(e) => ToolOutput::error("invalid_arguments", e),
        e @ CronError::TooFrequent { min_ms, .. } => ToolOutput::error_with_suggestion(
            "too_frequent",
            e,
            format!(
                "schedule it every {} or less often",
                crate::cron::human_ms(min_ms)
            ),
        ),
        e @ CronError::TooManyJobs { .. } => ToolOutput::error_with_suggestion(
            "too_many_jobs",
            e,
            "remove a job you no longer need (action \"remove\") or update one instead",
        ),
        CronError::Store(StoreError::UnknownJob(id)) => {
            ToolOutput::error("not_found", format!("no cron job \"{id}\""))
        }
        e => ToolOutput::error("internal", e),
    }
}

fn json_out(v: impl serde::Serialize) -> ToolOutput {
    match serde_json::to_string_pretty(&v) {
        Ok(text) => ToolOutput::ok(text),
        Err(e) => ToolOutput::error("internal", e),
    }
}

impl CronTool {
    /// The job `id` if it belongs to the calling agent.
    async fn own_job(
        s: &Scheduler,
        ctx: &ToolContext,
        id: Option<&str>,
    ) -> Result<JobId, ToolOutput> {
        let Some(id) = id else {
            return Err(ToolOutput::error("invalid_arguments", "\"id\" is required"));
        };
        let not_found = || ToolOutput::error("not_found", format!("no cron job {id:?} of yours"));
        let id = JobId::parse(id).map_err(|_| not_found())?;
        match s.store().job(&id).await {
            Ok(Some(job)) if job.agent == ctx.agent => Ok(id),
            Ok(_) => Err(not_found()),
            Err(e) => Err(ToolOutput::error("internal", e)),
        }
    }

    async fn act(&self, s: &Scheduler, ctx: &ToolContext, args: Args) -> ToolOutput {
        let mine = |agent: &Option<String>| agent.as_deref().is_none_or(|a| a == ctx.agent);
        if !mine(&args.job.agent) {
            return ToolOutput::error(
                "invalid_arguments",
                "agent: you can only schedule jobs for yourself (leave \"agent\" out)",
            );
        }
        // Starting flows is the `flow_run` tool's, under its own policy: not through cron.
        if args.job.flow.is_some() || args.job.inputs.is_some() {
            return ToolOutput::error(
                "invalid_arguments",
                "flow: agents cannot schedule flows (use message or system_event)",
            );
        }
        match args.action {
            Action::List => match s.list().await {
                Ok(all) => json_out(
                    all.into_iter()
                        .filter(|v| v.job.agent == ctx.agent)
                        .collect::<Vec<_>>(),
                ),
                Err(e) => cron_error(e),
            },
            Action::Add => match args.job.into_spec(ctx.agent.as_str(), None) {
                Ok(spec) => match s.add_from_model(&spec, ctx.agent.as_str()).await {
                    Ok(job) => json_out(job),
                    Err(e) => cron_error(e),
                },
                Err(e) => ToolOutput::error("invalid_arguments", e),
            },
            Action::Update => {
                let id = match Self::own_job(s, ctx, args.job.id.as_deref()).await {
                    Ok(id) => id,
                    Err(out) => return out,
                };
                let base = match s.store().job(&id).await {
                    Ok(Some(job)) => JobSpec::of_job(&job),
                    Ok(None) => return cron_error(StoreError::UnknownJob(id).into()),
                    Err(e) => return ToolOutput::error("internal", e),
                };
                let mut flat = args.job;
                flat.id = None;
                match flat.into_spec(ctx.agent.as_str(), Some(base)) {
                    Ok(spec) => match s.update_from_model(&id, &spec).await {
                        Ok(job) => json_out(job),
                        Err(e) => cron_error(e),
                    },
                    Err(e) => ToolOutput::error("invalid_arguments", e),
                }
            }
            Action::Remove => match Self::own_job(s, ctx, args.job.id.as_deref()).await {
                Ok(id) => match s.remove(&id).await {
                    Ok(()) => ToolOutput::ok(format!("removed cron job {id}")),
                    Err(e) => cron_error(e),
                },
                Err(out) => out,
            },
            Action::Run => match Self::own_job(s, ctx, args.job.id.as_deref()).await {
                Ok(id) => match s.run_now(&id).await {
                    Ok(fired) => json_out(json!({
                        "job_id": fired.job_id,
                        "request_id": fired.request_id.as_str(),
                        "task_id": fired.task_id,
                    })),
                    Err(e) => cron_error(e),
                },
                Err(out) => out,
            },
            Action::Runs => match Self::own_job(s, ctx, args.job.id.as_deref()).await {
                Ok(id) => match s.runs(&id).await {
                    Ok(runs) => json_out(runs),
                    Err(e) => cron_error(e),
                },
                Err(out) => out,
            },
        }
    }
}

#[async_trait]
impl Tool for CronTool {
    fn name(&self) -> &'static str {
        "cron"
    }

    fn description(&self) -> &'static str {
        "Schedule your own future work. action \"add\" with one of at (RFC 3339 time), every \
         (\"10m\") or cron (\"0 9 * * 1-5\", with tz) and one of message (a task you will get) or \
         system_event (a reminder line); \"list\" your jobs; \"update\", \"remove\", \"run\" (now) \
         or \"runs\" (history) of a job by id."
    }

    fn parameters(&self) -> serde_json::Value {
        let s = |d: &str| json!({ "type": "string", "description": d });
        json!({
            "type": "object",
            "properties": {
                "action": { "type": "string", "enum": ["list", "add", "update", "remove", "run", "runs"] },
                "id": s("The job id (update, remove, run, runs; optional chosen id for add)."),
                "at": s("Once, at this RFC 3339 time (e.g. 2026-03-08T09:00:00+01:00)."),
                "every": s("Repeat every this long (e.g. \"10m\", \"2h\"; at least the minimum interval, 1m by default)."),
                "cron": s("A 5-field cron expression (e.g. \"0 9 * * 1-5\")."),
                "tz": s("The IANA timezone of the cron expression (default: the gateway's)."),
                "message": s("The task you will be given when it fires."),
                "system_event": s("A system line you will be woken with when it fires."),
                "name": s("A short name."),
                "session": { "type": "string", "enum": ["main", "isolated"], "description": "Run in your main session or a fresh one (default)." },
                "announce": s("channel:to where the final answer is delivered."),
                "enabled": { "type": "boolean" }
            },
            "required": ["action"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        match self.scheduler {
            Some(_) => Ok(()),
            None => Err("no cron scheduler in this process".into()),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("cron", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let Some(s) = &self.scheduler else {
            return ToolOutput::error("unavailable", "cron: no scheduler in this process");
        };
        self.act(s, ctx, args).await
    }
}
