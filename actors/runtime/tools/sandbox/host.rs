//! What the host must have for the agents whose sandbox is on, and for the MCP servers with
//! `sandbox = true`: `clawbus check` reports what is missing at the line that turned the sandbox
//! on, and `clawbus up` logs it.

use super::{Sandbox, cgroup};
use clawbus_core::config::{Config, Problem, SandboxBackend, SandboxDef, SandboxMode};

/// Every missing part, once per place that turned a sandbox on.
pub fn host_problems(config: &Config) -> Vec<Problem> {
    let mut problems: Vec<Problem> = Vec::new();
    for agent in &config.agents {
        let def = &agent.sandbox;
        if def.mode.value == SandboxMode::Off {
            continue;
        }
        let (path, line, col) = match &def.mode.origin {
            Some(o) => (o.path.clone(), o.line, o.col),
            None => (agent.file.clone(), 0, 0),
        };
        for message in missing(def) {
            let problem = Problem {
                path: path.clone(),
                line,
                col,
                field: "sandbox.mode".to_string(),
                message: format!(
                    "sandbox mode \"{}\" cannot run here: {message}",
                    def.mode.value
                ),
            };
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
    for (name, server) in &config.mcp.servers {
        let Some(sandbox) = &server.sandbox else {
            continue;
        };
        let at = sandbox.origin.as_ref();
        for message in missing(&sandbox.value) {
            problems.push(Problem {
                path: at.map_or_else(
                    || config.path.clone().unwrap_or_default(),
                    |o| o.path.clone(),
                ),
                line: at.map_or(0, |o| o.line),
                col: at.map_or(0, |o| o.col),
                field: format!("mcp.servers.{name}.sandbox"),
                message: format!("MCP server \"{name}\" cannot run sandboxed here: {message}"),
            });
        }
    }
    problems
}

/// What the host lacks for sandboxes under `def`.
fn missing(def: &SandboxDef) -> Vec<String> {
    let mut missing = Vec::new();
    if def.backend.value != SandboxBackend::Bwrap {
        if let Err(e) = Sandbox::new(def.clone()).locate_container() {
            missing.push(e.to_string());
        }
    } else if let Err(e) = Sandbox::new(def.clone()).locate() {
        missing.push(e.to_string());
    }
    let controllers = match def.backend.value {
        SandboxBackend::Bwrap => &[cgroup::Controller::Pids, cgroup::Controller::Memory][..],
        _ => &[],
    };
    for &controller in controllers {
        if !cgroup::available(controller) {
            missing.push(format!(
                "no {controller} cgroup the daemon may create (max_processes and memory_mb need one: run the daemon where /sys/fs/cgroup is writable, or delegate a cgroup to it)"
            ));
        }
    }
    missing
}
