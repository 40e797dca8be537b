//! Control groups for one sandboxed command: a `pids` group for `max_processes` and a `memory`
//! group for `memory_mb`, which hold for root as for anyone (`RLIMIT_NPROC` does not bind root).
//!
//! The daemon's own groups are found in `/proc/self/cgroup` and `/proc/self/mountinfo`: cgroup v1
//! hierarchies, or the v2 unified hierarchy when the daemon's group has the controller (it was
//! delegated to it, e.g. systemd's `Delegate=yes`). In v2 a group that hands controllers to its
//! children may hold no process itself, so the daemon first moves itself into a leaf of its own
//! (`clawbus-daemon`) and then enables the controller for the children (`+pids` in
//! `cgroup.subtree_control`). A child group is made per command, the command's first process joins it before `exec`, and after the run what is left in
//! it is killed and the group removed. Which limit was hit is read from the group's events.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The two controllers the sandbox uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    /// Number of tasks (processes and threads).
    Pids,
    /// Memory, with the OOM killer inside the group.
    Memory,
}

impl std::fmt::Display for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Self::Pids => "pids",
            Self::Memory => "memory",
        }
    }
}

/// Where the daemon may make child groups of one controller.
#[derive(Debug, Clone)]
pub(super) struct Parent {
    /// The daemon's own group folder.
    pub(super) dir: PathBuf,
    /// A cgroup v2 folder (else v1).
    pub(super) v2: bool,
}

/// The parents found for `pids` and `memory`, looked up once.
fn parents() -> &'static [Option<Parent>; 2] {
    static FOUND: OnceLock<[Option<Parent>; 2]> = OnceLock::new();
    FOUND.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let pid = std::process::id();
        [
            find(&mounts, &own, Controller::Pids, pid),
            find(&mounts, &own, Controller::Memory, pid),
        ]
    })
}

/// The daemon's group of `controller` when a child group can be made there; in cgroup v2 the
/// controller is delegated to the children first when it is not yet (see [`delegate`]). `pid` is
/// the daemon's.
pub(super) fn find(mountinfo: &str, own: &str, controller: Controller, pid: u32) -> Option<Parent> {
    let name = controller.name();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let tail: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype), Some(opts)) =
            (fields.get(3), fields.get(4), tail.first(), tail.get(2))
        else {
            continue;
        };
        let rel = match *fstype {
            "cgroup" if opts.split(',').any(|o| o == name) => own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
                ctrls.split(',').any(|c| c == name).then_some(path)
            }),
            "cgroup2" => own.lines().find_map(|l| l.strip_prefix("0::")),
            _ => None,
        };
        let Some(rel) = rel else { continue };
        let rel = rel
            .strip_prefix(root)
            .unwrap_or(rel)
            .trim_start_matches('/');
        let dir = Path::new(point).join(rel);
        let v2 = *fstype == "cgroup2";
        if v2 && !delegate(&dir, name, rel.is_empty(), pid) {
            continue;
        }
        return Some(Parent { dir, v2 });
    }
    None
}

/// The leaf a cgroup v2 daemon moves into so that its group may hand controllers to children.
pub(super) const DAEMON_LEAF: &str = "clawbus-daemon";

/// Makes `name` a controller of the children of the v2 group `dir` (the daemon's): already so,
/// or the group has it (`cgroup.controllers`) and, once the daemon process `pid` sits in a leaf of
/// its own (unless `dir` is the root, which may hold processes), `+name` is written to
/// `cgroup.subtree_control`. On failure (another process still in `dir`) the daemon moves back.
fn delegate(dir: &Path, name: &str, root: bool, pid: u32) -> bool {
    let lists = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == name))
    };
    if lists("cgroup.subtree_control") {
        return true;
    }
    if !lists("cgroup.controllers") {
        return false;
    }
    let leaf = dir.join(DAEMON_LEAF);
    if !root {
        let moved = (leaf.is_dir() || std::fs::create_dir(&leaf).is_ok())
            && std::fs::write(leaf.join("cgroup.procs"), pid.to_string()).is_ok();
        if !moved {
            return false;
        }
    }
    match std::fs::write(dir.join("cgroup.subtree_control"), format!("+{name}")) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(dir = %dir.display(), controller = name, error = %e, "Could not delegate a cgroup controller.");
            if !root && let Err(e) = std::fs::write(dir.join("cgroup.procs"), pid.to_string()) {
                tracing::warn!(dir = %dir.display(), error = %e, "Could not move the daemon back to its cgroup.");
            }
            false
        }
    }
}

/// Whether a group of `controller` can be made for commands (what `clawbus check` reports).
pub(crate) fn available(controller: Controller) -> bool {
    let index = controller as usize;
    parents()[index].as_ref().is_some_and(|p| {
        let probe = p.dir.join(unique_name("clawbus-probe"));
        let made = std::fs::create_dir(&probe).is_ok();
        let usable = made
            && (probe.join(format!("{}.max", controller.name())).exists()
                || probe.join("memory.limit_in_bytes").exists());
        if made {
            remove_dir(&probe);
        }
        usable
    })
}

/// Groups waiting to be removed (a process was still exiting when the run ended).
static LEFT_OVER: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// One command's groups.
#[derive(Debug)]
pub(crate) struct Group {
    /// `(controller, folder, v2)` of each group made.
    dirs: Vec<(Controller, PathBuf, bool)>,
}

impl Group {
    /// Makes the groups with their limits: `max_processes` tasks, `memory` bytes.
    /// On an error, the groups already made are removed again.
    pub(crate) fn create(max_processes: u64, memory: u64) -> io::Result<Group> {
        Self::create_in(parents(), max_processes, memory)
    }

    /// [`Group::create`] under `parents` (`pids`, `memory`).
    pub(super) fn create_in(
        parents: &[Option<Parent>; 2],
        max_processes: u64,
        memory: u64,
    ) -> io::Result<Group> {
        sweep();
        let name = unique_name("clawbus");
        let mut group = Group { dirs: Vec::new() };
        for (controller, limit) in [
            (Controller::Pids, max_processes),
            (Controller::Memory, memory),
        ] {
            let Some(parent) = &parents[controller as usize] else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("no {} cgroup the daemon may use", controller.name()),
                ));
            };
            let dir = parent.dir.join(&name);
            // In cgroup v2 both controllers live in one group.
            if !group.dirs.iter().any(|(_, d, _)| *d == dir) {
                std::fs::create_dir(&dir)?;
            }
            group.dirs.push((controller, dir.clone(), parent.v2));
            let limit = limit.to_string();
            match (controller, parent.v2) {
                (Controller::Pids, _) => std::fs::write(dir.join("pids.max"), &limit)?,
                (Controller::Memory, true) => {
                    std::fs::write(dir.join("memory.max"), &limit)?;
                    // Best effort: not every kernel has swap accounting.
                    let _ignored = std::fs::write(dir.join("memory.swap.max"), "0");
                }
                (Controller::Memory, false) => {
                    std::fs::write(dir.join("memory.limit_in_bytes"), &limit)?;
                    let _ignored = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &limit);
                }
            }
        }
        Ok(group)
    }

    /// The `cgroup.procs` files the command's first process writes its pid to.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = Vec::new();
        for (_, d, _) in &self.dirs {
            let file = d.join("cgroup.procs");
            if !files.contains(&file) {
                files.push(file);
            }
        }
        files
    }

    /// Whether `controller`'s limit stopped something during the run.
    pub(crate) fn hit(&self, controller: Controller) -> bool {
        let Some((_, dir, v2)) = self.dirs.iter().find(|(c, _, _)| *c == controller) else {
            return false;
        };
        let (file, key) = match (controller, v2) {
            (Controller::Pids, _) => ("pids.events", "max"),
            (Controller::Memory, true) => ("memory.events", "oom_kill"),
            (Controller::Memory, false) => ("memory.oom_control", "oom_kill"),
        };
        std::fs::read_to_string(dir.join(file)).is_ok_and(|text| {
            text.lines().any(|l| {
                l.split_once(' ')
                    .is_some_and(|(k, v)| k == key && v.trim().parse::<u64>().is_ok_and(|n| n > 0))
            })
        })
    }

    /// Kills whatever is left in the groups and removes them (later, if a process is still
    /// exiting).
    pub(crate) async fn close(mut self) {
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.dedup_by(|a, b| a.1 == b.1);
        for (_, dir, v2) in &dirs {
            if *v2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                continue;
            }
            for _ in 0..100 {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = procs
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                if pids.is_empty() {
                    break;
                }
                for pid in pids.into_iter().filter_map(rustix::process::Pid::from_raw) {
                    match rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
                        Ok(()) => {}
                        Err(e) if e == rustix::io::Errno::SRCH => {}
                        Err(e) => {
                            tracing::warn!(pid = pid.as_raw_nonzero().get(), error = %e, "Could not kill a sandboxed process.")
                        }
                    }
                }
                tokio::task::yield_now().await;
            }
        }
        for (_, dir, _) in dirs {
            for _ in 0..50 {
                if std::fs::remove_dir(&dir).is_ok() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            if dir.exists() {
                leave(dir);
            }
        }
    }
}

/// A group dropped before [`Group::close`] (a cancelled run, a failed `create`): its processes
/// die with bubblewrap (killed on drop); the folders are removed now or by a later sweep.
impl Drop for Group {
    fn drop(&mut self) {
        self.dirs.dedup_by(|a, b| a.1 == b.1);
        for (_, dir, _) in self.dirs.drain(..) {
            if std::fs::remove_dir(&dir).is_err() && dir.exists() {
                leave(dir);
            }
        }
    }
}

/// Remembers a group to remove later.
fn leave(dir: PathBuf) {
    match LEFT_OVER.lock() {
        Ok(mut l) => l.push(dir),
        Err(poisoned) => poisoned.into_inner().push(dir),
    }
}

/// `<prefix>-<daemon pid>-<n>`, unique in this process.
pub(crate) fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the groups an earlier run left behind, when they are empty now.
fn sweep() {
    let mut left = match LEFT_OVER.lock() {
        Ok(l) => l,
        Err(poisoned) => poisoned.into_inner(),
    };
    left.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
}

fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!(dir = %dir.display(), error = %e, "Could not remove a cgroup.");
    }
}
