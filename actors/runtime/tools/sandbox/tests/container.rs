//! The docker and podman backends' command line, and their refusal without a daemon.

use crate::tools::sandbox::container::{self, args};
use crate::tools::sandbox::{Request, Sandbox, SandboxError};
use clawbus_core::config::{Bind, NetworkMode, SandboxBackend, SandboxDef, Set, WorkspaceAccess};
use std::path::Path;

fn set<T>(value: T) -> Set<T> {
    Set {
        value,
        origin: None,
    }
}

#[test]
fn the_container_command_line_holds_every_setting() {
    let def = SandboxDef {
        backend: set(SandboxBackend::Docker),
        workspace: set(WorkspaceAccess::Ro),
        memory_mb: set(256),
        max_processes: set(40),
        cpu_seconds: set(7),
        max_file_mb: set(2),
        max_open_files: set(99),
        binds: set(vec![Bind {
            path: "/opt/data".into(),
            writable: true,
        }]),
        ..SandboxDef::default()
    };
    let env = vec!["LANG".to_string()];
    let a = args(
        &def,
        Path::new("/srv/ws"),
        "clawbus-sandbox-1-0",
        (1000, 1000),
        &env,
    )
    .join(" ");
    for want in [
        "run --name clawbus-sandbox-1-0 --network none --read-only --cap-drop ALL",
        "--security-opt no-new-privileges --init",
        "--tmpfs /tmp:rw,nosuid,nodev,size=256m,mode=1777",
        "--memory 256m --memory-swap 256m --pids-limit 40",
        "--ulimit cpu=7:8 --ulimit fsize=2097152:2097152 --ulimit nofile=99:99 --ulimit core=0:0",
        "--user 1000:1000",
        "--volume /srv/ws:/srv/ws:ro --volume /opt/data:/opt/data:rw",
        "--workdir /srv/ws --env PATH=/usr/local/bin:/usr/bin:/bin --env HOME=/tmp --env LANG",
    ] {
        assert!(a.contains(want), "{want:?} in {a}");
    }
    assert!(
        a.ends_with(" debian:bookworm-slim"),
        "the image comes last: {a}"
    );
    assert!(!a.contains("LANG="), "values never appear in the argv: {a}");

    let mut host = def.clone();
    host.network = set(NetworkMode::Host);
    host.workspace = set(WorkspaceAccess::None);
    let a = args(&host, Path::new("/srv/ws"), "n", (0, 0), &[]).join(" ");
    assert!(
        a.contains("--network host") && a.contains("--workdir /tmp"),
        "{a}"
    );
    assert!(
        !a.contains("/srv/ws"),
        "workspace = none mounts nothing: {a}"
    );
}

#[test]
fn docker_without_its_daemon_is_refused_and_podman_needs_none() {
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("docker.sock");
    let host = format!("unix://{}", socket.display());
    let err = container::reachable(SandboxBackend::Docker, Some(&host)).unwrap_err();
    assert!(
        matches!(&err, SandboxError::NoDaemon { socket: s, .. } if *s == socket),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("the docker daemon is not reachable at"),
        "{err}"
    );
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    container::reachable(SandboxBackend::Docker, Some(&host)).expect("a socket that answers");
    container::reachable(SandboxBackend::Podman, Some(&host)).expect("podman has no daemon");
}

#[test]
fn allow_is_refused_with_a_container_backend() {
    let def = SandboxDef {
        backend: set(SandboxBackend::Podman),
        network: set(NetworkMode::Allow),
        allow_domains: set(vec!["example.com".into()]),
        ..SandboxDef::default()
    };
    let err = Sandbox::new(def)
        .prepare(Request {
            agent: "tester",
            program: Path::new("/bin/true"),
            argv: &["true".to_string()],
            workspace: Path::new("/tmp"),
            env: Vec::new(),
        })
        .expect_err("no proxy for containers yet");
    assert!(matches!(err, SandboxError::AllowNeedsBwrap), "{err}");
}
