//! The sandbox's command line and its refusals; running commands in it is tested through `exec`
//! (`tools::exec::tests::sandboxed`).

mod cgroup_v2;
mod container;

use super::*;
use clawbus_core::config::{Bind, Set, WorkspaceAccess};

fn def(workspace: WorkspaceAccess) -> SandboxDef {
    SandboxDef {
        workspace: Set {
            value: workspace,
            origin: None,
        },
        ..SandboxDef::default()
    }
}

#[test]
fn the_network_and_every_namespace_are_new_and_the_workspace_is_mounted_as_set() {
    let ws = Path::new("/srv/ws");
    let args: Vec<String> = bwrap::args(&def(WorkspaceAccess::Ro), ws, true, &[])
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    let joined = args.join(" ");
    assert!(
        joined.starts_with("--unshare-all --unshare-user"),
        "{joined}"
    );
    assert!(
        !joined.contains("--share-net"),
        "no network unless asked: {joined}"
    );
    assert!(joined.contains("--ro-bind /srv/ws /srv/ws"), "{joined}");
    assert!(joined.contains("--tmpfs /tmp"), "{joined}");
    assert!(joined.contains("--cap-drop ALL"), "{joined}");
    assert!(
        joined.ends_with("--remount-ro / --chdir /srv/ws --"),
        "{joined}"
    );
    let none: Vec<String> = bwrap::args(&def(WorkspaceAccess::None), ws, false, &[])
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    assert!(
        !none.iter().any(|a| a == "/srv/ws"),
        "workspace = none mounts nothing: {none:?}"
    );
    assert!(none.join(" ").ends_with("--chdir /tmp --"));
}

#[test]
fn a_missing_backend_is_named_with_its_package() {
    let sandbox = Sandbox::new(SandboxDef::default()).with_search_path(vec!["/nonexistent".into()]);
    let err = sandbox
        .prepare(Request {
            agent: "tester",
            program: Path::new("/bin/true"),
            argv: &["true".to_string()],
            workspace: Path::new("/tmp"),
            env: Vec::new(),
        })
        .expect_err("nothing runs without bwrap");
    assert_eq!(
        err.to_string(),
        "bwrap is not installed (install the bubblewrap package, e.g. `apt-get install bubblewrap`)"
    );
}

#[test]
fn a_missing_bind_is_refused_before_anything_runs() {
    let mut d = SandboxDef::default();
    d.binds.value = vec![Bind {
        path: "/nonexistent/data".into(),
        writable: false,
    }];
    let sandbox = Sandbox::new(d);
    if sandbox.locate().is_err() {
        println!("skipped: bubblewrap is not installed");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must install bubblewrap"
        );
        return;
    }
    let err = sandbox
        .prepare(Request {
            agent: "tester",
            program: Path::new("/bin/true"),
            argv: &["true".to_string()],
            workspace: Path::new("/tmp"),
            env: Vec::new(),
        })
        .expect_err("a missing bind is refused");
    assert!(
        err.to_string().contains("/nonexistent/data does not exist"),
        "{err}"
    );
}

#[tokio::test]
async fn file_tools_follow_the_workspace_setting_in_sandboxed_sessions_only() {
    use crate::tools::sandbox::gate::{Access, WorkspaceGate};
    use crate::tools::{ReadTool, ToolContext, ToolSet, WriteTool};
    use clawbus_core::config::SandboxMode;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    let agent = AgentId::new("tester");
    let mut ctx = ToolContext {
        workspace: ws.clone(),
        agent: agent.clone(),
        session: SessionKey::named(&agent, "chat"),
        channel: "api".into(),
        run: None,
    };
    let mut d = def(WorkspaceAccess::Ro);
    d.mode.value = SandboxMode::NonMain;
    let sandbox = Sandbox::new(d);
    let tools = ToolSet::default()
        .with(WorkspaceGate::new(ReadTool, sandbox.clone(), Access::Read))
        .with(WorkspaceGate::new(WriteTool, sandbox, Access::Write));
    let write = r#"{"path":"b.txt","content":"x"}"#;
    let out = tools.invoke(&ctx, "write", write, 10_000).await;
    assert!(
        out.is_error && out.text.contains("sandbox.workspace = \\\"ro\\\""),
        "{}",
        out.text
    );
    assert!(!ws.join("b.txt").exists(), "ro refuses a write");
    let out = tools
        .invoke(&ctx, "read", r#"{"path":"a.txt"}"#, 10_000)
        .await;
    assert!(
        !out.is_error && out.text.contains("hello"),
        "ro still reads: {}",
        out.text
    );
    ctx.session = SessionKey::main(&agent);
    let out = tools.invoke(&ctx, "write", write, 10_000).await;
    assert!(
        !out.is_error,
        "the main session is not sandboxed under non-main: {}",
        out.text
    );
}

#[test]
fn explain_shows_the_allowed_names_the_proxy_socket_and_the_forwarder() {
    use clawbus_core::config::NetworkMode;
    let mut d = def(WorkspaceAccess::Rw);
    d.network.value = NetworkMode::Allow;
    d.allow_domains.value = vec!["pypi.org".into(), "*.pythonhosted.org".into()];
    let rows = explain::settings(&d);
    let row = rows
        .iter()
        .find(|r| r.setting == "sandbox.allow_domains")
        .unwrap();
    assert_eq!(row.value, r#"["pypi.org", "*.pythonhosted.org"]"#);
    let net = explain::network(&d);
    assert!(
        net.starts_with("allow: only pypi.org, *.pythonhosted.org through the daemon's proxy")
            && net.contains("http://127.0.0.1:3128"),
        "{net}"
    );
    let mounts = explain::mounts(&d, Path::new("/srv/ws"));
    let how = |p: &str| {
        mounts
            .iter()
            .find(|m| m.path == p)
            .map(|m| m.how.clone())
            .unwrap_or_default()
    };
    assert!(
        how("/run/clawbus/proxy.sock").contains("proxy's socket"),
        "{mounts:?}"
    );
    assert!(
        how("/run/clawbus/forward").contains("127.0.0.1:3128"),
        "{mounts:?}"
    );
    d.network.value = NetworkMode::None;
    let none = explain::mounts(&d, Path::new("/srv/ws"));
    assert!(
        !none.iter().any(|m| m.path.starts_with("/run/clawbus")),
        "{none:?}"
    );
}
