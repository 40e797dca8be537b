//! The command that starts a stdio MCP server: the configured program with a clean environment,
//! or, with `sandbox = true`, that program inside the sandbox of `[sandbox]`
//! ([`crate::tools::sandbox::Sandbox::for_server`]).

use super::McpError;
use crate::tools::sandbox::{Prepared, Request, Sandbox};
use clawbus_core::config::{SandboxDef, Set};
use std::ffi::OsString;
use std::path::PathBuf;

/// Variables every unsandboxed server gets besides the ones its `env` names: without `PATH` a
/// command such as `npx` or `python3` cannot be found, and many programs need `HOME`. A
/// sandboxed server gets the sandbox's own `PATH` and `HOME` instead.
const BASE_ENV: &[&str] = &["PATH", "HOME"];

/// What to spawn for a stdio server, and the sandbox run to finish when its process is gone.
pub(super) struct Spawn {
    pub(super) command: tokio::process::Command,
    pub(super) sandbox: Option<Prepared>,
}

/// The values of `names` in the daemon's environment (unset ones are left out).
fn values<'a>(names: impl Iterator<Item = &'a str>) -> Vec<(String, OsString)> {
    names
        .filter_map(|n| std::env::var_os(n).map(|v| (n.to_string(), v)))
        .collect()
}

/// `program` as a path: as written when it has a `/`, else the first match on the daemon's
/// `PATH` (a sandboxed program is run by its path, which is the same inside).
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The command that starts server `name` (`command`, `args`, the variables `env` names), in
/// `sandbox` when it has one; `Err` when that sandbox cannot be set up (nothing is started).
pub(super) fn command(
    name: &str,
    command: &str,
    args: &[String],
    env: &[String],
    sandbox: Option<&Set<SandboxDef>>,
) -> Result<Spawn, McpError> {
    let Some(sandbox) = sandbox else {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args).env_clear().envs(values(
            BASE_ENV
                .iter()
                .copied()
                .chain(env.iter().map(String::as_str)),
        ));
        return Ok(Spawn {
            command: cmd,
            sandbox: None,
        });
    };
    let program = resolve(command).ok_or_else(|| McpError::Spawn {
        server: name.to_string(),
        command: command.to_string(),
        cause: std::io::Error::new(std::io::ErrorKind::NotFound, "not found on PATH"),
    })?;
    let argv: Vec<String> = std::iter::once(command.to_string())
        .chain(args.iter().cloned())
        .collect();
    let prepared = Sandbox::for_server(sandbox.value.clone())
        .prepare(Request {
            agent: &format!("mcp:{name}"),
            program: &program,
            argv: &argv,
            workspace: std::path::Path::new("/"),
            env: values(env.iter().map(String::as_str)),
        })
        .map_err(|source| McpError::Sandbox {
            server: name.to_string(),
            source,
        })?;
    let mut cmd = tokio::process::Command::new(&prepared.program);
    cmd.arg0(&prepared.argv[0])
        .args(&prepared.argv[1..])
        .current_dir(&prepared.cwd)
        .env_clear()
        .envs(prepared.env.iter().map(|(k, v)| (k, v)));
    Ok(Spawn {
        command: cmd,
        sandbox: Some(prepared),
    })
}
