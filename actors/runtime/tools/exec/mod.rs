//! The `exec` tool: run a command in the workspace, under the agent's approval mode.
//!
//! - [`argv`]: the command line split into argv without a shell; operators reported.
//! - [`wrap`]: wrappers (`env`, `nice`, `timeout`, `xargs`, `find -exec` …) and shells.
//! - [`judge`]: the decision — run, ask a person, or refuse — with its reason.
//! - [`run`]: the child process: clean environment (PATH, HOME, LANG, TZ and `exec.env`), the
//!   workspace as cwd, its own process group killed as a whole on timeout, output capped.
//!
//! Modes (`exec.security`): `deny` (the tool is not offered), `allowlist` (default; with no
//! entries the tool is not offered), `ask` (what the allowlist does not cover waits for a
//! person through [`crate::approvals::Approvals`]; no answer in `exec.approval_timeout` is a
//! denial), `full` (any single program; a line with shell operators runs through `/bin/sh -c`
//! only with `exec.shell = true`). Every decision is logged with its reason.

pub(crate) mod argv;
pub(crate) mod judge;
pub(crate) mod run;
mod sandboxed;
pub(crate) mod wrap;

#[cfg(test)]
mod tests;

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use crate::approvals::{Answer, ApprovalRequest, Approvals};
use crate::tools::sandbox::Sandbox;
use async_trait::async_trait;
use clawbus_core::config::{ExecDef, ExecRule, ExecSecurity};
use clawbus_core::ids::{AgentId, SessionKey};
use judge::{Judgement, Lookup, Plan};
use serde::Deserialize;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

/// Bytes of command output kept; the agent's result cap then applies to the text.
pub(crate) const MAX_OUTPUT_BYTES: usize = 1 << 20;
/// Variables every command gets from the daemon's environment (when set).
pub(crate) const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TZ"];
/// `PATH` when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Where the variables passed to commands are read from (the daemon's environment by default).
pub(crate) type EnvSource = Arc<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

/// `exec {command, timeout_s?}`.
#[derive(Clone)]
pub struct ExecTool {
    agent: String,
    def: Arc<ExecDef>,
    approvals: Option<Approvals>,
    parent_env: EnvSource,
    /// The OS sandbox of the sessions `[sandbox] mode` names; `None`: never sandboxed.
    sandbox: Option<Sandbox>,
}

impl fmt::Debug for ExecTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecTool")
            .field("agent", &self.agent)
            .field("def", &self.def)
            .field("approvals", &self.approvals.is_some())
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

#[derive(Deserialize)]
struct Args {
    command: String,
    timeout_s: Option<u64>,
}

impl ExecTool {
    /// The tool for `agent` under `def`; `approvals` answers `ask` mode (without it, what would
    /// need asking is refused).
    pub fn new(agent: impl Into<String>, def: ExecDef, approvals: Option<Approvals>) -> Self {
        Self {
            agent: agent.into(),
            def: Arc::new(def),
            approvals,
            parent_env: Arc::new(|name| std::env::var_os(name)),
            sandbox: None,
        }
    }

    /// Runs the commands of the sessions `sandbox`'s mode names inside it.
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// The sandbox commands of `session` run in, if any.
    pub(crate) fn sandbox_for(&self, agent: &AgentId, session: &SessionKey) -> Option<&Sandbox> {
        self.sandbox.as_ref().filter(|s| s.applies(agent, session))
    }

    #[cfg(test)]
    /// Reads the variables passed to commands from `source` instead of the process environment.
    pub(crate) fn with_parent_env(mut self, source: EnvSource) -> Self {
        self.parent_env = source;
        self
    }

    /// Entries approved with `--always`, as allowlist entries.
    fn approved_rules(&self, agent: &str) -> Vec<ExecRule> {
        let Some(approvals) = &self.approvals else {
            return Vec::new();
        };
        match approvals.rules(agent) {
            Ok(rules) => rules
                .into_iter()
                .map(|pattern| ExecRule::Command {
                    pattern,
                    shell: false,
                })
                .collect(),
            Err(e) => {
                tracing::warn!(agent, error = %e, "Could not read approved exec entries.");
                Vec::new()
            }
        }
    }

    /// `PATH` for the child: the daemon's, without relative or empty entries (they would
    /// resolve inside the workspace, where the agent can write).
    fn child_path(&self) -> (OsString, Vec<PathBuf>) {
        let raw = (self.parent_env)("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        let dirs: Vec<PathBuf> = std::env::split_paths(&raw)
            .filter(|p| p.is_absolute())
            .collect();
        let joined = std::env::join_paths(&dirs).unwrap_or_else(|_| DEFAULT_PATH.into());
        (joined, dirs)
    }

    /// The variables passed into the sandbox: only the names `exec.env` and `sandbox.env` list
    /// (`PATH` and `HOME` are the sandbox's own).
    fn sandbox_env(&self, sandbox: &Sandbox) -> Vec<(String, OsString)> {
        let mut env: Vec<(String, OsString)> = Vec::new();
        for name in self.def.env.iter().chain(&sandbox.def().env.value) {
            if env.iter().any(|(k, _)| k == name) {
                continue;
            }
            if let Some(value) = (self.parent_env)(name) {
                env.push((name.clone(), value));
            }
        }
        env
    }

    /// The child's whole environment.
    fn child_env(&self, path: OsString) -> Vec<(String, OsString)> {
        let mut env = vec![("PATH".to_string(), path)];
        let names = BASE_ENV[1..]
            .iter()
            .copied()
            .chain(self.def.env.iter().map(String::as_str));
        for name in names {
            if env.iter().any(|(k, _)| k == name) {
                continue;
            }
            if let Some(value) = (self.parent_env)(name) {
                env.push((name.to_string(), value));
            }
        }
        env
    }

    async fn execute(
        &self,
        ctx: &ToolContext,
        plan: Plan,
        env: Vec<(String, OsString)>,
        timeout: Duration,
    ) -> ToolOutput {
        let spec = run::Spec {
            program: plan.program.clone(),
            argv: plan.argv.clone(),
            cwd: ctx.workspace.clone(),
            env,
            timeout,
            max_output: MAX_OUTPUT_BYTES,
        };
        let finished = match run::run(spec).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(agent = %ctx.agent, command = %plan.shown, error = %e, "Command could not start.");
                return ToolOutput::error("io", format!("could not start `{}`: {e}", plan.shown));
            }
        };
        let text = output_text(&finished);
        info!(agent = %ctx.agent, command = %plan.shown, exit = ?finished.exit, elapsed_ms = finished.elapsed.as_millis() as u64, bytes = finished.total, "Command finished.");
        match finished.exit {
            run::Exit::Code(code) => ToolOutput::ok(format!("exit code: {code}\n{text}")),
            run::Exit::Signal(sig) => ToolOutput::ok(format!("killed by signal {sig}\n{text}")),
            run::Exit::TimedOut => ToolError::new(
                "timeout",
                format!(
                    "`{}` ran past {}s and was killed with its process group; output so far:\n{text}",
                    plan.shown,
                    timeout.as_secs_f64()
                ),
            )
            .suggest(format!(
                "pass a larger timeout_s (at most {}) or run something quicker",
                self.def.timeout.as_secs()
            ))
            .into(),
        }
    }
}

/// The command's output, with a note when it was capped.
fn output_text(finished: &run::Finished) -> String {
    let mut text = String::from_utf8_lossy(&finished.output).into_owned();
    if finished.total > finished.output.len() as u64 {
        text.push_str(&format!(
            "\n[output capped at {} of {} bytes]",
            finished.output.len(),
            finished.total
        ));
    }
    text
}

#[async_trait]
impl Tool for ExecTool {
    fn name(&self) -> &'static str {
        "exec"
    }

    fn description(&self) -> &'static str {
        "Run one command in your workspace and get its exit code and output (stdout and stderr \
         together). No shell is used: write a single program with its arguments, quoting as in \
         a shell; ;, &&, |, redirections and $( ) are refused. Only commands this agent is \
         allowed to run will run; some may wait for a person's approval."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "command": { "type": "string", "description": "The command line, e.g. \"git status --short\"." },
                "timeout_s": { "type": "integer", "minimum": 1, "description": "Seconds before the command is killed (capped by the agent's limit)." }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        match self.def.security {
            ExecSecurity::Deny => Err("exec.security is \"deny\"".into()),
            ExecSecurity::Allowlist
                if self.def.allow.is_empty() && self.approved_rules(&self.agent).is_empty() =>
            {
                Err("exec.security is \"allowlist\" and exec.allow is empty".into())
            }
            _ => Ok(()),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("exec", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let agent = if self.agent.is_empty() {
            ctx.agent.as_str()
        } else {
            self.agent.as_str()
        };
        let (path, dirs) = self.child_path();
        let lookup = Lookup {
            path: &dirs,
            cwd: &ctx.workspace,
        };
        let extra = self.approved_rules(agent);
        let timeout = args.timeout_s.map_or(self.def.timeout, |s| {
            Duration::from_secs(s).min(self.def.timeout)
        });
        let sandbox = self.sandbox_for(&ctx.agent, &ctx.session);
        let env = match sandbox {
            Some(s) => self.sandbox_env(s),
            None => self.child_env(path),
        };
        let plan = match judge::judge(&self.def, &extra, &args.command, &lookup) {
            Judgement::Run(plan) => {
                let program = plan.argv[0].as_str();
                info!(agent, program, decision = "allowed", reason = %plan.reason, command = %plan.shown, "Exec decision.");
                plan
            }
            Judgement::Refuse(r) => {
                info!(agent, program = %r.program, decision = "refused", reason = %r.reason, "Exec decision.");
                let mut e = ToolError::new("command_refused", &r.reason);
                if let Some(s) = r.suggestion {
                    e = e.suggest(s);
                }
                return e.into();
            }
            Judgement::Ask(plan) => match self.ask(ctx, agent, &plan).await {
                Ok(()) => plan,
                Err(out) => return out,
            },
        };
        match sandbox {
            Some(s) => {
                let timeout = timeout.min(s.def().timeout.value);
                sandboxed::execute(s, ctx, &plan, env, timeout).await
            }
            None => self.execute(ctx, plan, env, timeout).await,
        }
    }
}

impl ExecTool {
    /// Waits for a person's answer about `plan`; `Err` is the output to return instead of running.
    async fn ask(&self, ctx: &ToolContext, agent: &str, plan: &Plan) -> Result<(), ToolOutput> {
        let program = plan.argv[0].as_str();
        let Some(approvals) = &self.approvals else {
            info!(
                agent,
                program,
                decision = "refused",
                reason = "needs approval but no approval service runs",
                "Exec decision."
            );
            return Err(ToolOutput::error(
                "command_refused",
                format!(
                    "`{}` needs a person's approval and none can be asked here",
                    plan.shown
                ),
            ));
        };
        info!(agent, program, decision = "ask", reason = "not in the allowlist", command = %plan.shown, "Exec decision.");
        let request = ApprovalRequest {
            agent: agent.to_string(),
            session: ctx.session.to_string(),
            command: plan.shown.clone(),
            argv: plan.argv.clone(),
            task_id: ctx.run.as_ref().map(|r| r.task_id.to_string()),
            rule: argv::glob_escape(&plan.shown),
            timeout: self.def.approval_timeout,
        };
        match approvals.ask(request).await {
            Ok(Answer::Allowed { always }) => {
                info!(
                    agent,
                    program,
                    decision = "allowed",
                    reason = "approved by a person",
                    always,
                    "Exec decision."
                );
                Ok(())
            }
            Ok(Answer::Denied) => {
                info!(
                    agent,
                    program,
                    decision = "refused",
                    reason = "denied by a person",
                    "Exec decision."
                );
                Err(ToolOutput::error(
                    "approval_denied",
                    format!("a person denied `{}`", plan.shown),
                ))
            }
            Ok(Answer::TimedOut) => {
                let secs = self.def.approval_timeout.as_secs_f64();
                info!(
                    agent,
                    program,
                    decision = "refused",
                    reason = "no answer to the approval request",
                    timeout_s = secs,
                    "Exec decision."
                );
                Err(ToolError::new(
                    "approval_timeout",
                    format!("nobody approved `{}` within {secs}s; it was not run", plan.shown),
                )
                .suggest("try something the allowlist permits, or ask the user to approve it and try again")
                .into())
            }
            Err(e) => {
                tracing::error!(agent, error = %e, "Approval request failed.");
                info!(
                    agent,
                    program,
                    decision = "refused",
                    reason = "the approval request failed",
                    "Exec decision."
                );
                Err(ToolOutput::error(
                    "command_refused",
                    format!("`{}` needs approval, and the request failed", plan.shown),
                ))
            }
        }
    }
}
