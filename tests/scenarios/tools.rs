//! Tools through the gateway: argument errors the model recovers from, the policy layers, exec
//! approvals answered from the CLI, and what a command's environment holds.

use crate::support::{NET, Project, post_task, roles};
use crate::support::{offered_tools, run_cmd, tool_results};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::process::{Command, Stdio};

fn project(server: &ScriptedServer, agent: &str) -> Project {
    let p = Project::new();
    p.with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/coder.toml", agent);
    p
}

#[actix_rt::test]
async fn bad_arguments_come_back_as_a_structured_error_and_the_model_retries() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("read", json!({ "file": "notes.txt" })),
        Turn::tool_call("read", json!({ "path": "notes.txt" })),
        Turn::text("The note says 4242."),
    ])
    .await;
    let p = project(&server, "");
    p.write("agents.d/coder/notes.txt", "launch code 4242\n");
    let daemon = p.start().await;
    let (_, body) = post_task(
        &daemon,
        "coder",
        json!({ "text": "read the note", "wait": true }),
    )
    .await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "bad call, corrected call, answer");
    let error: Value = serde_json::from_str(&tool_results(&reqs[1])[0]).unwrap();
    assert_eq!(error["error"]["type"], "invalid_arguments", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing required field \"path\""),
        "{error}"
    );
    assert!(
        error["error"]["suggestion"]
            .as_str()
            .unwrap()
            .contains("required: path"),
        "the error tells the model how to retry: {error}"
    );
    assert_eq!(
        roles(&reqs[2]),
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    );
    assert!(tool_results(&reqs[2])[1].contains("launch code 4242"));
    daemon.shutdown().await;
}

/// Removes, in order: web_fetch by profile, write by deny, exec by availability, edit by channel.
const LAYERED: &str = "[tools]\nprofile = \"minimal\"\nallow = [\"write\", \"edit\", \"exec\", \"message\"]\ndeny = [\"write\"]\n[exec]\nsecurity = \"deny\"\n";

fn layered_project(server: &ScriptedServer) -> Project {
    let p = project(server, LAYERED);
    let config = std::fs::read_to_string(p.config_path()).unwrap();
    p.write(
        "clawbus.toml",
        &format!("{config}\n[channels.api]\ndeny_tools = [\"edit\"]\n"),
    );
    p.write("agents.d/coder/notes.txt", "keep me\n");
    p
}

#[actix_rt::test]
async fn a_tool_denied_at_each_layer_is_not_offered_and_is_refused_when_called() {
    let server = ScriptedServer::start(vec![
        Turn::tool_calls(vec![
            ("web_fetch", json!({ "url": "http://example.com/" })),
            (
                "write",
                json!({ "path": "notes.txt", "content": "overwritten" }),
            ),
            ("exec", json!({ "command": "touch made" })),
            (
                "edit",
                json!({ "path": "notes.txt", "old_string": "keep", "new_string": "lose" }),
            ),
        ]),
        Turn::text("none of that was allowed"),
    ])
    .await;
    let p = layered_project(&server);
    let daemon = p.start().await;
    let (_, body) = post_task(&daemon, "coder", json!({ "text": "try", "wait": true })).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let reqs = server.requests();
    assert_eq!(
        offered_tools(&reqs[0]),
        ["read", "message"],
        "only what every layer lets through"
    );
    let results = tool_results(&reqs[1]);
    for (result, layer) in results
        .iter()
        .zip(["profile", "deny", "availability", "channel"])
    {
        let v: Value = serde_json::from_str(result).unwrap();
        assert_eq!(v["error"]["type"], "policy_denied", "{result}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("the {layer} layer")),
            "{result}"
        );
    }
    let ws = p.state_dir().join("workspaces/coder");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    assert!(!ws.join("made").exists());
    daemon.shutdown().await;
}

#[test]
fn clawbus_tools_names_the_layer_that_removed_each_tool() {
    let server_url = "http://127.0.0.1:9/v1";
    let p = Project::new();
    p.with_mock_provider(server_url, "1s", 0)
        .write("agents.d/coder.toml", LAYERED);
    let config = std::fs::read_to_string(p.config_path()).unwrap();
    p.write(
        "clawbus.toml",
        &format!("{config}\n[channels.api]\ndeny_tools = [\"edit\"]\n"),
    );
    let out = p
        .clawbus()
        .args(["tools", "--agent", "coder"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("offered (3): read, edit, message"),
        "{stdout}"
    );
    let line = |tool: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(tool))
            .unwrap_or_else(|| panic!("no line for {tool}:\n{stdout}"))
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(line("web_fetch"), "profile");
    assert_eq!(line("write"), "deny");
    assert_eq!(line("exec"), "availability");
    let out = p
        .clawbus()
        .args(["tools", "--agent", "coder", "--channel", "api", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offered"], json!(["read", "message"]));
    let edit = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "edit")
        .unwrap();
    assert_eq!(edit["layer"], "channel", "{edit}");
    let unknown = p
        .clawbus()
        .args(["tools", "--agent", "nobody"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

const ASK: &str = "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\n";

#[actix_rt::test]
async fn ask_mode_runs_the_command_once_a_person_allows_it_from_the_cli() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "touch approved.txt" })),
        Turn::text("done"),
    ])
    .await;
    let p = project(&server, &format!("{ASK}approval_timeout = \"60s\"\n"));
    let daemon = p.start().await;
    let mut events = daemon
        .bus()
        .subscribe(bus::Topic::parse("approvals.coder").unwrap())
        .await
        .unwrap();
    let task = {
        let (url, token) = (daemon.url(), daemon.token().to_string());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/coder/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": "make the file", "wait": true, "timeout_ms": 60000 }))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let event = tokio::time::timeout(NET, events.next())
        .await
        .unwrap()
        .unwrap();
    let payload = event.envelope().payload.clone();
    assert_eq!(payload["event"], "requested");
    let id = payload["approval"]["id"].as_str().unwrap().to_string();
    assert_eq!(payload["approval"]["command"], "touch approved.txt");

    let mut list = p.clawbus();
    list.args(["approvals", "--url", &daemon.url()]);
    let listed = run_cmd(list).await;
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains(&id) && stdout.contains("touch approved.txt"),
        "{stdout}"
    );

    let mut allow = p.clawbus();
    allow.args(["approvals", "allow", &id, "--url", &daemon.url()]);
    let allowed = run_cmd(allow).await;
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let body = tokio::time::timeout(NET, task).await.unwrap().unwrap();
    assert_eq!(body["state"], "succeeded", "{body}");
    assert!(p.state_dir().join("workspaces/coder/approved.txt").exists());
    assert!(tool_results(&server.requests()[1])[0].starts_with("exit code: 0"));

    let mut again = p.clawbus();
    again.args(["approvals", "deny", &id, "--url", &daemon.url()]);
    assert_eq!(
        run_cmd(again).await.status.code(),
        Some(1),
        "an answered request stays answered"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn ask_mode_without_an_answer_in_time_is_denied_and_nothing_runs() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "touch unapproved.txt" })),
        Turn::text("it was not approved"),
    ])
    .await;
    let p = project(&server, &format!("{ASK}approval_timeout = \"300ms\"\n"));
    let daemon = p.start().await;
    let (_, body) = post_task(&daemon, "coder", json!({ "text": "go", "wait": true })).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let result: Value = serde_json::from_str(&tool_results(&server.requests()[1])[0]).unwrap();
    assert_eq!(result["error"]["type"], "approval_timeout", "{result}");
    assert!(
        !p.state_dir()
            .join("workspaces/coder/unapproved.txt")
            .exists()
    );
    let listed: Value = reqwest::Client::new()
        .get(format!("{}/v1/approvals", daemon.url()))
        .bearer_auth(daemon.token())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["approvals"][0]["state"], "expired", "{listed}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_command_run_by_a_real_daemon_cannot_see_its_secrets() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "env" })),
        Turn::text("done"),
    ])
    .await;
    let p = project(
        &server,
        "[exec]\nallow = [\"env\"]\nenv = [\"SHARED_SETTING\"]\n",
    );
    let mut child = p
        .clawbus()
        .args(["up", "--port", "0"])
        .env("CLAWBUS_PLANTED_SECRET", "s3cr3t-planted-value")
        .env("SHARED_SETTING", "visible-value")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
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
        .json(&json!({ "text": "show env", "wait": true }))
        .timeout(NET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    crate::support::wait_child_async(child).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let env = &tool_results(&server.requests()[1])[0];
    assert!(env.starts_with("exit code: 0"), "{env}");
    assert!(
        env.contains("SHARED_SETTING=visible-value"),
        "listed variables pass: {env}"
    );
    assert!(env.contains("PATH="), "{env}");
    assert!(
        !env.contains("s3cr3t-planted-value"),
        "the planted secret must not reach the child: {env}"
    );
    assert!(!env.contains("CLAWBUS_"), "{env}");
}
