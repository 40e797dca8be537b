//! Agents working together: `agent_call` with and without waiting, the lane slot given up while
//! waiting, one run per request id, and cycles refused at once.

use crate::support::{
    Project, announcements, eventually, get_json, last_user, post_task, tool_results,
};
use clawbus::testkit::{Gate, ScriptedServer, Turn};
use serde_json::{Value, json};

/// Agents `a` and `b` may call each other; `c` may not call anyone.
fn team(server: &ScriptedServer, lanes: &str) -> Project {
    let p = Project::new();
    p.with_mock_and(&server.base_url(), lanes)
        .write("agents.d/a.toml", &caller(&["b"]))
        .write("agents.d/b.toml", &caller(&["a"]))
        .write("agents.d/c.toml", "");
    p
}

/// An agent file allowing `agent_call` to `peers`.
pub(super) fn caller(peers: &[&str]) -> String {
    let list: Vec<String> = peers.iter().map(|p| format!("{p:?}")).collect();
    format!(
        "may_call = [{}]\n[tools]\nallow = [\"agent_call\"]\n",
        list.join(", ")
    )
}

#[actix_rt::test]
async fn a_waiting_call_returns_the_callees_answer_and_frees_the_lane_meanwhile() {
    let gate = Gate::new();
    let server = {
        let gate = gate.clone();
        ScriptedServer::with_responder(move |req| {
            let user = last_user(req);
            let results = tool_results(req);
            match user.as_str() {
                "ask b" if results.is_empty() => {
                    Turn::tool_call("agent_call", json!({ "agent": "b", "task": "compute" }))
                }
                "ask b" => Turn::text(format!("b said: {}", results[0])),
                "compute" => Turn::gated(&gate, Turn::text("42")),
                other => Turn::text(format!("re: {other}")),
            }
        })
        .await
    };
    let project = team(&server, "[lanes]\nmain = 1\n");
    let daemon = project.start().await;
    let (status, asked) = post_task(&daemon, "a", json!({ "text": "ask b" })).await;
    assert_eq!(status, 202, "{asked}");
    eventually("b's turn is at the model", async || {
        server.requests().iter().any(|r| last_user(r) == "compute")
    })
    .await;
    // a waits holding no slot; b's call runs on the subagent lane.
    let lanes = daemon.lanes().status().await.unwrap();
    let lane = |name: &str| lanes.iter().find(|l| l.name == name).unwrap().clone();
    assert!(lane("main").holding.is_empty(), "{:?}", lane("main"));
    assert_eq!(lane("subagent").holding.len(), 1, "{:?}", lane("subagent"));
    // A third task runs on the one main slot meanwhile.
    let (status, third) = post_task(&daemon, "c", json!({ "text": "hello", "wait": true })).await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(third["result"]["text"], "re: hello");
    gate.open();
    let task_id = asked["task_id"].as_str().unwrap();
    let mut done = Value::Null;
    eventually("a's task succeeded", async || {
        done = get_json(&daemon, &format!("/v1/tasks/{task_id}")).await;
        done["state"] == "succeeded"
    })
    .await;
    assert_eq!(done["result"]["text"], "b said: 42");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn the_same_call_request_id_twice_runs_the_callee_once() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        match (user.as_str(), results.len()) {
            ("twice", 0 | 1) => Turn::tool_call(
                "agent_call",
                json!({ "agent": "b", "task": "count me", "request_id": "same-call-1" }),
            ),
            ("twice", _) => Turn::text(results.join(" | ")),
            ("count me", _) => Turn::text("counted"),
            (other, _) => Turn::text(format!("re: {other}")),
        }
    })
    .await;
    let project = team(&server, "");
    let daemon = project.start().await;
    let (status, done) = post_task(&daemon, "a", json!({ "text": "twice", "wait": true })).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "counted | counted");
    let runs = server
        .requests()
        .iter()
        .filter(|r| last_user(r) == "count me")
        .count();
    assert_eq!(runs, 1, "b ran once for two calls with one request id");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_call_back_to_a_waiting_agent_fails_at_once_naming_the_cycle() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        match (user.as_str(), results.first()) {
            ("start", None) => {
                Turn::tool_call("agent_call", json!({ "agent": "b", "task": "ping a" }))
            }
            ("ping a", None) => {
                Turn::tool_call("agent_call", json!({ "agent": "a", "task": "pong" }))
            }
            (_, Some(result)) => Turn::text(format!("got: {result}")),
            (other, None) => Turn::text(format!("re: {other}")),
        }
    })
    .await;
    let project = team(&server, "");
    let daemon = project.start().await;
    let (status, done) = post_task(
        &daemon,
        "a",
        json!({ "text": "start", "wait": true, "timeout_ms": 20_000 }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let text = done["result"]["text"].as_str().unwrap();
    assert!(text.contains("deadlock"), "{text}");
    assert!(text.contains("a → b → a"), "names the cycle: {text}");
    assert!(
        server.requests().iter().all(|r| last_user(r) != "pong"),
        "a was never asked to run the cyclic call"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_call_that_does_not_wait_delivers_the_answer_to_the_callers_session() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        if user == "fire and forget" && results.is_empty() {
            return Turn::tool_call(
                "agent_call",
                json!({ "agent": "b", "task": "later work", "wait": false }),
            );
        }
        if user == "fire and forget" {
            return Turn::text("asked b");
        }
        if user == "later work" {
            return Turn::text("the later answer");
        }
        Turn::text(format!("noted: {user}"))
    })
    .await;
    let project = team(&server, "");
    let daemon = project.start().await;
    let (status, done) = post_task(
        &daemon,
        "a",
        json!({ "text": "fire and forget", "session": "desk", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "asked b");
    // b's answer arrives in a's session as a message that wakes it.
    let key = "agent:a:api:direct:desk";
    eventually("the answer reached a's session", async || {
        let session = get_json(&daemon, &format!("/v1/sessions/{key}")).await;
        session["entries"].as_array().is_some_and(|entries| {
            entries.iter().any(|e| {
                e["message"]["role"] == "assistant"
                    && e["message"]["content"]
                        .as_str()
                        .is_some_and(|t| t.contains("the later answer"))
            })
        })
    })
    .await;
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_call_to_an_unknown_agent_is_a_clear_tool_error() {
    let server = ScriptedServer::with_responder(|req| {
        let results = tool_results(req);
        match results.first() {
            None => Turn::tool_call("agent_call", json!({ "agent": "nobody", "task": "x" })),
            Some(r) => Turn::text(r.clone()),
        }
    })
    .await;
    let project = team(&server, "");
    let daemon = project.start().await;
    let (_, done) = post_task(&daemon, "a", json!({ "text": "go", "wait": true })).await;
    let text = done["result"]["text"].as_str().unwrap();
    assert!(text.contains("nobody"), "names the agent: {text}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_three_agent_cycle_fails_at_once_naming_it() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        let next = |agent: &str, task: &str| {
            Turn::tool_call("agent_call", json!({ "agent": agent, "task": task }))
        };
        match (user.as_str(), results.first()) {
            ("start", None) => next("b", "to c"),
            ("to c", None) => next("c", "to a"),
            ("to a", None) => next("a", "loop"),
            (_, Some(result)) => Turn::text(format!("got: {result}")),
            (other, None) => Turn::text(format!("re: {other}")),
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/a.toml", &caller(&["b"]))
        .write("agents.d/b.toml", &caller(&["c"]))
        .write("agents.d/c.toml", &caller(&["a"]));
    let daemon = project.start().await;
    let (status, done) = post_task(&daemon, "a", json!({ "text": "start", "wait": true })).await;
    assert_eq!(status, 200, "{done}");
    let text = done["result"]["text"].as_str().unwrap();
    assert!(text.contains("a → b → c → a"), "names the cycle: {text}");
    assert!(server.requests().iter().all(|r| last_user(r) != "loop"));
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn each_subagent_outcome_reaches_the_parent_session_exactly_once() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        let spawn = |task: &str, timeout: u64| {
            (
                "sessions_spawn",
                json!({ "task": task, "label": task, "timeout_s": timeout }),
            )
        };
        match user.as_str() {
            "delegate" if results.is_empty() => Turn::tool_calls(vec![
                spawn("succeed", 60),
                spawn("fail", 60),
                spawn("stall", 1),
            ]),
            "delegate" => Turn::text("spawned three"),
            "succeed" => Turn::text("child success"),
            "fail" => Turn::http_error(400),
            "stall" => Turn::hang(),
            _ => Turn::text("ack"),
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/a.toml", "[tools]\nallow = [\"sessions_spawn\"]\n");
    let daemon = project.start().await;
    let (status, done) = post_task(
        &daemon,
        "a",
        json!({ "text": "delegate", "session": "boss", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "spawned three");
    let key = "agent:a:api:direct:boss";
    let mut seen = Vec::new();
    eventually("the three outcomes reached the parent", async || {
        seen = announcements(&daemon, key).await;
        seen.len() >= 3
    })
    .await;
    let count = |state: &str| {
        seen.iter()
            .filter(|t| t.contains(&format!("({state})")))
            .count()
    };
    assert_eq!(count("succeeded"), 1, "{seen:#?}");
    assert_eq!(count("failed"), 1, "{seen:#?}");
    assert_eq!(count("timed_out"), 1, "{seen:#?}");
    assert!(
        seen.iter().any(|t| t.contains("child success")),
        "{seen:#?}"
    );
    // Exactly once: nothing more arrives after the three (every announcement task has ended).
    eventually("the announcement turns ended", async || {
        server
            .requests()
            .iter()
            .filter(|r| last_user(r).starts_with("[task result]"))
            .count()
            >= 3
    })
    .await;
    assert_eq!(announcements(&daemon, key).await.len(), 3);
    // The parent's events list the three children it started.
    let path = format!("/v1/tasks/{}/events", done["task_id"].as_str().unwrap());
    let events = crate::support::get_text(&daemon, &path).await;
    assert_eq!(
        events.matches("\"kind\":\"subagent\"").count(),
        3,
        "{events}"
    );
    daemon.shutdown_within(std::time::Duration::ZERO).await;
}

#[actix_rt::test]
async fn subagent_depth_and_fan_out_limits_refuse_with_clear_errors() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        let results = tool_results(req);
        if !results.is_empty() {
            return Turn::text(format!("{user} got: {}", results.join(" | ")));
        }
        match user.as_str() {
            "go deep" => Turn::tool_call("sessions_spawn", json!({ "task": "level 1" })),
            "level 1" => Turn::tool_call("sessions_spawn", json!({ "task": "level 2" })),
            "level 2" => Turn::tool_call("sessions_spawn", json!({ "task": "level 3" })),
            "go wide" => Turn::tool_calls(
                (0..6)
                    .map(|i| ("sessions_spawn", json!({ "task": format!("leaf {i}") })))
                    .collect(),
            ),
            _ => Turn::text("ok"),
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/a.toml", "[tools]\nallow = [\"sessions_spawn\"]\n");
    let daemon = project.start().await;
    let (_, wide) = post_task(&daemon, "a", json!({ "text": "go wide", "wait": true })).await;
    let text = wide["result"]["text"].as_str().unwrap();
    assert_eq!(text.matches("\"started\"").count(), 5, "{text}");
    assert!(
        text.contains("fanout_limit") && text.contains("at most 5"),
        "{text}"
    );

    let (_, deep) = post_task(&daemon, "a", json!({ "text": "go deep", "wait": true })).await;
    assert!(
        deep["result"]["text"]
            .as_str()
            .unwrap()
            .contains("\"started\"")
    );
    eventually(
        "level 2 tried to spawn level 3 and was refused",
        async || {
            server.requests().iter().any(|r| {
                last_user(r) == "level 2"
                    && tool_results(r)
                        .first()
                        .is_some_and(|t| t.contains("depth_limit"))
            })
        },
    )
    .await;
    assert!(
        server.requests().iter().all(|r| last_user(r) != "level 3"),
        "level 3 never ran"
    );
    daemon.shutdown_within(std::time::Duration::ZERO).await;
}

/// Copies a folder tree.
pub(super) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[actix_rt::test]
async fn the_shipped_team_cooperates_out_of_the_box() {
    let project = Project::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_tree(&root.join("agents.d"), &project.agents_dir());
    std::fs::copy(root.join("clawbus.toml"), project.config_path()).unwrap();
    let daemon = project.start().await;
    let (status, done) = post_task(
        &daemon,
        "assistant",
        json!({ "text": "team rust", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["text"],
        "The team's answer on rust:\nDraft on rust, from the research: echo: research rust"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn cancelling_a_task_cancels_the_work_it_started_and_the_tree_shows_it() {
    let server = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        match (user.as_str(), tool_results(req).is_empty()) {
            ("ask b", true) => {
                Turn::tool_call("agent_call", json!({ "agent": "b", "task": "hold on" }))
            }
            ("hold on", _) => Turn::hang(),
            _ => Turn::text("ok"),
        }
    })
    .await;
    let project = team(&server, "");
    let daemon = project.start().await;
    let (_, asked) = post_task(&daemon, "a", json!({ "text": "ask b" })).await;
    let parent = asked["task_id"].as_str().unwrap().to_string();
    eventually("b's turn is at the model", async || {
        server.requests().iter().any(|r| last_user(r) == "hold on")
    })
    .await;
    let tree = get_json(&daemon, &format!("/v1/tasks/{parent}/tree")).await;
    let nodes = tree["tree"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{tree}");
    assert_eq!(nodes[1]["depth"], 1);
    assert_eq!(nodes[1]["task"]["agent"], "b");
    assert_eq!(nodes[1]["task"]["parent"], parent.as_str());
    let child = nodes[1]["task"]["task_id"].as_str().unwrap().to_string();

    let cancelled = reqwest::Client::new()
        .post(format!("{}/v1/tasks/{parent}/cancel", daemon.url()))
        .bearer_auth(daemon.token())
        .timeout(crate::support::NET)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    eventually("the child was cancelled with its parent", async || {
        get_json(&daemon, &format!("/v1/tasks/{child}")).await["state"] == "cancelled"
    })
    .await;
    let listed = get_json(&daemon, "/v1/tasks?state=cancelled").await;
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&parent.as_str()) && ids.contains(&child.as_str()),
        "{listed}"
    );
    let out = crate::support::run_cmd({
        let mut cmd = project.clawbus();
        cmd.args(["tasks", "show", &parent, "--tree", "--url", &daemon.url()])
            .env("CLAWBUS_TOKEN", daemon.token());
        cmd
    })
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  ") && l.contains(&child)),
        "{text}"
    );
    daemon.shutdown().await;
}

/// The cycle the envelope's call chain cannot see: `c`'s root task calls `a` (request id `y`);
/// a script's root task on `b` (request id `x`) joins that same call of `a`; then `a` calls `b`
/// with request id `x`, joining `b`'s task. `a`'s chain is `[c, a]` — no `b` in it — yet `a`'s
/// task and `b`'s would wait on each other until their timeouts. The coordinator's wait-for graph
/// refuses the last wait at once.
#[actix_rt::test]
async fn a_cycle_through_tasks_joined_across_two_trees_fails_at_once() {
    let gate = Gate::new();
    let server = {
        let gate = gate.clone();
        ScriptedServer::with_responder(move |req| {
            let user = last_user(req);
            let call = |agent: &str, task: &str, id: &str| {
                Turn::tool_call(
                    "agent_call",
                    json!({ "agent": agent, "task": task, "request_id": id }),
                )
            };
            match (user.as_str(), tool_results(req).first()) {
                ("go", None) => call("a", "a-work", "y"),
                ("a-work", None) => Turn::gated(&gate, call("b", "b-work", "x")),
                ("b-work", None) => call("a", "a-work", "y"),
                (who, Some(result)) => Turn::text(format!("{who} got: {result}")),
                (other, None) => Turn::text(format!("re: {other}")),
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/a.toml", &caller(&["b"]))
        .write("agents.d/b.toml", &caller(&["a"]))
        .write("agents.d/c.toml", &caller(&["a"]));
    let daemon = project.start().await;
    let (status, root_c) = post_task(&daemon, "c", json!({ "text": "go" })).await;
    assert_eq!(status, 202, "{root_c}");
    eventually("a's call is at the model", async || {
        server.requests().iter().any(|r| last_user(r) == "a-work")
    })
    .await;
    let (status, root_b) = post_task(
        &daemon,
        "b",
        json!({ "text": "b-work", "request_id": "x", "timeout_ms": 20_000 }),
    )
    .await;
    assert_eq!(status, 202, "{root_b}");
    let coordinator = daemon.system().coordinator();
    eventually("c and b both wait on a's task", async || {
        coordinator.status().await.waits == 2
    })
    .await;
    gate.open();
    let (status, b_done) = post_task(
        &daemon,
        "b",
        json!({ "text": "b-work", "request_id": "x", "wait": true, "timeout_ms": 20_000 }),
    )
    .await;
    assert_eq!(status, 200, "{b_done}");
    let text = b_done["result"]["text"].as_str().unwrap();
    assert!(text.contains("deadlock"), "{text}");
    assert!(text.contains("a → b → a"), "names the cycle: {text}");
    eventually("every wait ended", async || {
        coordinator.status().await.waits == 0
    })
    .await;
    daemon.shutdown().await;
}
