//! Rough edges: closed pipes, refused query parameters, body and readiness limits, check's one
//! format for every file, duplicates said out loud.

use crate::support::{NET, Project, first_line, output, run_cmd, wait_child};
use serde_json::{Value, json};
use std::io::Read;
use std::process::Stdio;

#[test]
fn a_closed_stdout_ends_a_printing_command_quietly_with_exit_0() {
    let project = Project::new();
    let big: String = (0..20_000)
        .map(|i| format!("line {i} of a long AGENTS.md\n"))
        .collect();
    project
        .write(
            "agents.d/big.toml",
            "[prompt]\nfile_max_chars = 2000000\ntotal_max_chars = 2000000\n",
        )
        .write("agents.d/big/AGENTS.md", &big);
    // Far more than a pipe holds: the command is still writing when the reader goes away.
    let mut child = project
        .clawbus()
        .args(["prompt", "--agent", "big"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(child.stdout.take().unwrap());
    assert!(!line.is_empty());
    let mut stderr = child.stderr.take().unwrap();
    let exit = wait_child(child);
    let mut text = String::new();
    stderr.read_to_string(&mut text).unwrap();
    assert_eq!(exit.code(), Some(0), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn check_reports_an_agent_file_and_a_rules_file_in_one_run_in_one_format() {
    let project = Project::new();
    project
        .write("agents.d/bot.toml", "model = \"scripted/bot\"\nmodle = 1\n")
        .write(
            "agents.d/bot/bot.rules.toml",
            "[[rule]]\nmatch = \"hi\"\nrepyl = \"hello\"\n",
        );
    let mut cmd = project.clawbus();
    cmd.arg("check");
    let out = output(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "  agents.d/bot.toml:2:1: field \"modle\": unknown field \"modle\" (expected"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  agents.d/bot/bot.rules.toml:3:1: field \"repyl\": unknown field \"repyl\" (expected one of: match, reply, tool, args, then)"),
        "{stdout}"
    );
}

async fn call(
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token)
        .timeout(NET);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[actix_rt::test]
async fn unknown_query_parameters_are_refused_and_unknown_agents_named() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let (url, token) = (daemon.url(), daemon.token().to_string());
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let (status, body) = call(
        post.clone(),
        format!("{url}/v1/agents/echo/tasks?wait=true"),
        &token,
        Some(json!({ "text": "hi" })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("invalid_query") && body.contains("\\\"wait\\\""),
        "{body}"
    );
    for path in [
        "/v1/agents?x=1",
        "/v1/sessions?agents=echo",
        "/v1/approvals?all=true",
        "/healthz?verbose=1",
    ] {
        let (status, body) = call(get.clone(), format!("{url}{path}"), &token, None).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("invalid_query"), "{path}: {body}");
    }
    let (status, body) = call(
        get.clone(),
        format!("{url}/v1/sessions?agent=nosuch"),
        &token,
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("unknown_agent") && body.contains("nosuch"),
        "{body}"
    );
    for path in ["/v1/sessions?agent=echo", "/v1/approvals?state=pending"] {
        let (status, body) = call(get.clone(), format!("{url}{path}"), &token, None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn an_oversized_body_answers_413_naming_the_limit() {
    let project = Project::new();
    project
        .write("clawbus.toml", "[gateway]\nmax_body = 1024\n")
        .write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let text = "x".repeat(8 * 1024);
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{}/v1/agents/echo/tasks", daemon.url()),
        daemon.token(),
        Some(json!({ "text": text })),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body.contains("payload_too_large") && body.contains("1024"),
        "{body}"
    );
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{}/v1/agents/echo/tasks", daemon.url()),
        daemon.token(),
        Some(json!({ "text": "small", "wait": true })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn healthz_answers_503_with_a_reason_when_files_cannot_be_created() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let healthz = format!("{}/healthz", daemon.url());
    let (status, body) = call(reqwest::Method::GET, healthz.clone(), "", None).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    // The state folder gone (a disk unmounted): no transcript or session could be written.
    std::fs::remove_dir_all(project.state_dir()).unwrap();
    let (status, body) = call(reqwest::Method::GET, healthz, "", None).await;
    assert_eq!(status, 503, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], "not_ready", "{body}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot create a file in the state folder"),
        "{body}"
    );
    daemon
        .shutdown_within(std::time::Duration::from_secs(1))
        .await;
}

#[actix_rt::test]
async fn post_says_when_the_answer_came_from_the_store() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let post = || {
        let mut cmd = project.clawbus();
        cmd.args([
            "post",
            "agent.echo",
            "hi",
            "--wait",
            "--request-id",
            "dup-1",
            "--url",
            &daemon.url(),
        ])
        .env("CLAWBUS_TOKEN", daemon.token());
        cmd
    };
    let first = run_cmd(post()).await;
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(!String::from_utf8_lossy(&first.stderr).contains("duplicate"));
    let second = run_cmd(post()).await;
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&second.stdout).trim(), "echo: hi");
    assert!(
        stderr.contains("(duplicate of task ") && stderr.contains(", answered from the store)"),
        "{stderr}"
    );
    daemon.shutdown().await;
}
