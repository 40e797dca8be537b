//! `sandbox = true`: the test server run under bubblewrap with the settings of `[sandbox]`, each
//! promise observed from inside through the server's own tools. Skipped with a printed reason
//! when bubblewrap, the cgroups or the MCP SDK are missing (a failure under `CI=true`).

use super::*;
use serde_json::json;

/// A project whose `[mcp.servers.t]` runs a copy of the test server (in a folder of this test's
/// own, so its processes are found by that path) with `sandbox = true`; `[sandbox]` binds that
/// folder and the Python's environment read-only (the sandbox's root holds only the system
/// folders), plus `extra_bind`. The project folder itself is not visible inside.
fn sandboxed(
    python: &str,
    extra_bind: Option<&Path>,
) -> (tempfile::TempDir, Config, tempfile::TempDir) {
    let own = tempfile::tempdir().unwrap();
    let script = own.path().join("server.py");
    std::fs::copy(server_script(), &script).unwrap();
    let mut binds = vec![format!("{}:ro", own.path().display())];
    // A venv's python lives in <venv>/bin, its packages under <venv>/lib; it links to an
    // interpreter whose own prefix (e.g. under ~/.pyenv) must be there too.
    let interpreter = std::fs::canonicalize(python).unwrap();
    for prefix in [Path::new(python), interpreter.as_path()] {
        let root = prefix.parent().and_then(Path::parent).unwrap();
        let bind = format!("{}:ro", root.display());
        if !root.starts_with("/usr") && !binds.contains(&bind) {
            binds.push(bind);
        }
    }
    if let Some(p) = extra_bind {
        binds.push(format!("{}:ro", p.display()));
    }
    let toml = format!(
        "[sandbox]\nbinds = {binds:?}\n\n[mcp.servers.t]\ncommand = {python:?}\nargs = [{:?}]\nenv = [\"CARGO_MANIFEST_DIR\"]\nsandbox = true\n",
        script.display().to_string()
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    (dir, config, own)
}

/// The host's processes of the server copy in `own` (the sandbox's bubblewraps and the server).
fn processes(own: &Path) -> Vec<u32> {
    clawbus_testkit::processes_naming(own)
}

#[tokio::test]
async fn a_sandboxed_server_has_its_own_pids_no_network_no_host_files_and_only_its_variables() {
    let Some(py) = python() else { return };
    if !crate::tools::sandbox::usable_in_tests() {
        return;
    }
    let (dir, config, _own) = sandboxed(&py, None);
    let host_file = dir.path().join("host.txt");
    std::fs::write(&host_file, "host secret").unwrap();
    let mcp = McpServers::start(&config.mcp).await;
    let status = mcp.status().await;
    assert_eq!(status[0].error, None, "{status:?}");
    let set = tools(&config, &mcp);
    let add = call(&set, dir.path(), "mcp__t__add", json!({"a": 2, "b": 3})).await;
    assert!(add.text.contains("sum=5"), "it answers: {}", add.text);
    // Its own pid namespace: bubblewrap is 1 inside, the server a few after it.
    let pid = pid_in(&call(&set, dir.path(), "mcp__t__pid", json!({})).await.text);
    assert!(pid < 10, "a pid of the sandbox's namespace, got {pid}");
    let read = call(
        &set,
        dir.path(),
        "mcp__t__read",
        json!({"path": host_file.display().to_string()}),
    )
    .await;
    assert!(
        read.text.contains("error:") && !read.text.contains("host secret"),
        "the host's files are not there: {}",
        read.text
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let net = call(&set, dir.path(), "mcp__t__connect", json!({"port": port})).await;
    assert!(
        net.text.contains("error:") && !net.text.contains("connected"),
        "no network: {}",
        net.text
    );
    assert_eq!(
        listener.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "the loopback server saw no connection"
    );
    let names = call(&set, dir.path(), "mcp__t__env_names", json!({})).await;
    assert!(names.text.contains("CARGO_MANIFEST_DIR"), "{}", names.text);
    assert!(
        !names.text.contains("CARGO_PKG_NAME"),
        "only the variables its env names: {}",
        names.text
    );
    let home = call(&set, dir.path(), "mcp__t__getenv", json!({"name": "HOME"})).await;
    assert!(
        home.text.contains("HOME is /tmp"),
        "the sandbox's HOME: {}",
        home.text
    );
    mcp.stop().await;
}

#[tokio::test]
async fn a_sandboxed_server_that_died_is_started_again_in_a_sandbox_and_stopped_with_it() {
    let Some(py) = python() else { return };
    if !crate::tools::sandbox::usable_in_tests() {
        return;
    }
    let (dir, config, own) = sandboxed(&py, None);
    let mcp = McpServers::start(&config.mcp).await;
    let set = tools(&config, &mcp);
    let first = processes(own.path());
    assert!(!first.is_empty(), "the server runs");
    for pid in &first {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(*pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    let again = call(&set, dir.path(), "mcp__t__pid", json!({})).await;
    assert!(!again.is_error, "restarted: {}", again.text);
    assert!(pid_in(&again.text) < 10, "sandboxed again: {}", again.text);
    let second = processes(own.path());
    assert!(
        !second.is_empty() && second.iter().all(|p| !first.contains(p)),
        "new processes: {first:?} then {second:?}"
    );
    mcp.stop().await;
    assert_eq!(
        processes(own.path()),
        Vec::<u32>::new(),
        "nothing left after stop"
    );
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_set_up_starts_nothing_and_says_why() {
    let Some(py) = python() else { return };
    if !crate::tools::sandbox::usable_in_tests() {
        return;
    }
    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let (dir, config, own) = sandboxed(&py, Some(&missing));
    let mcp = McpServers::start(&config.mcp).await;
    let error = mcp.status().await[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("sandbox") && error.contains("gone"),
        "the status names the sandbox and what it lacks: {error}"
    );
    assert!(mcp.tool_names().is_empty(), "no tools offered");
    let set = tools(&config, &mcp);
    let out = call(&set, dir.path(), "mcp__t__add", json!({"a": 1, "b": 1})).await;
    assert!(out.is_error, "{}", out.text);
    assert_eq!(
        processes(own.path()),
        Vec::<u32>::new(),
        "nothing was started"
    );
    mcp.stop().await;
}
