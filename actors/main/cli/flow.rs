//! `clawbus flow check|run|status|watch|cancel|list`: flows over the gateway's `/v1/flows` and
//! `/v1/flow-runs` (`check` works offline).
//!
//! Exit codes of `run --wait`, `status` and `watch`: 0 the run succeeded, 1 it failed, partially
//! succeeded or was cancelled, 3 the wait ran out.

use super::client::{GatewayClient, segment, usage};
use super::out::{out, outln};
use super::{EXIT_FAILED, EXIT_TIMEOUT, Global};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `clawbus flow` subcommands.
#[derive(Debug, Subcommand)]
pub enum FlowCommand {
    /// Check a flow file against the agents (works offline): ✓ or ✗ with every problem.
    Check {
        /// The flow file.
        file: std::path::PathBuf,
    },
    /// Start a run of a flow of `flows.d/` (by name) or of a flow file.
    Run(RunArgs),
    /// A run's nodes: state, attempts, duration, error.
    Status {
        /// The run id.
        run: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Follow a run live until it ends.
    Watch {
        /// The run id.
        run: String,
    },
    /// Cancel a run: running nodes are cancelled, nothing else starts.
    Cancel {
        /// The run id.
        run: String,
    },
    /// The flows the gateway knows, or (`--runs`) its runs.
    List {
        /// List runs instead of flows.
        #[arg(long)]
        runs: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `clawbus flow run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A flow name from `flows.d/`, or the path of a flow file.
    pub flow: String,
    /// An input value, `name=value` (repeatable).
    #[arg(long = "input", value_name = "K=V")]
    pub inputs: Vec<String>,
    /// Start the run at most once for this id.
    #[arg(long)]
    pub request_id: Option<String>,
    /// Wait for the run to end.
    #[arg(long)]
    pub wait: bool,
    /// How long `--wait` waits.
    #[arg(long, default_value = "10m", value_parser = crate::config::parse_duration)]
    pub timeout: Duration,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `flow` subcommand.
pub(super) fn run(global: &Global, cmd: FlowCommand) -> ExitCode {
    match cmd {
        FlowCommand::Check { file } => check(global, &file),
        FlowCommand::Run(args) => start(global, args),
        FlowCommand::Status { run, json } => status(global, &run, json),
        FlowCommand::Watch { run } => watch(global, &run),
        FlowCommand::Cancel { run } => cancel(global, &run),
        FlowCommand::List { runs, json } => list(global, runs, json),
    }
    .unwrap_or_else(|code| code)
}

fn check(global: &Global, file: &Path) -> Result<ExitCode, ExitCode> {
    let config = global.load()?;
    let agents: Vec<_> = config.agents.iter().map(|a| a.id.clone()).collect();
    let lanes: Vec<String> = config.lanes.caps.keys().cloned().collect();
    let (def, mut problems) = crate::config::flow::check_file(file, &agents, &lanes);
    if let Some(def) = def {
        problems.extend(crate::config::flow::check_nested(&[def], &config.flows));
    }
    let report = crate::config::CheckReport {
        files: vec![crate::config::FileReport {
            path: file.to_path_buf(),
            problems,
        }],
    };
    out!("{}", report.render());
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

fn start(global: &Global, args: RunArgs) -> Result<ExitCode, ExitCode> {
    let mut inputs = serde_json::Map::new();
    for kv in &args.inputs {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(usage(format!("--input {kv:?}: expected name=value")));
        };
        inputs.insert(k.to_string(), Value::String(v.to_string()));
    }
    let mut body = json!({
        "inputs": inputs,
        "wait": args.wait,
        "timeout_ms": args.timeout.as_millis() as u64,
    });
    if let Some(rid) = &args.request_id {
        body["request_id"] = json!(rid);
    }
    let path = Path::new(&args.flow);
    let route = if args.flow.ends_with(".toml") || path.is_file() {
        let source = std::fs::read_to_string(path).map_err(|e| {
            usage(format!(
                "{}: cannot read the flow file: {e}",
                path.display()
            ))
        })?;
        body["source"] = json!(source);
        body["path"] = json!(args.flow);
        "/v1/flow-runs".to_string()
    } else {
        format!("/v1/flows/{}/runs", segment(&args.flow))
    };
    let client = GatewayClient::connect(global, args.timeout + Duration::from_secs(30))?;
    let (code, run) = client.post_with_status(&route, &body)?;
    if code == 409 {
        return Err(usage(
            run["error"]["message"].as_str().unwrap_or("conflict"),
        ));
    }
    if args.json {
        super::out::json(&run);
    } else if args.wait {
        print_run(&run);
    } else {
        outln!("{}", run["id"].as_str().unwrap_or_default());
    }
    Ok(if args.wait {
        exit_of(&run)
    } else {
        ExitCode::SUCCESS
    })
}

/// 0 succeeded, 1 failed / partially succeeded / cancelled, 3 still running.
fn exit_of(run: &Value) -> ExitCode {
    match run["state"].as_str() {
        Some("succeeded") => ExitCode::SUCCESS,
        Some("running") => ExitCode::from(EXIT_TIMEOUT),
        _ => ExitCode::from(EXIT_FAILED),
    }
}

fn print_run(run: &Value) {
    outln!(
        "run {}  flow {}  {}",
        run["id"].as_str().unwrap_or_default(),
        run["flow"].as_str().unwrap_or_default(),
        run["state"].as_str().unwrap_or_default()
    );
    outln!(
        "{:<16} {:<20} {:>8} {:>10}  ERROR",
        "NODE",
        "STATE",
        "ATTEMPTS",
        "DURATION"
    );
    for n in run["nodes"].as_array().into_iter().flatten() {
        let dur = n["duration_ms"]
            .as_u64()
            .map_or("-".to_string(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        let why = n["error"].as_str().or(n["reason"].as_str()).unwrap_or("");
        outln!(
            "{:<16} {:<20} {:>8} {:>10}  {}",
            n["id"].as_str().unwrap_or_default(),
            n["state"].as_str().unwrap_or_default(),
            n["attempts"].as_u64().unwrap_or(0),
            dur,
            why
        );
    }
}

fn status(global: &Global, run: &str, as_json: bool) -> Result<ExitCode, ExitCode> {
    let client = GatewayClient::connect(global, Duration::from_secs(30))?;
    let v = client.get(&format!("/v1/flow-runs/{}", segment(run)))?;
    if as_json {
        super::out::json(&v);
    } else {
        print_run(&v);
    }
    Ok(exit_of(&v))
}

fn watch(global: &Global, run: &str) -> Result<ExitCode, ExitCode> {
    let client = GatewayClient::connect(global, Duration::from_secs(30))?;
    client.stream(&format!("/v1/flow-runs/{}/events", segment(run)), |data| {
        let Ok(e) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if e.get("nodes").is_some() {
            outln!(
                "run {} {}",
                e["id"].as_str().unwrap_or_default(),
                e["state"].as_str().unwrap_or_default()
            );
            return;
        }
        let mut line = e["kind"].as_str().unwrap_or_default().to_string();
        for k in ["node", "item", "attempt", "state", "error"] {
            if let Some(v) = e.get(k).filter(|v| !v.is_null()) {
                let v = v.as_str().map_or(v.to_string(), str::to_string);
                line.push_str(&format!(" {k}={v}"));
            }
        }
        outln!("{line}");
    })?;
    let v = client.get(&format!("/v1/flow-runs/{}", segment(run)))?;
    Ok(exit_of(&v))
}

fn cancel(global: &Global, run: &str) -> Result<ExitCode, ExitCode> {
    let client = GatewayClient::connect(global, Duration::from_secs(30))?;
    let v = client.post(
        &format!("/v1/flow-runs/{}/cancel", segment(run)),
        &json!({}),
    )?;
    outln!(
        "run {} {}",
        v["id"].as_str().unwrap_or_default(),
        v["state"].as_str().unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

fn list(global: &Global, runs: bool, as_json: bool) -> Result<ExitCode, ExitCode> {
    let client = GatewayClient::connect(global, Duration::from_secs(30))?;
    let path = if runs { "/v1/flow-runs" } else { "/v1/flows" };
    let v = client.get(path)?;
    if as_json {
        super::out::json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    if runs {
        outln!("{:<34} {:<16} {:<20} CREATED_MS", "RUN", "FLOW", "STATE");
        for r in v["runs"].as_array().into_iter().flatten() {
            outln!(
                "{:<34} {:<16} {:<20} {}",
                r["id"].as_str().unwrap_or_default(),
                r["flow"].as_str().unwrap_or_default(),
                r["state"].as_str().unwrap_or_default(),
                r["created_ms"]
            );
        }
    } else {
        outln!("{:<16} {:<6} DESCRIPTION", "FLOW", "NODES");
        for f in v["flows"].as_array().into_iter().flatten() {
            outln!(
                "{:<16} {:<6} {}",
                f["name"].as_str().unwrap_or_default(),
                f["nodes"].as_array().map_or(0, Vec::len),
                f["description"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
