//! The bubblewrap command line for one sandboxed command.
//!
//! Every namespace is new (user, mount, pid, ipc, uts, cgroup, and network unless `network =
//! "host"`), capabilities are dropped, the command runs in a session of its own and dies with
//! bwrap. The root is read-only and holds only the system folders (`/usr`, `/bin`, `/sbin`,
//! `/lib*`, `/etc` with its password hashes masked): the host's home, the state folder and
//! everything else outside the workspace and `binds` are absent. `/tmp` is a fresh tmpfs that
//! disappears with the sandbox, `/proc` and `/dev` are the sandbox's own. With `network =
//! "allow"` the network namespace is still new and empty; the proxy's socket and the forwarder
//! are mounted under `/run/clawbus` (see `proxy`).

use super::{
    Cleanup, Forwarder, Prepared, Request, SANDBOX_HOME, SANDBOX_PATH, Sandbox, SandboxError,
    add_missing, cgroup, forward, proxy, text,
};
use clawbus_core::config::{NetworkMode, SandboxDef, WorkspaceAccess};
use std::ffi::OsString;
use std::path::Path;

/// Host folders mounted read-only at the same place (or recreated as the same symlink).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];
/// Files of `/etc` hidden behind `/dev/null`.
const MASKED: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];
/// The host name inside.
pub(crate) const HOSTNAME: &str = "sandbox";

/// Where the command starts: the workspace, or `/tmp` when the workspace is not mounted.
pub(crate) fn cwd(def: &SandboxDef, workspace: &Path) -> std::path::PathBuf {
    match def.workspace.value {
        WorkspaceAccess::None => "/tmp".into(),
        WorkspaceAccess::Ro | WorkspaceAccess::Rw => workspace.to_path_buf(),
    }
}

/// bwrap's arguments (without the program name) up to and including `--`; the command follows.
/// `files` are host files mounted read-only at the given path inside (the proxy's socket and
/// the forwarder of `network = "allow"`).
pub(crate) fn args(
    def: &SandboxDef,
    workspace: &Path,
    privileged: bool,
    files: &[(&Path, &str)],
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
        a.extend(items.iter().map(|i| i.as_ref().to_os_string()));
    };
    push(&[&"--unshare-all", &"--unshare-user", &"--disable-userns"]);
    if def.network.value == NetworkMode::Host {
        push(&[&"--share-net"]);
    }
    push(&[
        &"--die-with-parent",
        &"--new-session",
        &"--hostname",
        &HOSTNAME,
    ]);
    if privileged {
        push(&[&"--cap-drop", &"ALL"]);
    }
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    push(&[&"--symlink", &target, &path]);
                }
            }
            Ok(m) if m.is_dir() => push(&[&"--ro-bind", &path, &path]),
            _ => {}
        }
    }
    for file in MASKED {
        if Path::new(file).exists() {
            push(&[&"--ro-bind", &"/dev/null", file]);
        }
    }
    let tmp_size = (def.memory_mb.value << 20).to_string();
    push(&[&"--proc", &"/proc", &"--dev", &"/dev"]);
    push(&[&"--size", &tmp_size, &"--tmpfs", &"/tmp"]);
    match def.workspace.value {
        WorkspaceAccess::None => {}
        WorkspaceAccess::Ro => push(&[&"--ro-bind", &workspace, &workspace]),
        WorkspaceAccess::Rw => push(&[&"--bind", &workspace, &workspace]),
    }
    for bind in &def.binds.value {
        let how = if bind.writable { "--bind" } else { "--ro-bind" };
        push(&[&how, &bind.path, &bind.path]);
    }
    for (host, inside) in files {
        push(&[&"--ro-bind", host, inside]);
    }
    // bwrap's own root is a writable tmpfs until this.
    push(&[&"--remount-ro", &"/"]);
    let cwd = cwd(def, workspace);
    push(&[&"--chdir", &cwd, &"--"]);
    a
}

impl Sandbox {
    /// What to run for `req` under bubblewrap (see the module docs of `sandbox`).
    pub(super) fn prepare_bwrap(&self, req: Request<'_>) -> Result<Prepared, SandboxError> {
        let (bwrap, prlimit) = self.locate()?;
        let def = &self.def;
        let forwarder = match (def.network.value, &self.forwarder) {
            (NetworkMode::Allow, Some(f)) => Some(f.as_ref().clone()),
            (NetworkMode::Allow, None) => {
                Some(Forwarder::current_exe().map_err(SandboxError::Proxy)?)
            }
            _ => None,
        };
        let proxy = match forwarder {
            Some(_) => Some(
                proxy::start(proxy::Policy {
                    def: Some(self.def.clone()),
                    resolver: self.resolver.clone(),
                    agent: req.agent.to_string(),
                    exempt: Vec::new(),
                })
                .map_err(SandboxError::Proxy)?,
            ),
            None => None,
        };
        let group = cgroup::Group::create(def.max_processes.value, def.memory_mb.value << 20)
            .map_err(SandboxError::Cgroup)?;
        let mut argv = vec![
            "sh".to_string(),
            "-c".into(),
            super::JOIN.into(),
            "sh".into(),
        ];
        for file in group.procs_files() {
            argv.push(text(&file)?);
        }
        argv.push("--".into());
        let cpu = def.cpu_seconds.value;
        let file = def.max_file_mb.value << 20;
        let nofile = def.max_open_files.value;
        argv.extend([
            text(&prlimit)?,
            if self.long_lived {
                "--cpu=unlimited:unlimited".to_string()
            } else {
                format!("--cpu={cpu}:{}", cpu + 1)
            },
            format!("--fsize={file}:{file}"),
            format!("--nofile={nofile}:{nofile}"),
            "--core=0:0".into(),
            text(&bwrap)?,
        ]);
        let privileged = rustix::process::geteuid().is_root();
        let socket = proxy.as_ref().map(proxy::ProxyRun::socket);
        let mut files: Vec<(&Path, &str)> = Vec::new();
        if let (Some(socket), Some(f)) = (&socket, &forwarder) {
            files.push((socket, forward::SOCKET_PATH));
            files.push((&f.program, forward::FORWARDER_PATH));
        }
        for arg in args(def, req.workspace, privileged, &files) {
            argv.push(
                arg.into_string()
                    .map_err(|a| SandboxError::NotUtf8(a.into()))?,
            );
        }
        if let Some(f) = &forwarder {
            argv.extend([
                "/bin/sh".to_string(),
                "-c".into(),
                forward::OUTER.into(),
                "sh".into(),
                forward::FORWARDER_PATH.into(),
            ]);
            argv.extend(f.args.iter().cloned());
            argv.extend([
                forward::FORWARD_MODE.to_string(),
                forward::SOCKET_PATH.into(),
                proxy::PROXY_PORT.to_string(),
                "--".into(),
            ]);
        }
        argv.push(text(req.program)?);
        argv.extend(req.argv.iter().skip(1).cloned());
        let mut env = vec![
            ("PATH".to_string(), OsString::from(SANDBOX_PATH)),
            ("HOME".to_string(), OsString::from(SANDBOX_HOME)),
        ];
        if forwarder.is_some() {
            let url = OsString::from(format!("http://127.0.0.1:{}", proxy::PROXY_PORT));
            for name in PROXY_ENV {
                env.push((name.to_string(), url.clone()));
            }
        }
        add_missing(&mut env, req.env);
        Ok(Prepared {
            program: "/bin/sh".into(),
            argv,
            cwd: "/".into(),
            env,
            cleanup: Cleanup::Bwrap { group, proxy },
        })
    }
}

/// The variables that point the command at the forwarder (both cases: curl reads only the
/// lower-case `http_proxy`).
const PROXY_ENV: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
