//! `[sandbox]` on a real `clawbus up` child: a task's `exec` runs under bubblewrap, sees none of
//! the daemon's secrets, state folder or token; a missing backend fails closed, with the log line
//! and the `clawbus check` error naming what to install. Skipped with a printed reason where the
//! host cannot sandbox (a failure under `CI=true`).

use crate::support::{NET, Project, tool_results};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::io::Read;
use std::process::{Child, Command, Stdio};

/// The `mock` provider plus a `[sandbox]` on for every session, and an agent that may run any
/// command line.
fn configure(p: &Project, server: &ScriptedServer) {
    p.with_mock_and(
        &server.base_url(),
        "[sandbox]\nmode = \"all\"\nenv = [\"SANDBOX_SETTING\"]\n",
    )
    .write(
        "agents.d/coder.toml",
        "[exec]\nsecurity = \"full\"\nshell = true\n",
    );
}

/// Whether this host can sandbox; prints why not.
fn usable(p: &Project) -> bool {
    let problems = clawbus::tools::sandbox::host_problems(&p.load());
    let Some(problem) = problems.first() else {
        return true;
    };
    println!("skipped: {problem}");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must be able to sandbox: {problem}"
    );
    false
}

/// Starts `clawbus up` (with `env`), posts one waited task, stops the daemon; the task's answer
/// and the daemon's stderr.
async fn one_task(p: &Project, env: &[(&str, &str)]) -> (Value, String) {
    let mut cmd = p.clawbus();
    cmd.args(["up", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child: Child = cmd.spawn().unwrap();
    let line = crate::support::first_line_async(child.stdout.take().unwrap()).await;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let token = std::fs::read_to_string(p.state_dir().join("gateway.token")).unwrap();
    let body: Value = reqwest::Client::new()
        .post(format!("{url}/v1/agents/coder/tasks"))
        .bearer_auth(token.trim())
        .json(&json!({ "text": "run it", "wait": true, "session": "chat" }))
        .timeout(NET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    crate::support::wait_child_async(child).await;
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    (body, log)
}

#[actix_rt::test]
async fn a_daemon_runs_exec_in_the_sandbox_without_its_secrets_state_or_token() {
    let p = Project::new();
    let state = p.state_dir();
    let command = format!(
        "sh -c 'cat /proc/sys/kernel/hostname; env; test -e {s}/gateway.token || echo no-token; \
         echo state: $(ls -A {s})'",
        s = state.display()
    );
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": command })),
        Turn::text("done"),
    ])
    .await;
    configure(&p, &server);
    if !usable(&p) {
        return;
    }
    let env = [
        ("CLAWBUS_PLANTED_SECRET", "s3cr3t-planted-value"),
        ("SANDBOX_SETTING", "visible-value"),
    ];
    let (body, _) = one_task(&p, &env).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let out = &tool_results(&server.requests()[1])[0];
    assert!(
        out.starts_with("exit code: 0\nsandbox\n"),
        "ran inside: {out}"
    );
    assert!(
        out.contains("SANDBOX_SETTING=visible-value"),
        "listed names pass: {out}"
    );
    assert!(
        !out.contains("s3cr3t-planted-value"),
        "the daemon's secret stays out: {out}"
    );
    assert!(out.contains("no-token"), "{out}");
    assert!(
        out.contains("\nstate: workspaces\n"),
        "of the state folder only the path to the workspace exists: {out}"
    );
}

#[actix_rt::test]
async fn a_missing_bubblewrap_fails_closed_with_a_log_line_and_a_check_error() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "touch ran.txt" })),
        Turn::text("done"),
    ])
    .await;
    let p = Project::new();
    configure(&p, &server);
    // A PATH with the command but without bwrap.
    let bin = p.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink("/usr/bin/touch", bin.join("touch")).unwrap();
    let path = bin.display().to_string();

    let out = crate::support::run_cmd({
        let mut c = p.clawbus();
        c.arg("check").env("PATH", &path);
        c
    })
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("clawbus.toml:2:8: field \"sandbox.mode\": sandbox mode \"all\" cannot run here: bwrap is not installed (install the bubblewrap package, e.g. `apt-get install bubblewrap`)"),
        "{stdout}"
    );

    let (body, log) = one_task(&p, &[("PATH", &path)]).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let out: Value = serde_json::from_str(&tool_results(&server.requests()[1])[0]).unwrap();
    assert_eq!(out["error"]["type"], "sandbox_unavailable", "{out}");
    let ws = p.state_dir().join("workspaces/coder");
    assert!(!ws.join("ran.txt").exists(), "nothing ran unsandboxed");
    assert!(
        log.contains("Sandbox unavailable; the command was not run.")
            && log.contains("bwrap is not installed"),
        "the operator's log says why: {log}"
    );
}

#[test]
fn explain_names_the_line_that_set_each_value_and_tools_says_what_runs_sandboxed() {
    let p = Project::new();
    p.write(
        "clawbus.toml",
        "[sandbox]\nmode = \"non-main\"\nmemory_mb = 256\n",
    )
    .write(
        "agents.d/coder.toml",
        "[exec]\nsecurity = \"full\"\n[sandbox]\nworkspace = \"ro\"\n",
    );
    let json = |args: &[&str]| -> Value {
        let out = crate::support::output({
            let mut c = p.clawbus();
            c.args(args);
            c
        });
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let e = json(&["sandbox", "explain", "--agent", "coder", "--json"]);
    assert_eq!(e["sandboxed"], true, "{e}");
    let source = |name: &str| {
        e["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["setting"] == name)
            .map(|s| {
                (
                    s["value"].clone(),
                    s["source"].as_str().unwrap().to_string(),
                )
            })
            .unwrap()
    };
    assert_eq!(
        source("sandbox.mode"),
        (json!("\"non-main\""), "clawbus.toml:2:8".into())
    );
    assert_eq!(
        source("sandbox.memory_mb"),
        (json!("256"), "clawbus.toml:3:13".into())
    );
    assert_eq!(
        source("sandbox.workspace"),
        (json!("\"ro\""), "agents.d/coder.toml:4:13".into())
    );
    assert_eq!(
        source("sandbox.network"),
        (json!("\"none\""), "default".into())
    );
    let ws = e["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("workspaces/coder"))
        .cloned();
    assert_eq!(ws.unwrap()["how"], "ro", "{e}");
    assert_eq!(e["tools"], json!(["exec"]));

    let main = json(&[
        "sandbox",
        "explain",
        "--agent",
        "coder",
        "--session",
        "agent:coder:main",
        "--json",
    ]);
    assert_eq!(
        main["sandboxed"], false,
        "non-main spares the main session: {main}"
    );

    let tools = json(&["tools", "--agent", "coder", "--json"]);
    assert_eq!(tools["sandboxed"]["tools"], json!(["exec"]), "{tools}");
    assert_eq!(tools["sandboxed"]["mode"], "non-main", "{tools}");
}

#[actix_rt::test]
async fn check_names_the_line_of_a_sandboxed_mcp_server_the_host_cannot_sandbox() {
    let p = Project::new();
    p.write(
        "clawbus.toml",
        "[mcp.servers.files]\ncommand = \"/usr/bin/true\"\nsandbox = true\n",
    )
    .write("agents.d/coder.toml", "");
    // A PATH without bwrap.
    let bin = p.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let out = crate::support::run_cmd({
        let mut c = p.clawbus();
        c.arg("check").env("PATH", bin.display().to_string());
        c
    })
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("clawbus.toml:3:11: field \"mcp.servers.files.sandbox\": MCP server \"files\" cannot run sandboxed here: bwrap is not installed"),
        "{stdout}"
    );
}
