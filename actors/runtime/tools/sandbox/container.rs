//! The docker and podman backends: one `docker run` (or `podman run`) per command, with the same
//! settings as bubblewrap.
//!
//! The container's root is read-only (`--read-only`), `/tmp` a fresh tmpfs, every capability is
//! dropped and privileges cannot be regained; the network is `none` (or the host's with `network =
//! "host"`); memory and swap (`--memory`, `--memory-swap`), processes (`--pids-limit`), CPU time,
//! file size, open files and core dumps (`--ulimit`) are the container runtime's to enforce; the
//! workspace and `binds` are mounted as set; the command runs as the daemon's user. Variables pass
//! by name only (`-e NAME`: the value comes from the CLI's environment, never the argv, which
//! other users can read in `/proc`). The container has a name of its own, so it can be inspected
//! (was it the OOM killer?) and removed after the run, a timed-out one included.
//!
//! Docker needs its daemon: when its socket does not answer, nothing runs (fails closed). Podman
//! runs without a daemon; its program is enough.

use super::{
    Cleanup, Prepared, Request, SANDBOX_HOME, SANDBOX_PATH, Sandbox, SandboxError, add_missing,
    bwrap, cgroup, text,
};
use clawbus_core::config::{NetworkMode, SandboxBackend, SandboxDef, WorkspaceAccess};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Variables of the daemon the container CLI itself needs to find its daemon and its config.
pub(crate) const CLI_ENV: &[&str] = &[
    "HOME",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "CONTAINER_HOST",
    "XDG_RUNTIME_DIR",
];
/// Docker's socket when `DOCKER_HOST` is not set.
const DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// The program and package of `backend`.
pub(crate) fn program(backend: SandboxBackend) -> (&'static str, &'static str) {
    match backend {
        SandboxBackend::Podman => ("podman", "podman"),
        _ => ("docker", "docker.io"),
    }
}

/// Fails closed when Docker's daemon does not answer on its unix socket (`DOCKER_HOST`, else
/// `/var/run/docker.sock`). Podman and a daemon reached over TCP are not probed.
pub(crate) fn reachable(
    backend: SandboxBackend,
    docker_host: Option<&str>,
) -> Result<(), SandboxError> {
    if backend != SandboxBackend::Docker {
        return Ok(());
    }
    let socket = match docker_host {
        None | Some("") => PathBuf::from(DOCKER_SOCKET),
        Some(h) => match h.strip_prefix("unix://") {
            Some(path) => PathBuf::from(path),
            None => return Ok(()),
        },
    };
    std::os::unix::net::UnixStream::connect(&socket)
        .map(drop)
        .map_err(|source| SandboxError::NoDaemon {
            backend: "docker",
            socket,
            source,
        })
}

/// `run …` up to and including the image; the command and its arguments follow.
pub(crate) fn args(
    def: &SandboxDef,
    workspace: &Path,
    name: &str,
    user: (u32, u32),
    env_names: &[String],
) -> Vec<String> {
    let mb = def.memory_mb.value;
    let cpu = def.cpu_seconds.value;
    let file = def.max_file_mb.value << 20;
    let nofile = def.max_open_files.value;
    let network = match def.network.value {
        NetworkMode::Host => "host",
        NetworkMode::None | NetworkMode::Allow => "none",
    };
    let mut a: Vec<String> = [
        "run",
        "--name",
        name,
        "--network",
        network,
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--init",
        "--hostname",
        bwrap::HOSTNAME,
    ]
    .map(String::from)
    .to_vec();
    a.extend([
        "--tmpfs".into(),
        format!("/tmp:rw,nosuid,nodev,size={mb}m,mode=1777"),
        "--memory".into(),
        format!("{mb}m"),
        "--memory-swap".into(),
        format!("{mb}m"),
        "--pids-limit".into(),
        def.max_processes.value.to_string(),
        "--ulimit".into(),
        format!("cpu={cpu}:{}", cpu + 1),
        "--ulimit".into(),
        format!("fsize={file}:{file}"),
        "--ulimit".into(),
        format!("nofile={nofile}:{nofile}"),
        "--ulimit".into(),
        "core=0:0".into(),
        "--user".into(),
        format!("{}:{}", user.0, user.1),
    ]);
    let ws = workspace.display();
    match def.workspace.value {
        WorkspaceAccess::None => {}
        WorkspaceAccess::Ro => a.extend(["--volume".into(), format!("{ws}:{ws}:ro")]),
        WorkspaceAccess::Rw => a.extend(["--volume".into(), format!("{ws}:{ws}:rw")]),
    }
    for bind in &def.binds.value {
        let p = bind.path.display();
        let mode = if bind.writable { "rw" } else { "ro" };
        a.extend(["--volume".into(), format!("{p}:{p}:{mode}")]);
    }
    a.extend([
        "--workdir".into(),
        bwrap::cwd(def, workspace).display().to_string(),
        "--env".into(),
        format!("PATH={SANDBOX_PATH}"),
        "--env".into(),
        format!("HOME={SANDBOX_HOME}"),
    ]);
    for name in env_names {
        a.extend(["--env".into(), name.clone()]);
    }
    a.push(def.image.value.clone());
    a
}

/// How long an `inspect` or `rm` of a finished container may take.
const CLI_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `cli args…` with `env`; its stdout when it succeeded.
async fn cli_output(cli: &Path, args: &[&str], env: &[(String, OsString)]) -> Option<Vec<u8>> {
    let mut cmd = tokio::process::Command::new(cli);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(CLI_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) if out.status.success() => Some(out.stdout),
        Ok(Ok(_)) => None,
        Ok(Err(e)) => {
            tracing::warn!(cli = %cli.display(), error = %e, "Could not run the container CLI.");
            None
        }
        Err(_) => {
            tracing::warn!(cli = %cli.display(), "The container CLI did not answer in time.");
            None
        }
    }
}

/// Whether the OOM killer ended container `name`.
pub(crate) async fn oom_killed(cli: &Path, name: &str, env: &[(String, OsString)]) -> bool {
    let args = ["inspect", "--format", "{{.State.OOMKilled}}", name];
    cli_output(cli, &args, env)
        .await
        .is_some_and(|out| out.trim_ascii() == b"true")
}

/// Removes container `name`, killing what still runs in it (a timed-out command).
pub(crate) async fn remove(cli: &Path, name: &str, env: &[(String, OsString)]) {
    if cli_output(cli, &["rm", "--force", name], env)
        .await
        .is_none()
    {
        tracing::warn!(
            container = name,
            "Could not remove a sandbox container; remove it by hand."
        );
    }
}

impl Sandbox {
    /// What to run for `req` in a container.
    pub(super) fn prepare_container(&self, req: Request<'_>) -> Result<Prepared, SandboxError> {
        let def = &self.def;
        if def.network.value == NetworkMode::Allow {
            return Err(SandboxError::AllowNeedsBwrap);
        }
        let cli = self.locate_container()?;
        let paths =
            std::iter::once(req.workspace).chain(def.binds.value.iter().map(|b| b.path.as_path()));
        for path in paths {
            let t = text(path)?;
            if t.contains([':', ',']) {
                return Err(SandboxError::Unmountable(path.to_path_buf()));
            }
        }
        let name = cgroup::unique_name("clawbus-sandbox");
        let user = (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        );
        let names: Vec<String> = req
            .env
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| k != "PATH" && k != "HOME")
            .collect();
        let mut argv = vec![text(&cli)?];
        argv.extend(args(def, req.workspace, &name, user, &names));
        argv.push(
            req.argv
                .first()
                .cloned()
                .unwrap_or_else(|| req.program.display().to_string()),
        );
        argv.extend(req.argv.iter().skip(1).cloned());
        let mut env: Vec<(String, OsString)> = vec![(
            "PATH".to_string(),
            std::env::var_os("PATH").unwrap_or_else(|| SANDBOX_PATH.into()),
        )];
        for key in CLI_ENV {
            if let Some(v) = std::env::var_os(key) {
                env.push((key.to_string(), v));
            }
        }
        add_missing(&mut env, req.env);
        Ok(Prepared {
            program: cli.clone(),
            argv,
            cwd: "/".into(),
            env: env.clone(),
            cleanup: Cleanup::Container { cli, name, env },
        })
    }
}
