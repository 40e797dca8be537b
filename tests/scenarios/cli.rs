//! The `clawbus` binary as a script would use it.

use crate::support::Project;
use crate::support::{run_cmd, succeeded};
use std::process::{Command, Stdio};

#[test]
fn check_reports_every_problem_in_every_file_with_its_line() {
    let project = Project::new();
    project
        .write("clawbus.toml", "[gateway]\nport = \"eighty\"\n")
        .write("agents.d/good.toml", "description = \"fine\"\n")
        .write(
            "agents.d/typo.toml",
            "description = \"x\"\nmodle = \"scripted/echo\"\n",
        )
        .write("agents.d/badprov.toml", "\n\nmodel = \"opnai/gpt\"\n");
    let out = project.clawbus().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "any ✗ makes check fail:\n{stdout}"
    );
    assert!(
        stdout.contains("✓") && stdout.contains("good.toml"),
        "{stdout}"
    );
    assert!(
        stdout.contains("clawbus.toml:2:8: field \"gateway.port\""),
        "bad type, with line and column:\n{stdout}"
    );
    assert!(
        stdout.contains("typo.toml:2:1: field \"modle\""),
        "unknown field:\n{stdout}"
    );
    assert!(
        stdout.contains("badprov.toml:3:9: field \"model\": unknown provider \"opnai\""),
        "unknown provider:\n{stdout}"
    );
}

#[test]
fn the_shipped_configuration_checks_clean() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_clawbus"))
        .current_dir(root)
        .env_remove("CLAWBUS_MODEL")
        .args(["check", "--config", "clawbus.toml", "--agents", "agents.d"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[actix_rt::test]
async fn post_wait_prints_the_reply_and_uses_exit_codes() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.echo",
        "hello there",
        "--wait",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    assert_eq!(succeeded(&out).trim(), "echo: hello there");

    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.echo",
        "again",
        "--wait",
        "--json",
        "--request-id",
        "r1",
        "--url",
        &daemon.url(),
    ]);
    let first: serde_json::Value = serde_json::from_slice(&run_cmd(cmd).await.stdout).unwrap();
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.echo",
        "again",
        "--wait",
        "--json",
        "--request-id",
        "r1",
        "--url",
        &daemon.url(),
    ]);
    let second: serde_json::Value = serde_json::from_slice(&run_cmd(cmd).await.stdout).unwrap();
    assert_eq!(first["duplicate"], false);
    assert_eq!(second["duplicate"], true);
    assert_eq!(first["task_id"], second["task_id"]);

    let mut cmd = project.clawbus();
    cmd.args(["post", "researcher", "x", "--url", &daemon.url()]);
    assert_eq!(
        run_cmd(cmd).await.status.code(),
        Some(2),
        "a topic that is not agent.<id> is a usage error"
    );
    let mut cmd = project.clawbus();
    cmd.args(["post", "agent.echo", "x", "--url", &daemon.url()])
        .env("CLAWBUS_TOKEN", "wrong");
    let out = run_cmd(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn post_wait_times_out_with_exit_code_3() {
    let server =
        clawbus::testkit::ScriptedServer::start(vec![clawbus::testkit::Turn::hang()]).await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "60s", 0)
        .write("agents.d/slow.toml", "");
    let daemon = project.start().await;
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.slow",
        "x",
        "--wait",
        "--timeout",
        "200ms",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn up_serves_until_sigterm_and_post_reaches_it() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let mut child = project
        .clawbus()
        .args(["up", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = crate::support::first_line(child.stdout.take().unwrap());
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line must announce the address: {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let out = project
        .clawbus()
        .args(["post", "agent.echo", "hi", "--wait", "--url", &url])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "echo: hi",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SAFETY-free signal delivery through the kill command.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = crate::support::wait_child(child);
    assert!(exit.success(), "SIGTERM is a clean shutdown, got {exit}");
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn check_refuses_a_named_config_that_is_missing_and_checks_rules_files() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let out = project
        .clawbus()
        .args(["check", "--config", "clawbsu.toml"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a typo in --config is a usage error"
    );
    assert!(
        stderr(&out).contains("--config clawbsu.toml: file not found"),
        "{}",
        stderr(&out)
    );
    let out = project.clawbus().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the default file may be absent");

    project
        .write("agents.d/bot.toml", "model = \"scripted/bot\"\n")
        .write(
            "agents.d/bot/bot.rules.toml",
            "[[rule]]\nmatch = \"hi\"\nreply = \"hello\"\nthen = \"x\"\n",
        );
    let out = project.clawbus().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "✗ agents.d/bot/bot.rules.toml\n  agents.d/bot/bot.rules.toml:4:8: field \"then\""
        ),
        "a rules file `up` would refuse is a check problem:\n{stdout}"
    );
}

#[test]
fn post_refuses_bad_flags_before_posting_and_says_why_the_gateway_is_unreachable() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let cases: [(&[&str], &str); 4] = [
        (&["--timeout", "0s"], "--timeout \"0s\": out of range"),
        (&["--timeout", "2h"], "--timeout \"2h\": out of range"),
        (
            &["--url", "localhost:18789"],
            "--url \"localhost:18789\": not an http(s) URL",
        ),
        (&["--url", &url], "Connection refused"),
    ];
    for (flags, expected) in cases {
        let out = project
            .clawbus()
            .args(["post", "agent.echo", "hi", "--wait"])
            .args(flags)
            .env("CLAWBUS_TOKEN", "t")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{flags:?}: {}",
            stderr(&out)
        );
    }
}

#[actix_rt::test]
async fn ids_and_keys_reach_the_gateway_whole_and_its_errors_are_shown() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["sessions", "show", "agent:echo:api:task:a/b?c"],
            2,
            "no session agent:echo:api:task:a/b?c",
        ),
        (&["tasks", "show", "a/b"], 2, "\"a/b\" is not a task id"),
        (
            &["tasks", "cancel", "01a22a3a-86ac-7521-a653-79791b08c431"],
            2,
            "no task 01a22a3a-86ac-7521-a653-79791b08c431",
        ),
        (
            &["approvals", "allow", "nope"],
            2,
            "no approval request \"nope\"",
        ),
        (&["post", "agent.a?b", "hi"], 2, "no agent \"a?b\""),
    ];
    for (args, code, expected) in cases {
        let mut cmd = project.clawbus();
        cmd.args(args).args(["--url", &daemon.url()]);
        let out = run_cmd(cmd).await;
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let mut cmd = project.clawbus();
    cmd.args(["approvals", "--url", &daemon.url()]);
    let out = run_cmd(cmd).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no pending approval requests\n"
    );
    daemon.shutdown().await;
}

#[test]
fn up_that_cannot_start_exits_2_with_the_reason_and_no_panic() {
    let project = Project::new();
    project
        .write("agents.d/bot.toml", "model = \"scripted/bot\"\n")
        .write(
            "agents.d/bot/bot.rules.toml",
            "[[rule]]\nmatch = \"(\"\nreply = \"x\"\n",
        );
    let out = project
        .clawbus()
        .args(["up", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bot.rules.toml:2:9: field \"match\""),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn the_cli_presents_the_token_the_gateway_takes_from_token_env() {
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            "[gateway]\ntoken_env = \"CLAWBUS_TEST_GATEWAY_TOKEN\"\n",
        )
        .write("agents.d/echo.toml", "");
    let token = "token-from-the-environment-0123456789";
    let mut child = project
        .clawbus()
        .args(["up", "--port", "0"])
        .env("CLAWBUS_TEST_GATEWAY_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = crate::support::first_line(child.stdout.take().unwrap());
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_default()
        .to_string();
    let out = project
        .clawbus()
        .args(["post", "agent.echo", "hi", "--wait", "--url", &url])
        .env("CLAWBUS_TEST_GATEWAY_TOKEN", token)
        .output()
        .unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    crate::support::wait_child(child);
    assert!(!project.state_dir().join("gateway.token").exists());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "echo: hi",
        "{}",
        stderr(&out)
    );
}
