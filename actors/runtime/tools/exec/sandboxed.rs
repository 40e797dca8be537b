//! Running a judged command inside the agent's sandbox, and reporting a limit that stopped it.

use super::judge::Plan;
use super::{MAX_OUTPUT_BYTES, output_text, run};
use crate::tools::sandbox::{Ended, Request, Sandbox};
use crate::tools::{ToolContext, ToolError, ToolOutput};
use std::ffi::OsString;
use std::time::Duration;
use tracing::{error, info};

/// Runs `plan` in `sandbox`; a sandbox that cannot be set up runs nothing (fails closed).
pub(super) async fn execute(
    sandbox: &Sandbox,
    ctx: &ToolContext,
    plan: &Plan,
    env: Vec<(String, OsString)>,
    timeout: Duration,
) -> ToolOutput {
    let prepared = match sandbox.prepare(Request {
        agent: ctx.agent.as_str(),
        program: &plan.program,
        argv: &plan.argv,
        workspace: &ctx.workspace,
        env,
    }) {
        Ok(p) => p,
        Err(e) => {
            error!(agent = %ctx.agent, command = %plan.shown, error = %e, "Sandbox unavailable; the command was not run.");
            return ToolError::new(
                "sandbox_unavailable",
                format!("`{}` was not run: its sandbox cannot be set up", plan.shown),
            )
            .suggest("tell the user; an operator must fix the sandbox (see `clawbus check`)")
            .into();
        }
    };
    let spec = run::Spec {
        program: prepared.program.clone(),
        argv: prepared.argv.clone(),
        cwd: prepared.cwd.clone(),
        env: prepared.env.clone(),
        timeout,
        max_output: MAX_OUTPUT_BYTES,
    };
    let finished = match run::run(spec).await {
        Ok(f) => f,
        Err(e) => {
            prepared.finish(Ended::Code(-1)).await;
            error!(agent = %ctx.agent, command = %plan.shown, error = %e, "Sandbox could not start.");
            return ToolOutput::error("io", format!("could not start `{}`", plan.shown));
        }
    };
    let ended = match finished.exit {
        run::Exit::Code(c) => Ended::Code(c),
        run::Exit::Signal(s) => Ended::Signal(s),
        run::Exit::TimedOut => Ended::TimedOut,
    };
    let limit = prepared.finish(ended).await;
    let text = output_text(&finished);
    info!(agent = %ctx.agent, command = %plan.shown, exit = ?finished.exit, limit = ?limit, elapsed_ms = finished.elapsed.as_millis() as u64, bytes = finished.total, sandboxed = true, "Command finished.");
    if let Some(limit) = limit {
        let setting = limit.setting(sandbox.def(), timeout);
        return ToolError::new(
            "limit_exceeded",
            format!(
                "`{}` was stopped by the sandbox's {limit} limit ({setting}); output so far:\n{text}",
                plan.shown
            ),
        )
        .limit(limit.as_str())
        .suggest("do less in one command, or ask the user to raise the limit")
        .into();
    }
    match finished.exit {
        run::Exit::Code(code) => ToolOutput::ok(format!("exit code: {code}\n{text}")),
        run::Exit::Signal(sig) => ToolOutput::ok(format!("killed by signal {sig}\n{text}")),
        run::Exit::TimedOut => ToolOutput::error("timeout", "the command ran past its timeout"),
    }
}
