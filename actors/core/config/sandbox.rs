//! `[sandbox]`: the OS sandbox that commands an agent runs are confined in.
//!
//! ```toml
//! [sandbox]                   # clawbus.toml: the defaults; an agent file's [sandbox] overrides
//! mode = "all"                # off | non-main | all (non-main: every session but agent:<id>:main)
//! backend = "bwrap"           # bwrap | docker | podman
//! image = "debian:bookworm-slim"  # docker/podman only: the image commands run in
//! workspace = "rw"            # none | ro | rw
//! network = "none"            # none | allow | host
//! allow_domains = ["example.com", "*.example.org"]  # with allow: the only names reachable
//! cpu_seconds = 60            # CPU time, then SIGXCPU
//! memory_mb = 512             # memory of the whole sandbox
//! max_processes = 128         # processes and threads of the whole sandbox
//! max_file_mb = 64            # the largest file a command may write
//! max_open_files = 256
//! timeout = "120s"            # wall clock, the whole tree killed past it
//! env = ["GIT_AUTHOR_NAME"]   # names passed in; nothing else reaches the command
//! binds = ["/opt/data:ro"]    # extra host folders, each :ro or :rw
//! ```
//!
//! Every value remembers where it was set ([`Origin`]), for `clawbus sandbox explain`; `read`
//! holds the file shape and its checks.

pub(in crate::config) use read::{SandboxFile, merged_problems, sandbox_def};

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

mod read;

/// A named choice of a setting: its spelling in files.
pub(crate) trait Choice: Copy + 'static {
    /// Every value, in documentation order.
    const ALL: &'static [Self];
    /// The name used in files.
    fn as_str(self) -> &'static str;
}

macro_rules! choice {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v),+ }
        impl Choice for $name {
            const ALL: &'static [Self] = &[$(Self::$v),+];
            fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

choice!(
    /// Which sessions run their commands in the sandbox (`sandbox.mode`).
    SandboxMode {
        /// None: commands run on the host (the default).
        Off = "off",
        /// Every session except the agent's main one (`agent:<id>:main`).
        NonMain = "non-main",
        /// Every session.
        All = "all",
    }
);

choice!(
    /// What isolates the commands (`sandbox.backend`).
    SandboxBackend {
        /// bubblewrap: namespaces, no daemon; the `bwrap` program must be installed.
        Bwrap = "bwrap",
        /// A Docker container (`docker run`); the Docker daemon must be reachable.
        Docker = "docker",
        /// A Podman container (`podman run`); the `podman` program must be installed.
        Podman = "podman",
    }
);

choice!(
    /// How the agent's workspace appears inside (`sandbox.workspace`).
    WorkspaceAccess {
        /// Not at all: the command starts in an empty private `/tmp`.
        None = "none",
        /// Read-only.
        Ro = "ro",
        /// Read-write.
        Rw = "rw",
    }
);

choice!(
    /// What the command may reach over the network (`sandbox.network`).
    NetworkMode {
        /// Nothing: a network namespace of its own with only a loopback.
        None = "none",
        /// Only the names of `allow_domains`, through a filtering proxy the daemon runs outside
        /// the sandbox (which refuses non-public addresses as `web_fetch` does).
        Allow = "allow",
        /// The host's network, unfiltered.
        Host = "host",
    }
);

/// An extra host folder mounted at the same path inside (`sandbox.binds`, `"/path:ro"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The absolute host path.
    pub path: PathBuf,
    /// `:rw` (else read-only).
    pub writable: bool,
}

impl fmt::Display for Bind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = if self.writable { "rw" } else { "ro" };
        write!(f, "{}:{mode}", self.path.display())
    }
}

/// Where a sandbox value came from: a file position, or the built-in default when `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file that set it.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.path.display(), self.line, self.col)
    }
}

/// A value with where it was set (`None`: the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set<T> {
    /// The value.
    pub value: T,
    /// Where it was set; `None` for the default.
    pub origin: Option<Origin>,
}

impl<T> Set<T> {
    pub(in crate::config) fn default_of(value: T) -> Self {
        Self {
            value,
            origin: None,
        }
    }

    /// `"default"` or `file:line:col`.
    pub fn source(&self) -> String {
        self.origin
            .as_ref()
            .map_or_else(|| "default".to_string(), Origin::to_string)
    }
}

impl<T: Clone> Set<T> {
    /// This value when it was set in a file, else `base`'s.
    fn over(&self, base: &Self) -> Self {
        if self.origin.is_some() {
            self.clone()
        } else {
            base.clone()
        }
    }
}

/// Default CPU seconds of one command.
pub(crate) const DEFAULT_CPU_SECONDS: u64 = 60;
/// Default memory of one sandbox, in MiB.
pub(crate) const DEFAULT_MEMORY_MB: u64 = 512;
/// Default processes and threads of one sandbox.
pub(crate) const DEFAULT_MAX_PROCESSES: u64 = 128;
/// Default largest file, in MiB.
pub(crate) const DEFAULT_MAX_FILE_MB: u64 = 64;
/// Default open files per process.
pub(crate) const DEFAULT_MAX_OPEN_FILES: u64 = 256;
/// Default image of the docker and podman backends.
pub(crate) const DEFAULT_SANDBOX_IMAGE: &str = "debian:bookworm-slim";
/// Default wall-clock limit of one command.
pub(crate) const DEFAULT_SANDBOX_TIMEOUT: Duration = Duration::from_secs(120);

/// The effective `[sandbox]` of an agent (`clawbus.toml`'s, overridden field by field by the
/// agent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxDef {
    /// Which sessions are sandboxed.
    pub mode: Set<SandboxMode>,
    /// What isolates.
    pub backend: Set<SandboxBackend>,
    /// The image of the docker and podman backends.
    pub image: Set<String>,
    /// The workspace inside.
    pub workspace: Set<WorkspaceAccess>,
    /// The network inside.
    pub network: Set<NetworkMode>,
    /// With `network = "allow"`: the names the proxy lets through (`example.com` exactly,
    /// `*.example.com` any name below it), lower case.
    pub allow_domains: Set<Vec<String>>,
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: Set<u64>,
    /// Memory of the whole sandbox, MiB.
    pub memory_mb: Set<u64>,
    /// Processes and threads of the whole sandbox.
    pub max_processes: Set<u64>,
    /// `RLIMIT_FSIZE`, MiB.
    pub max_file_mb: Set<u64>,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: Set<u64>,
    /// Wall clock, the whole tree killed past it.
    pub timeout: Set<Duration>,
    /// Names of the variables passed in (besides `PATH` and `HOME`, which are the sandbox's own).
    pub env: Set<Vec<String>>,
    /// Extra host folders.
    pub binds: Set<Vec<Bind>>,
}

impl Default for SandboxDef {
    fn default() -> Self {
        Self {
            mode: Set::default_of(SandboxMode::Off),
            backend: Set::default_of(SandboxBackend::Bwrap),
            image: Set::default_of(DEFAULT_SANDBOX_IMAGE.to_string()),
            workspace: Set::default_of(WorkspaceAccess::Rw),
            network: Set::default_of(NetworkMode::None),
            allow_domains: Set::default_of(Vec::new()),
            cpu_seconds: Set::default_of(DEFAULT_CPU_SECONDS),
            memory_mb: Set::default_of(DEFAULT_MEMORY_MB),
            max_processes: Set::default_of(DEFAULT_MAX_PROCESSES),
            max_file_mb: Set::default_of(DEFAULT_MAX_FILE_MB),
            max_open_files: Set::default_of(DEFAULT_MAX_OPEN_FILES),
            timeout: Set::default_of(DEFAULT_SANDBOX_TIMEOUT),
            env: Set::default_of(Vec::new()),
            binds: Set::default_of(Vec::new()),
        }
    }
}

impl SandboxDef {
    /// The values `self` set in a file, the rest from `base` (an agent's over the gateway's).
    pub fn over(&self, base: &SandboxDef) -> SandboxDef {
        SandboxDef {
            mode: self.mode.over(&base.mode),
            backend: self.backend.over(&base.backend),
            image: self.image.over(&base.image),
            workspace: self.workspace.over(&base.workspace),
            network: self.network.over(&base.network),
            allow_domains: self.allow_domains.over(&base.allow_domains),
            cpu_seconds: self.cpu_seconds.over(&base.cpu_seconds),
            memory_mb: self.memory_mb.over(&base.memory_mb),
            max_processes: self.max_processes.over(&base.max_processes),
            max_file_mb: self.max_file_mb.over(&base.max_file_mb),
            max_open_files: self.max_open_files.over(&base.max_open_files),
            timeout: self.timeout.over(&base.timeout),
            env: self.env.over(&base.env),
            binds: self.binds.over(&base.binds),
        }
    }

    /// Whether `host` (a name as a client wrote it) matches one of `allow_domains`: a pattern
    /// `example.com` matches that name only, `*.example.com` any name below it (not
    /// `example.com` itself). Case and one trailing dot are ignored.
    pub fn allows_domain(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.allow_domains
            .value
            .iter()
            .any(|p| match p.strip_prefix("*.") {
                Some(suffix) => host
                    .strip_suffix(suffix)
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                None => *p == host,
            })
    }

    /// Whether commands of `session` run sandboxed; `main` says whether it is the agent's main
    /// session.
    pub fn applies(&self, main: bool) -> bool {
        match self.mode.value {
            SandboxMode::Off => false,
            SandboxMode::NonMain => !main,
            SandboxMode::All => true,
        }
    }
}
