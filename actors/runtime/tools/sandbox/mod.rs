//! The OS sandbox commands run in when the session's `[sandbox] mode` says so.
//!
//! - `bwrap`: the bubblewrap command line (namespaces, read-only root, mounts, network) and what
//!   runs around it.
//! - `container`: the docker and podman backends.
//! - `proxy`, [`forward`]: the network of `network = "allow"`.
//! - `cgroup`: the `pids` and `memory` groups of one command, and which of them was hit.
//! - [`host_problems`]: what the host lacks for the sandboxes the config turns on.
//! - [`explain`]: the effective sandbox of a session, each setting with its source.
//! - `gate`: the file tools under `sandbox.workspace` in sandboxed sessions.
//!
//! [`Sandbox::prepare`] turns a judged command into what actually runs:
//! `sh -c '<join the cgroups>; exec "$@"' … prlimit --cpu --fsize --nofile --core bwrap … -- <command>`.
//! The limits are the kernel's: `RLIMIT_CPU` (SIGXCPU), `RLIMIT_FSIZE` (SIGXFSZ), `RLIMIT_NOFILE`,
//! and the cgroups for processes and memory, which bind root too. What the command leaves behind
//! (detached children included) dies with the sandbox's pid namespace and is swept from the
//! cgroups by [`Prepared::finish`], which also says which limit, if any, stopped the command.
//! Nothing is run when a part is missing: the caller gets a [`SandboxError`] naming what to
//! install.
//!
//! With `network = "allow"` a filtering proxy (`proxy`) runs outside for the command's lifetime
//! and the forwarder (`forward`) in front of the command inside. The `docker` and `podman`
//! backends (`container`) run the command with the same settings in a container instead.

pub(crate) mod bwrap;
pub(crate) mod cgroup;
pub(crate) mod container;
pub mod explain;
pub mod forward;
pub(crate) mod gate;
mod host;
pub(crate) mod proxy;

#[cfg(test)]
mod tests;

pub use forward::Forwarder;
pub use host::host_problems;

use clawbus_core::config::{SandboxBackend, SandboxDef};
use clawbus_core::ids::{AgentId, SessionKey};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `PATH` inside the sandbox.
pub(crate) const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// `HOME` inside the sandbox (the private `/tmp`).
pub(crate) const SANDBOX_HOME: &str = "/tmp";
/// The shell that puts the command's first process into its cgroups.
const JOIN: &str =
    "for f; do shift; [ \"$f\" = -- ] && break; echo $$ > \"$f\" || exit 125; done; exec \"$@\"";
/// Signal numbers bwrap reports as `128 + n` when the command died of them.
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

/// A limit that stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `sandbox.memory_mb`: the OOM killer ended it.
    Memory,
    /// `sandbox.cpu_seconds`: SIGXCPU.
    CpuTime,
    /// `sandbox.max_processes`: a fork or thread was refused.
    Processes,
    /// `sandbox.max_file_mb`: SIGXFSZ.
    FileSize,
    /// `sandbox.timeout` (or `exec.timeout_s`): the whole tree was killed.
    Timeout,
}

impl Limit {
    /// The limit's name in tool results (`memory`, `cpu_time`, `processes`, `file_size`, `timeout`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::CpuTime => "cpu_time",
            Self::Processes => "processes",
            Self::FileSize => "file_size",
            Self::Timeout => "timeout",
        }
    }

    /// The setting that sets it, with its value from `def` (`sandbox.memory_mb = 512`).
    pub fn setting(self, def: &SandboxDef, timeout: Duration) -> String {
        match self {
            Self::Memory => format!("sandbox.memory_mb = {}", def.memory_mb.value),
            Self::CpuTime => format!("sandbox.cpu_seconds = {}", def.cpu_seconds.value),
            Self::Processes => format!("sandbox.max_processes = {}", def.max_processes.value),
            Self::FileSize => format!("sandbox.max_file_mb = {}", def.max_file_mb.value),
            Self::Timeout => format!("timeout = {}s", timeout.as_secs_f64()),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a command could not be sandboxed; it was not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A program the backend needs is not installed.
    #[error(
        "{program} is not installed (install the {package} package, e.g. `apt-get install {package}`)"
    )]
    Missing {
        /// The program looked for on `PATH`.
        program: &'static str,
        /// The distribution package that has it.
        package: &'static str,
    },
    /// The cgroups that enforce `max_processes` and `memory_mb` could not be made.
    #[error(
        "the process and memory limits need a pids and a memory cgroup the daemon may create: {0}"
    )]
    Cgroup(#[source] std::io::Error),
    /// A path that cannot be passed to the backend.
    #[error("path {0:?} is not UTF-8")]
    NotUtf8(PathBuf),
    /// A `binds` folder that does not exist.
    #[error("sandbox.binds: {0} does not exist")]
    MissingBind(PathBuf),
    /// The container backend's daemon does not answer.
    #[error("the {backend} daemon is not reachable at {}: {source} (start it, or set sandbox.backend = \"bwrap\")", socket.display())]
    NoDaemon {
        /// `docker`.
        backend: &'static str,
        /// The socket tried.
        socket: PathBuf,
        /// Why connecting failed.
        #[source]
        source: std::io::Error,
    },
    /// The proxy of `network = "allow"` could not be started.
    #[error("the network proxy could not be started: {0}")]
    Proxy(#[source] std::io::Error),
    /// A path a container backend cannot mount (`:` or `,` in it).
    #[error("path {0:?} cannot be mounted by a container backend (it holds ':' or ',')")]
    Unmountable(PathBuf),
    /// `network = "allow"` with a backend that has no proxy yet.
    #[error("network = \"allow\" needs backend = \"bwrap\"")]
    AllowNeedsBwrap,
}

/// What a command needs from the host: the programs of the bwrap backend.
const NEEDED: [(&str, &str); 2] = [("bwrap", "bubblewrap"), ("prlimit", "util-linux")];

/// The sandbox of one agent.
#[derive(Debug, Clone)]
pub struct Sandbox {
    def: Arc<SandboxDef>,
    /// Where the backend's programs are looked for; `None`: the daemon's `PATH`.
    search: Option<Arc<Vec<PathBuf>>>,
    /// The forwarder of `network = "allow"`; `None`: the running executable.
    forwarder: Option<Arc<Forwarder>>,
    /// How the proxy resolves names (the system's, except in tests).
    resolver: proxy::Resolver,
    /// A server that lives as long as the daemon ([`Sandbox::for_server`]): no CPU time limit.
    long_lived: bool,
}

/// A judged command, as the sandbox needs it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The agent (for the proxy's log lines).
    pub agent: &'a str,
    /// The resolved executable (its path is the same inside).
    pub program: &'a Path,
    /// The argv; `argv[0]` is replaced by `program`.
    pub argv: &'a [String],
    /// The agent's workspace.
    pub workspace: &'a Path,
    /// The variables passed in (already filtered to the allowed names).
    pub env: Vec<(String, OsString)>,
}

/// What to run instead of the command, and the groups to read and close afterwards.
#[derive(Debug)]
pub struct Prepared {
    /// The program to start (`/bin/sh`).
    pub program: PathBuf,
    /// Its argv.
    pub argv: Vec<String>,
    /// Where to start it (the host side; the command's cwd is set by bwrap).
    pub cwd: PathBuf,
    /// Its whole environment.
    pub env: Vec<(String, OsString)>,
    cleanup: Cleanup,
}

/// What a run leaves to read and remove.
#[derive(Debug)]
enum Cleanup {
    /// bubblewrap: the cgroups, and the proxy of `network = "allow"`.
    Bwrap {
        group: cgroup::Group,
        proxy: Option<proxy::ProxyRun>,
    },
    /// A named container, inspected and removed with its CLI.
    Container {
        cli: PathBuf,
        name: String,
        env: Vec<(String, OsString)>,
    },
}

/// How a sandboxed command ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code (bwrap reports `128 + n` for a command that died of signal n).
    Code(i32),
    /// A signal ended the sandbox itself.
    Signal(i32),
    /// It ran past the timeout and was killed.
    TimedOut,
}

impl Sandbox {
    /// The sandbox under `def`.
    pub fn new(def: SandboxDef) -> Self {
        Self {
            def: Arc::new(def),
            search: None,
            forwarder: None,
            resolver: proxy::Resolver::System,
            long_lived: false,
        }
    }

    /// The sandbox of a process that lives as long as the daemon (an MCP server): `def` with no
    /// workspace mounted (it starts in its private `/tmp`), and no `cpu_seconds` limit, which
    /// would end it after that much work in total. Memory, processes, file size, open files and
    /// the network apply as for a command.
    pub fn for_server(mut def: SandboxDef) -> Self {
        def.workspace.value = clawbus_core::config::WorkspaceAccess::None;
        Self {
            long_lived: true,
            ..Self::new(def)
        }
    }

    /// Starts the forwarder of `network = "allow"` with `forwarder` instead of the running
    /// executable (a bench or a test whose executable is not `clawbus`).
    pub fn with_forwarder(mut self, forwarder: Forwarder) -> Self {
        self.forwarder = Some(Arc::new(forwarder));
        self
    }

    #[cfg(test)]
    /// Resolves the proxy's names with `resolver`.
    pub(crate) fn with_resolver(mut self, resolver: proxy::Resolver) -> Self {
        self.resolver = resolver;
        self
    }

    #[cfg(test)]
    /// Looks for `bwrap` and `prlimit` in `dirs` instead of the daemon's `PATH`.
    pub(crate) fn with_search_path(mut self, dirs: Vec<PathBuf>) -> Self {
        self.search = Some(Arc::new(dirs));
        self
    }

    /// The settings.
    pub fn def(&self) -> &SandboxDef {
        &self.def
    }

    /// Whether commands of `session` of `agent` run sandboxed.
    pub fn applies(&self, agent: &AgentId, session: &SessionKey) -> bool {
        self.def.applies(*session == SessionKey::main(agent))
    }

    /// `program` on the search path, or what to install.
    fn find(&self, program: &'static str, package: &'static str) -> Result<PathBuf, SandboxError> {
        let dirs: Vec<PathBuf> = match &self.search {
            Some(dirs) => dirs.as_ref().clone(),
            None => std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
        };
        dirs.iter()
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
            .ok_or(SandboxError::Missing { program, package })
    }

    /// The bwrap backend's programs (`bwrap`, `prlimit`), or the first one missing.
    pub fn locate(&self) -> Result<(PathBuf, PathBuf), SandboxError> {
        Ok((
            self.find(NEEDED[0].0, NEEDED[0].1)?,
            self.find(NEEDED[1].0, NEEDED[1].1)?,
        ))
    }

    /// The container backend's CLI, once its daemon answers.
    pub(crate) fn locate_container(&self) -> Result<PathBuf, SandboxError> {
        let backend = self.def.backend.value;
        let (program, package) = container::program(backend);
        let cli = self.find(program, package)?;
        let host = std::env::var("DOCKER_HOST").ok();
        container::reachable(backend, host.as_deref())?;
        Ok(cli)
    }

    /// What to run for `req`; nothing is started. `Err` means the command must not run.
    pub fn prepare(&self, req: Request<'_>) -> Result<Prepared, SandboxError> {
        for bind in &self.def.binds.value {
            if !bind.path.exists() {
                return Err(SandboxError::MissingBind(bind.path.clone()));
            }
        }
        match self.def.backend.value {
            SandboxBackend::Bwrap => self.prepare_bwrap(req),
            SandboxBackend::Docker | SandboxBackend::Podman => self.prepare_container(req),
        }
    }
}

/// Whether the bwrap sandbox can run here (bubblewrap, prlimit, a pids and a memory cgroup);
/// prints why not, and fails under `CI=true`, which must be able to run it.
#[cfg(test)]
pub(crate) fn usable_in_tests() -> bool {
    let why = if Sandbox::new(SandboxDef::default()).locate().is_err() {
        "bubblewrap (bwrap) or prlimit is not installed"
    } else if !cgroup::available(cgroup::Controller::Pids)
        || !cgroup::available(cgroup::Controller::Memory)
    {
        "no pids and memory cgroup the tests may create"
    } else {
        return true;
    };
    println!("skipped: {why}");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must be able to run the sandbox: {why}"
    );
    false
}

/// Appends the variables of `extra` whose names `env` does not hold yet.
fn add_missing(env: &mut Vec<(String, OsString)>, extra: Vec<(String, OsString)>) {
    for (k, v) in extra {
        if !env.iter().any(|(e, _)| *e == k) {
            env.push((k, v));
        }
    }
}

fn text(p: &Path) -> Result<String, SandboxError> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| SandboxError::NotUtf8(p.to_path_buf()))
}

impl Prepared {
    /// Which limit stopped the command, if one did; kills what is left and removes the groups
    /// (or the container) and stops the proxy.
    pub async fn finish(self, ended: Ended) -> Option<Limit> {
        match self.cleanup {
            Cleanup::Bwrap { group, proxy } => {
                drop(proxy);
                let limit = match ended {
                    Ended::TimedOut => Some(Limit::Timeout),
                    _ if group.hit(cgroup::Controller::Memory) => Some(Limit::Memory),
                    _ => by_signal(ended),
                }
                .or_else(|| {
                    group
                        .hit(cgroup::Controller::Pids)
                        .then_some(Limit::Processes)
                });
                group.close().await;
                limit
            }
            Cleanup::Container { cli, name, env } => {
                let limit = match ended {
                    Ended::TimedOut => Some(Limit::Timeout),
                    Ended::Code(137) if container::oom_killed(&cli, &name, &env).await => {
                        Some(Limit::Memory)
                    }
                    _ => by_signal(ended),
                };
                container::remove(&cli, &name, &env).await;
                limit
            }
        }
    }
}

/// CPU time (SIGXCPU) and file size (SIGXFSZ), from how the command ended.
fn by_signal(ended: Ended) -> Option<Limit> {
    match ended {
        Ended::Code(c) if c == 128 + SIGXCPU => Some(Limit::CpuTime),
        Ended::Signal(SIGXCPU) => Some(Limit::CpuTime),
        Ended::Code(c) if c == 128 + SIGXFSZ => Some(Limit::FileSize),
        Ended::Signal(SIGXFSZ) => Some(Limit::FileSize),
        _ => None,
    }
}
