//! `clawbus cron add|list|rm|enable|disable|run|runs`, over the gateway's `/v1/cron`.

use super::client::{GatewayClient, segment, usage};
use super::out::outln;
use super::{EXIT_FAILED, Global};
use crate::cron::{FlatSpec, SessionTarget};
use clap::{Args, Subcommand, ValueEnum};
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus cron` subcommands.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per command line; `add` carries every flag"
)]
pub enum CronCommand {
    /// Add a job: one of --at/--every/--cron, one of --message/--system-event/--flow.
    Add(AddArgs),
    /// List every job with its next fire and last outcome.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a job and its history.
    Rm {
        /// The job id.
        id: String,
    },
    /// Enable a job (scheduled from now).
    Enable {
        /// The job id.
        id: String,
    },
    /// Disable a job.
    Disable {
        /// The job id.
        id: String,
    },
    /// Fire a job now, out of schedule, on the cron lane.
    Run {
        /// The job id.
        id: String,
    },
    /// A job's last 50 runs, oldest first.
    Runs {
        /// The job id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which session a job's fires run in.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SessionArg {
    /// The agent's main session.
    Main,
    /// A fresh session per run.
    Isolated,
}

/// `clawbus cron add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The agent it runs on.
    #[arg(long)]
    pub agent: String,
    /// Once, at this RFC 3339 time (2026-03-08T09:00:00+01:00).
    #[arg(long, conflicts_with_all = ["every", "cron"], required_unless_present_any = ["every", "cron"])]
    pub at: Option<String>,
    /// Every this long (10m, 1h30m).
    #[arg(long, conflicts_with = "cron")]
    pub every: Option<String>,
    /// A 5- or 6-field cron expression ("0 9 * * 1-5").
    #[arg(long)]
    pub cron: Option<String>,
    /// The cron expression's IANA timezone [default: the gateway's].
    #[arg(long, requires = "cron")]
    pub tz: Option<String>,
    /// The task the agent is given.
    #[arg(
        long,
        conflicts_with_all = ["system_event", "flow"],
        required_unless_present_any = ["system_event", "flow"]
    )]
    pub message: Option<String>,
    /// A system line the agent is woken with.
    #[arg(long, conflicts_with = "flow")]
    pub system_event: Option<String>,
    /// A flow of flows.d/ to start on each fire (through the flow engine, one run per fire).
    #[arg(long)]
    pub flow: Option<String>,
    /// An input of the flow, as name=value (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE", requires = "flow")]
    pub inputs: Vec<String>,
    /// A name for people.
    #[arg(long)]
    pub name: Option<String>,
    /// Which session its fires run in.
    #[arg(long, value_enum, default_value = "isolated")]
    pub session: SessionArg,
    /// Deliver the final text to CHANNEL:TO.
    #[arg(long)]
    pub announce: Option<String>,
}

/// Runs a `cron` subcommand.
pub(super) fn run(global: &Global, cmd: CronCommand) -> ExitCode {
    let client = match GatewayClient::connect(global, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let path = |id: &str, tail: &str| format!("/v1/cron/{}{tail}", segment(id));
    let empty = serde_json::json!({});
    let answer = match &cmd {
        CronCommand::Add(args) => match spec(args) {
            Ok(body) => client.post("/v1/cron", &body),
            Err(code) => return code,
        },
        CronCommand::List { .. } => client.get("/v1/cron"),
        CronCommand::Rm { id } => client.delete(&path(id, "")),
        CronCommand::Enable { id } => client.post(&path(id, "/enable"), &empty),
        CronCommand::Disable { id } => client.post(&path(id, "/disable"), &empty),
        CronCommand::Run { id } => {
            client
                .post_with_status(&path(id, "/run"), &empty)
                .and_then(|(status, v)| {
                    if status == 409 {
                        eprintln!(
                            "{}",
                            v["error"]["message"].as_str().unwrap_or("job is running")
                        );
                        Err(ExitCode::from(EXIT_FAILED))
                    } else {
                        Ok(v)
                    }
                })
        }
        CronCommand::Runs { id, .. } => client.get(&path(id, "/runs")),
    };
    let answer = match answer {
        Ok(v) => v,
        Err(code) => return code,
    };
    match &cmd {
        CronCommand::List { json: false } => print_list(&answer),
        CronCommand::Runs { json: false, .. } => print_runs(&answer),
        _ => super::out::json(&answer),
    }
    ExitCode::SUCCESS
}

/// The job spec the flags describe, as the JSON body of `POST /v1/cron`.
fn spec(args: &AddArgs) -> Result<serde_json::Value, ExitCode> {
    let flat = FlatSpec {
        id: None,
        agent: Some(args.agent.clone()),
        at: args.at.clone(),
        every: args.every.clone(),
        cron: args.cron.clone(),
        tz: args.tz.clone(),
        message: args.message.clone(),
        system_event: args.system_event.clone(),
        flow: args.flow.clone(),
        inputs: Some(inputs(&args.inputs)?),
        name: args.name.clone(),
        session: Some(match args.session {
            SessionArg::Main => SessionTarget::Main,
            SessionArg::Isolated => SessionTarget::Isolated,
        }),
        announce: args.announce.clone(),
        enabled: None,
    };
    let spec = flat.into_spec(&args.agent, None).map_err(usage)?;
    serde_json::to_value(spec).map_err(usage)
}

/// `--input name=value` flags as a map.
fn inputs(flags: &[String]) -> Result<std::collections::BTreeMap<String, String>, ExitCode> {
    flags
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(usage(format!("--input {kv:?}: expected name=value"))),
        })
        .collect()
}

/// Unix ms as local RFC 3339 text, or `-`.
fn time(v: &serde_json::Value) -> String {
    v.as_i64()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| "-".into())
}

/// A schedule as people read it: `every 10m`, `at …`, `cron "0 9 * * 1-5" Europe/Paris`.
fn schedule(s: &serde_json::Value) -> String {
    serde_json::from_value::<crate::cron::Schedule>(s.clone())
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Who made a job: `agent:<id>` (its model, through the `cron` tool), else where it came from
/// (`api`: the CLI or HTTP, `file`, `heartbeat`).
fn made_by(job: &serde_json::Value) -> &str {
    job["created_by"]
        .as_str()
        .or_else(|| job["source"].as_str())
        .unwrap_or("api")
}

fn print_list(answer: &serde_json::Value) {
    let jobs = answer["jobs"].as_array().cloned().unwrap_or_default();
    if jobs.is_empty() {
        outln!("no cron jobs");
        return;
    }
    outln!("ID\tAGENT\tENABLED\tSCHEDULE\tNEXT\tLAST\tCREATED_BY\tNAME");
    for v in jobs {
        let (job, state) = (&v["job"], &v["state"]);
        outln!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            job["id"].as_str().unwrap_or("?"),
            job["agent"].as_str().unwrap_or("?"),
            job["enabled"],
            schedule(&job["schedule"]),
            time(&state["next_fire_ms"]),
            state["last_outcome"].as_str().unwrap_or("-"),
            made_by(job),
            job["name"].as_str().unwrap_or(""),
        );
    }
}

fn print_runs(answer: &serde_json::Value) {
    let runs = answer["runs"].as_array().cloned().unwrap_or_default();
    if runs.is_empty() {
        outln!("no runs yet");
        return;
    }
    outln!("SCHEDULED\tSTARTED\tENDED\tOUTCOME\tTASK\tERROR");
    for r in runs {
        outln!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            time(&r["scheduled_ms"]),
            time(&r["started_ms"]),
            time(&r["ended_ms"]),
            r["outcome"].as_str().unwrap_or("?"),
            r["task_id"].as_str().unwrap_or("-"),
            r["error"].as_str().unwrap_or(""),
        );
    }
}
