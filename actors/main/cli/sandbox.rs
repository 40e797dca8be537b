//! `clawbus sandbox explain --agent ID [--session KEY] [--json]`: the effective sandbox of an
//! agent's session — mode, backend, mounts, network, limits, the variables that pass in — and the
//! config line that set each value. Works offline, from the config files.

use super::Global;
use super::client::usage;
use super::out::outln;
use crate::agent::tools::{exec_def, sandbox_def};
use crate::ids::SessionKey;
use crate::tools::sandbox::explain::explain;
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// `clawbus sandbox …`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// The effective sandbox of an agent's session and where each setting comes from.
    Explain(ExplainArgs),
}

/// Flags of `clawbus sandbox explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The agent.
    #[arg(long)]
    pub agent: String,
    /// The session key (`agent:<id>:main`, `agent:<id>:telegram:direct:42` …); default: a
    /// session other than the main one.
    #[arg(long)]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus sandbox …`.
pub(super) fn run(global: &Global, cmd: SandboxCommand) -> ExitCode {
    let SandboxCommand::Explain(args) = cmd;
    let config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let def = match super::agent_def(&config, &args.agent) {
        Ok(def) => def,
        Err(code) => return code,
    };
    let session = match args.session.as_deref().map(SessionKey::parse).transpose() {
        Ok(s) => s,
        Err(e) => return usage(format!("--session: {e}")),
    };
    if let Some(s) = &session
        && !s.as_str().starts_with(&format!("agent:{}:", def.id))
    {
        return usage(format!(
            "--session {s} belongs to another agent (expected agent:{}:…)",
            def.id
        ));
    }
    let sandbox = sandbox_def(def, &config);
    let mut env = exec_def(def, &config).env;
    for name in &sandbox.env.value {
        if !env.contains(name) {
            env.push(name.clone());
        }
    }
    let e = explain(&config, def, &sandbox, env, session.as_ref());
    if args.json {
        match serde_json::to_value(&e) {
            Ok(v) => super::out::json(&v),
            Err(err) => return usage(format!("cannot render the explanation: {err}")),
        }
        return ExitCode::SUCCESS;
    }
    let state = if e.sandboxed {
        "sandboxed"
    } else {
        "NOT sandboxed (commands run on the host)"
    };
    outln!("agent {}, session {}: {state}", e.agent, e.session);
    outln!("settings:");
    for s in &e.settings {
        outln!("  {:24} {:28} {}", s.setting, s.value, s.source);
    }
    if e.sandboxed {
        outln!("network: {}", e.network);
        outln!("mounts:");
        for m in &e.mounts {
            outln!("  {:40} {}", m.path, m.how);
        }
        outln!(
            "environment: PATH and HOME (the sandbox's own){}",
            e.env.iter().map(|n| format!(", {n}")).collect::<String>()
        );
        outln!("tools run sandboxed: {}", e.tools.join(", "));
    }
    for p in &e.problems {
        outln!("problem: {p}");
    }
    ExitCode::SUCCESS
}
