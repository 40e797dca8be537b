//! What `clawbus sandbox explain` prints: the effective sandbox of an agent's session, each
//! setting with the config line that set it, the mounts, and the variables that pass in.

use super::{Sandbox, bwrap, forward, host_problems};
use clawbus_core::config::{
    AgentDef, Config, NetworkMode, SandboxBackend, SandboxDef, Set, WorkspaceAccess,
};
use clawbus_core::ids::SessionKey;
use serde::Serialize;
use std::fmt::Display;
use std::path::Path;

/// Tools that start a process, and so run in the sandbox when the session's mode says so.
pub const SANDBOXED_TOOLS: &[&str] = &["exec"];

/// One setting: its value and where it was set (`default` or `file:line:col`).
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// `sandbox.memory_mb`.
    pub setting: &'static str,
    /// As it would be written in a file.
    pub value: String,
    /// `default` or `file:line:col`.
    pub source: String,
}

/// One mount inside the sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct Mount {
    /// The path inside (and on the host, for binds).
    pub path: String,
    /// `ro`, `rw`, `tmpfs`, `proc`, `dev`, `masked`, `symlink -> target`.
    pub how: String,
}

/// The whole explanation.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The agent.
    pub agent: String,
    /// The session explained.
    pub session: String,
    /// Whether that session's commands run sandboxed.
    pub sandboxed: bool,
    /// Every setting, with its source.
    pub settings: Vec<Setting>,
    /// What the command can reach, in words.
    pub network: String,
    /// The mounts, in the order they are made.
    pub mounts: Vec<Mount>,
    /// Names of the variables that pass in (`exec.env` and `sandbox.env`, secrets removed),
    /// besides `PATH` and `HOME`, which are the sandbox's own.
    pub env: Vec<String>,
    /// The tools that run in the sandbox for this session.
    pub tools: Vec<&'static str>,
    /// What the host lacks to run it (commands are refused until fixed).
    pub problems: Vec<String>,
}

fn row<T>(setting: &'static str, set: &Set<T>, show: impl Fn(&T) -> String) -> Setting {
    Setting {
        setting,
        value: show(&set.value),
        source: set.source(),
    }
}

fn quoted<T: Display>(v: &T) -> String {
    format!("\"{v}\"")
}

/// The settings of `def`, in documentation order.
pub fn settings(def: &SandboxDef) -> Vec<Setting> {
    let list = |v: &Vec<String>| format!("{v:?}");
    vec![
        row("sandbox.mode", &def.mode, quoted),
        row("sandbox.backend", &def.backend, quoted),
        row("sandbox.workspace", &def.workspace, quoted),
        row("sandbox.image", &def.image, quoted),
        row("sandbox.network", &def.network, quoted),
        row("sandbox.allow_domains", &def.allow_domains, list),
        row("sandbox.cpu_seconds", &def.cpu_seconds, u64::to_string),
        row("sandbox.memory_mb", &def.memory_mb, u64::to_string),
        row("sandbox.max_processes", &def.max_processes, u64::to_string),
        row("sandbox.max_file_mb", &def.max_file_mb, u64::to_string),
        row(
            "sandbox.max_open_files",
            &def.max_open_files,
            u64::to_string,
        ),
        row("sandbox.timeout", &def.timeout, |d| {
            match d.subsec_millis() {
                0 => format!("\"{}s\"", d.as_secs()),
                _ => format!("\"{}ms\"", d.as_millis()),
            }
        }),
        row("sandbox.env", &def.env, list),
        row("sandbox.binds", &def.binds, |b| {
            list(&b.iter().map(ToString::to_string).collect())
        }),
    ]
}

/// The mounts bwrap makes for `def` with the workspace at `workspace` (with `network =
/// "allow"`, the proxy's socket and the forwarder too).
pub fn mounts(def: &SandboxDef, workspace: &Path) -> Vec<Mount> {
    if def.backend.value != SandboxBackend::Bwrap {
        return container_mounts(def, workspace);
    }
    let host_socket = Path::new("<a fresh socket of the daemon's proxy>");
    let host_forwarder = Path::new("<the daemon's executable>");
    let files: Vec<(&Path, &str)> = match def.network.value {
        NetworkMode::Allow => vec![
            (host_socket, forward::SOCKET_PATH),
            (host_forwarder, forward::FORWARDER_PATH),
        ],
        _ => Vec::new(),
    };
    let args: Vec<String> = bwrap::args(def, workspace, false, &files)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let at = |k: usize| args.get(i + k).cloned().unwrap_or_default();
        let (mount, step) = match args[i].as_str() {
            "--ro-bind" if at(1) == "/dev/null" => (Some((at(2), "masked".to_string())), 3),
            "--ro-bind" if at(2) == forward::SOCKET_PATH => (
                Some((
                    at(2),
                    "ro, the network proxy's socket (only way out)".into(),
                )),
                3,
            ),
            "--ro-bind" if at(2) == forward::FORWARDER_PATH => (
                Some((
                    at(2),
                    format!(
                        "ro, the forwarder listening on 127.0.0.1:{}",
                        super::proxy::PROXY_PORT
                    ),
                )),
                3,
            ),
            "--ro-bind" => (Some((at(2), "ro".into())), 3),
            "--bind" => (Some((at(2), "rw".into())), 3),
            "--symlink" => (Some((at(2), format!("symlink -> {}", at(1)))), 3),
            "--proc" => (Some((at(1), "proc".into())), 2),
            "--dev" => (Some((at(1), "dev".into())), 2),
            "--size" if at(2) == "--tmpfs" => (
                Some((
                    at(3),
                    format!("tmpfs, {} MiB, gone after the run", def.memory_mb.value),
                )),
                4,
            ),
            "--remount-ro" => (Some((at(1), "root read-only".into())), 2),
            "--hostname" | "--cap-drop" | "--chdir" => (None, 2),
            _ => (None, 1),
        };
        if let Some((path, how)) = mount {
            out.push(Mount { path, how });
        }
        i += step;
    }
    out
}

/// The mounts of a docker or podman container for `def`.
fn container_mounts(def: &SandboxDef, workspace: &Path) -> Vec<Mount> {
    let mut out = vec![Mount {
        path: "/".into(),
        how: format!("root read-only (image {})", def.image.value),
    }];
    let mut add = |path: String, how: &str| {
        out.push(Mount {
            path,
            how: how.into(),
        })
    };
    add(
        "/tmp".into(),
        &format!("tmpfs, {} MiB, gone after the run", def.memory_mb.value),
    );
    match def.workspace.value {
        WorkspaceAccess::None => {}
        WorkspaceAccess::Ro => add(workspace.display().to_string(), "ro"),
        WorkspaceAccess::Rw => add(workspace.display().to_string(), "rw"),
    }
    for b in &def.binds.value {
        add(
            b.path.display().to_string(),
            if b.writable { "rw" } else { "ro" },
        );
    }
    out
}

/// What the command can reach under `def`, in words.
pub fn network(def: &SandboxDef) -> String {
    match def.network.value {
        NetworkMode::None => "none: a network namespace of its own with only a loopback".into(),
        NetworkMode::Host => "host: the host's network, unfiltered".into(),
        NetworkMode::Allow => format!(
            "allow: only {} through the daemon's proxy (HTTP_PROXY and HTTPS_PROXY = http://127.0.0.1:{}); \
             loopback, private, link-local and cloud metadata addresses are refused; nothing else leaves",
            def.allow_domains.value.join(", "),
            super::proxy::PROXY_PORT
        ),
    }
}

/// Explains `sandbox` (the agent's, secrets removed) for `session`; without one, for a session
/// that is not the main one (`agent:<id>:api:direct:<name>`), as most are. `env` is the names
/// that pass in.
pub fn explain(
    config: &Config,
    agent: &AgentDef,
    sandbox: &SandboxDef,
    env: Vec<String>,
    session: Option<&SessionKey>,
) -> Explanation {
    let key = session
        .cloned()
        .unwrap_or_else(|| SessionKey::peer(&agent.id, "api", "direct", "<name>"));
    let sandboxed = Sandbox::new(sandbox.clone()).applies(&agent.id, &key);
    let workspace = config.state_dir.join("workspaces").join(agent.id.as_str());
    let problems = if sandbox.mode.value == clawbus_core::config::SandboxMode::Off {
        Vec::new()
    } else {
        let mut c = config.clone();
        c.agents = vec![agent.clone()];
        host_problems(&c)
            .iter()
            .map(|p| p.message.clone())
            .collect()
    };
    Explanation {
        agent: agent.id.to_string(),
        session: key.to_string(),
        sandboxed,
        settings: settings(sandbox),
        network: network(sandbox),
        mounts: mounts(sandbox, &workspace),
        env,
        tools: if sandboxed {
            SANDBOXED_TOOLS.to_vec()
        } else {
            Vec::new()
        },
        problems,
    }
}
