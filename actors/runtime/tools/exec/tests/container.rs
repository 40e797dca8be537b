//! `exec` with `backend = "docker" | "podman"`: without a daemon nothing runs (on this machine for
//! real when the docker CLI is installed and no daemon is); with one, the command runs in a
//! container under the limits (skipped with a printed reason when no daemon answers).

use super::sandboxed::{set, tight};
use super::*;
use crate::tools::sandbox::{Sandbox, container};
use clawbus_core::config::{SandboxBackend, SandboxDef};

fn docker(def: SandboxDef) -> SandboxDef {
    SandboxDef {
        backend: set(SandboxBackend::Docker),
        ..def
    }
}

#[tokio::test]
async fn docker_without_a_daemon_fails_closed_and_runs_nothing() {
    let daemon = std::env::var("DOCKER_HOST").ok();
    if container::reachable(SandboxBackend::Docker, daemon.as_deref()).is_ok() {
        println!("skipped: docker_without_a_daemon_fails_closed: a Docker daemon answers here");
        return;
    }
    let f = fx();
    let exec = ExecDef {
        security: ExecSecurity::Full,
        ..ExecDef::default()
    };
    let tool = f
        .tool(exec, &[])
        .with_sandbox(Sandbox::new(docker(tight())));
    let out = f.exec(&tool, "touch ran.txt", None).await;
    assert_eq!(error_type(&out), "sandbox_unavailable", "{}", out.text);
    assert!(
        !f.ws.join("ran.txt").exists(),
        "nothing ran outside the sandbox"
    );
}

#[tokio::test]
async fn docker_runs_the_command_read_only_without_network_under_its_limits() {
    let daemon = std::env::var("DOCKER_HOST").ok();
    if let Err(e) = container::reachable(SandboxBackend::Docker, daemon.as_deref()) {
        println!("skipped: docker_runs_the_command: {e}");
        return;
    }
    let f = fx();
    let exec = ExecDef {
        security: ExecSecurity::Full,
        shell: true,
        ..ExecDef::default()
    };
    let tool = f
        .tool(exec, &[])
        .with_sandbox(Sandbox::new(docker(tight())));
    let probe = "echo x > /outside.txt || echo no-root; echo x > inside.txt && echo wrote-ws; \
                 cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; \
                 echo nets: $(ls /sys/class/net)";
    let out = f.exec(&tool, probe, None).await;
    for want in ["no-root", "wrote-ws", "32", "nets: lo\n"] {
        assert!(out.text.contains(want), "{want}: {}", out.text);
    }
    let out = f.exec(&tool, "sleep 30", Some(1)).await;
    assert_eq!(error_type(&out), "limit_exceeded", "{}", out.text);
}
