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
