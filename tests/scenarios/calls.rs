//! Calls between agents on a real `clawbus up` child: a waited `agent_call` survives `kill -9`
//! (the resumed caller joins the call it had posted and gets its answer), and `may_call` decides
//! whom an agent may reach.

use super::durable::{kill9, transcript_lines, until_succeeded};
use super::system::{Child, stop, up};
use crate::support::{Project, eventually, get_json, last_user, post_task, tool_results};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The tasks a child daemon holds for `agent`.
async fn tasks_of(c: &Child, agent: &str) -> Vec<Value> {
    let listed = get_json(c, &format!("/v1/tasks?agent={agent}")).await;
    listed["tasks"].as_array().cloned().unwrap_or_default()
}

/// `chat` calls `b`, which calls `c`, each waiting; `c`'s model is held until the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_waited_agent_call_chain_still_brings_the_answer_to_the_root() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            let call = |agent: &str, task: &str| {
                Turn::tool_call("agent_call", json!({ "agent": agent, "task": task }))
            };
            let results = tool_results(req);
            match (last_user(req).as_str(), results.first()) {
                ("ask b", None) => call("b", "ask c"),
                ("ask c", None) => call("c", "compute"),
                ("compute", _) if !second_life.load(Ordering::SeqCst) => Turn::hang(),
                ("compute", _) => Turn::text("42"),
                (user, Some(result)) => Turn::text(format!("{user} → {result}")),
                (other, None) => Turn::text(format!("re: {other}")),
            }
        })
        .await
    };
    let project = Project::new();
    let caller =
        |peer: &str| format!("may_call = [\"{peer}\"]\n[tools]\nallow = [\"agent_call\"]\n");
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write("agents.d/chat.toml", &caller("b"))
        .write("agents.d/b.toml", &caller("c"))
        .write("agents.d/c.toml", "");
    let first = up(&project).await;
    let body = json!({ "text": "ask b", "request_id": "root-1", "session": "s" });
    let (status, posted) = post_task(&first, "chat", body).await;
    assert_eq!(status, 202, "{posted}");
    let root = posted["task_id"].as_str().unwrap().to_string();
    eventually("c's turn is at the model", async || {
        server.requests().iter().any(|r| last_user(r) == "compute")
    })
    .await;
    kill9(first);

    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    let done = until_succeeded(&second, &root).await;
    assert_eq!(
        done["result"]["text"], "ask b → ask c → 42",
        "the root's answer holds the chain's answers: {done}"
    );
    for agent in ["b", "c"] {
        let tasks = tasks_of(&second, agent).await;
        assert_eq!(tasks.len(), 1, "{agent} ran one task: {tasks:#?}");
        assert_eq!(tasks[0]["state"], "succeeded", "{tasks:#?}");
    }
    let requests = server.requests();
    let answered = requests
        .iter()
        .filter(|r| tool_results(r).iter().any(|t| t.contains("interrupted")))
        .count();
    assert_eq!(answered, 0, "no caller was told its call was interrupted");
    // The root's journal: the call started twice (once per life), and its one result is c's chain.
    let lines = transcript_lines(&project);
    let results: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "message" && l["message"]["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "{lines:#?}");
    assert_eq!(results[0]["message"]["content"], "ask c → 42");
    stop(second).await;
}

/// `low` may run only `ls` and `date`; `ops` runs anything. `low` may call `helper` only.
fn guarded(model_url: &str) -> Project {
    let project = Project::new();
    project
        .with_mock_provider(model_url, "30s", 0)
        .write(
            "agents.d/low.toml",
            "may_call = [\"helper\"]\n[tools]\nallow = [\"agent_call\", \"sessions_spawn\"]\n\
             [exec]\nsecurity = \"allowlist\"\nallow = [\"ls\", \"date\"]\n",
        )
        .write("agents.d/helper.toml", "")
        .write(
            "agents.d/ops.toml",
            "[tools]\nprofile = \"full\"\n[exec]\nsecurity = \"full\"\n",
        )
        .write(
            "agents.d/lonely.toml",
            "[tools]\nallow = [\"agent_call\"]\n",
        );
    project
}

/// The `enum` of the `agent` argument of tool `name` in a recorded model request.
fn agent_enum(request: &Value, name: &str) -> Value {
    let tools = request["tools"].as_array().unwrap();
    let tool = tools
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} offered: {request}"));
    tool["function"]["parameters"]["properties"]["agent"]["enum"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_reach_one_its_may_call_does_not_list() {
    let hostname = "run cat /etc/hostname";
    let server = ScriptedServer::with_responder(move |req| {
        let results = tool_results(req);
        match last_user(req).as_str() {
            "get the hostname" if results.is_empty() => Turn::tool_calls(vec![
                ("agent_call", json!({ "agent": "ops", "task": hostname })),
                (
                    "sessions_spawn",
                    json!({ "agent": "ops", "task": hostname }),
                ),
                ("agent_call", json!({ "agent": "low", "task": hostname })),
            ]),
            "get the hostname" => Turn::text(results.join("\n")),
            "run cat /etc/hostname" => {
                Turn::tool_call("exec", json!({ "command": "cat /etc/hostname" }))
            }
            other => Turn::text(format!("re: {other}")),
        }
    })
    .await;
    let project = guarded(&server.base_url());
    let daemon = up(&project).await;
    let (status, done) = post_task(
        &daemon,
        "low",
        json!({ "text": "get the hostname", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let results: Vec<Value> = done["result"]["text"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 3, "{results:#?}");
    for refused in &results[..2] {
        assert_eq!(refused["error"]["type"], "policy_denied", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"ops\"") && message.contains("may_call"),
            "{message}"
        );
        assert!(
            refused["error"]["suggestion"]
                .as_str()
                .unwrap()
                .contains("helper"),
            "{refused}"
        );
    }
    assert_eq!(results[2]["error"]["type"], "invalid_arguments");
    assert!(
        results[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("that is you"),
        "{}",
        results[2]
    );
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| last_user(r) != hostname),
        "ops was never asked"
    );
    assert!(tasks_of(&daemon, "ops").await.is_empty());
    // The model is offered only whom it may reach: never itself, never ops.
    assert_eq!(agent_enum(&requests[0], "agent_call"), json!(["helper"]));
    assert_eq!(
        agent_enum(&requests[0], "sessions_spawn"),
        json!(["low", "helper"])
    );
    stop(daemon).await;
}

#[test]
fn clawbus_tools_shows_whom_an_agent_may_call() {
    // Offline: no model is asked.
    let project = guarded("http://127.0.0.1:9/v1");
    let run = |agent: &str, json: bool| {
        let mut cmd = project.clawbus();
        cmd.args(["tools", "--agent", agent]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = run("low", false);
    assert!(
        text.contains("may call (agent_call, sessions_spawn): helper"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&run("low", true)).unwrap();
    assert_eq!(v["may_call"], json!(["helper"]));
    // An agent allowed agent_call but naming no one in may_call is not offered it.
    let v: Value = serde_json::from_str(&run("lonely", true)).unwrap();
    assert_eq!(v["may_call"], json!([]));
    let removed = v["removed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "agent_call")
        .cloned()
        .unwrap_or_else(|| panic!("agent_call removed: {v}"));
    assert_eq!(removed["layer"], "availability", "{removed}");
    assert!(
        removed["reason"].as_str().unwrap().contains("may_call"),
        "{removed}"
    );
    assert!(run("lonely", false).contains("may call (agent_call, sessions_spawn): none"));
}

#[test]
fn check_names_an_unknown_or_self_may_call_entry_with_its_position() {
    let project = Project::new();
    project
        .write(
            "agents.d/a.toml",
            "description = \"x\"\nmay_call = [\"b\", \"nobody\", \"a\"]\n",
        )
        .write("agents.d/b.toml", "");
    let out = project.clawbus().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("a.toml:2:18: field \"may_call\": no agent \"nobody\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("a.toml:2:28: field \"may_call\": \"a\" is this agent"),
        "{stdout}"
    );
}
