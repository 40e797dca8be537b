//! Control groups for one sandboxed command: a `pids` group for `max_processes` and a `memory`
//! group for `memory_mb`, which hold for root as for anyone (`RLIMIT_NPROC` does not bind root).
//!
//! The daemon's own groups are found in `/proc/self/cgroup` and `/proc/self/mountinfo` (cgroup v1
//! hierarchies, or v2 when the daemon's group delegates the controller); a child group is made per
//! command, the command's first process joins it before `exec`, and after the run what is left in
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
struct Parent {
    /// The daemon's own group folder.
    dir: PathBuf,
    /// A cgroup v2 folder (else v1).
    v2: bool,
}

/// The parents found for `pids` and `memory`, looked up once.
fn parents() -> &'static [Option<Parent>; 2] {
    static FOUND: OnceLock<[Option<Parent>; 2]> = OnceLock::new();
    FOUND.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        [
            find(&mounts, &own, Controller::Pids),
            find(&mounts, &own, Controller::Memory),
        ]
    })
}

/// The daemon's group of `controller` when a child group can be made there.
fn find(mountinfo: &str, own: &str, controller: Controller) -> Option<Parent> {
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
        if v2 {
            let delegated = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                .is_ok_and(|s| s.split_whitespace().any(|c| c == name));
            if !delegated {
                continue;
            }
        }
        return Some(Parent { dir, v2 });
    }
    None
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
        sweep();
        let name = unique_name("clawbus");
        let mut group = Group { dirs: Vec::new() };
        for (controller, limit) in [
            (Controller::Pids, max_processes),
            (Controller::Memory, memory),
        ] {
            let Some(parent) = &parents()[controller as usize] else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("no {} cgroup the daemon may use", controller.name()),
                ));
            };
            let dir = parent.dir.join(&name);
            std::fs::create_dir(&dir)?;
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
        self.dirs
            .iter()
            .map(|(_, d, _)| d.join("cgroup.procs"))
            .collect()
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
        let dirs = std::mem::take(&mut self.dirs);
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
fn unique_name(prefix: &str) -> String {
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
