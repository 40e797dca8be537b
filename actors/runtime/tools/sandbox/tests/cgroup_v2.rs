//! The cgroup v2 path over a temporary folder standing in for `/sys/fs/cgroup` (the machine the
//! tests were written on has cgroup v1 only): finding the daemon's group in the unified
//! hierarchy, delegating a controller to its children, and one command's group with its limits,
//! its `cgroup.procs`, its events and its kill.

use crate::tools::sandbox::cgroup::{Controller, DAEMON_LEAF, Group, find};
use std::fs;
use std::path::Path;

const PID: u32 = 4242;
const OWN: &str = "0::/system.slice/clawbus.service\n";

/// A unified hierarchy mounted at `root` (the temp folder), as `/proc/self/mountinfo` shows it.
fn mountinfo(root: &Path) -> String {
    format!(
        "25 1 0:22 / /proc rw - proc proc rw\n\
         30 25 0:26 / {} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        root.display()
    )
}

/// The daemon's group with `controllers` available and `subtree` already handed to children.
fn service(root: &Path, controllers: &str, subtree: &str) -> std::path::PathBuf {
    let dir = root.join("system.slice/clawbus.service");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("cgroup.controllers"), controllers).unwrap();
    fs::write(dir.join("cgroup.subtree_control"), subtree).unwrap();
    fs::write(dir.join("cgroup.procs"), format!("{PID}\n")).unwrap();
    dir
}

#[test]
fn a_delegated_v2_group_is_found_and_holds_each_commands_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = service(tmp.path(), "cpu memory pids", "memory pids");
    let info = mountinfo(tmp.path());
    let pids = find(&info, OWN, Controller::Pids, PID).expect("pids is delegated");
    let memory = find(&info, OWN, Controller::Memory, PID).expect("memory is delegated");
    assert!(pids.v2 && memory.v2);
    assert_eq!(pids.dir, dir);
    assert!(
        !dir.join(DAEMON_LEAF).exists(),
        "already delegated: the daemon stays where it is"
    );

    let group = Group::create_in(&[Some(pids), Some(memory)], 32, 64 << 20).unwrap();
    let files = group.procs_files();
    assert_eq!(files.len(), 1, "one group holds both controllers in v2");
    let child = files[0].parent().unwrap().to_path_buf();
    assert_eq!(
        child.parent().unwrap(),
        dir,
        "a child of the daemon's group"
    );
    assert_eq!(fs::read_to_string(child.join("pids.max")).unwrap(), "32");
    assert_eq!(
        fs::read_to_string(child.join("memory.max")).unwrap(),
        (64u64 << 20).to_string()
    );
    assert_eq!(
        fs::read_to_string(child.join("memory.swap.max")).unwrap(),
        "0"
    );
    assert!(files.iter().all(|f| f.ends_with("cgroup.procs")));
    assert!(!group.hit(Controller::Memory) && !group.hit(Controller::Pids));
    fs::write(
        child.join("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
    )
    .unwrap();
    fs::write(child.join("pids.events"), "max 7\n").unwrap();
    assert!(group.hit(Controller::Memory), "oom_kill in memory.events");
    assert!(group.hit(Controller::Pids), "max in pids.events");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(group.close());
    assert_eq!(
        fs::read_to_string(child.join("cgroup.kill")).unwrap(),
        "1",
        "v2 kills what is left with cgroup.kill"
    );
}

#[test]
fn an_available_controller_is_delegated_after_the_daemon_moves_to_a_leaf() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = service(tmp.path(), "cpu memory pids", "");
    let info = mountinfo(tmp.path());
    let pids = find(&info, OWN, Controller::Pids, PID).expect("pids can be delegated");
    assert_eq!(pids.dir, dir);
    assert_eq!(
        fs::read_to_string(dir.join(DAEMON_LEAF).join("cgroup.procs")).unwrap(),
        PID.to_string(),
        "the daemon moved into its leaf (no internal processes)"
    );
    assert_eq!(
        fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap(),
        "+pids"
    );
}

#[test]
fn a_controller_the_group_lacks_is_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    service(tmp.path(), "cpu pids", "pids");
    let info = mountinfo(tmp.path());
    assert!(find(&info, OWN, Controller::Memory, PID).is_none());
    assert!(find(&info, OWN, Controller::Pids, PID).is_some());
    // Only a v1 hierarchy of another controller: nothing for pids.
    let v1 = format!(
        "31 25 0:27 / {}/cpu rw - cgroup cgroup rw,cpu\n",
        tmp.path().display()
    );
    assert!(find(&v1, "4:cpu:/\n", Controller::Pids, PID).is_none());
}
