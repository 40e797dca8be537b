//! Shared topics: agents subscribing to one compete for its tasks, so each runs exactly once.

use crate::support::{Project, get_json, post_json, run_cmd, succeeded};
use serde_json::json;
use std::collections::BTreeMap;

/// Agents `a` and `b` subscribe to `team.research`; `c` to nothing (echo model).
fn team() -> Project {
    let p = Project::new();
    p.write("agents.d/a.toml", "subscribe = [\"team.research\"]\n")
        .write("agents.d/b.toml", "subscribe = [\"team.research\"]\n")
        .write("agents.d/c.toml", "");
    p
}

#[actix_rt::test]
async fn each_task_on_a_shared_topic_runs_once_on_one_subscriber() {
    let project = team();
    let daemon = project.start().await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let (status, done) = post_json(
            &daemon,
            "/v1/topics/team.research/tasks",
            json!({ "text": format!("q{i}"), "request_id": format!("topic-{i}"), "wait": true }),
        )
        .await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(done["result"]["text"], format!("echo: q{i}"), "{done}");
        ids.push(format!("topic-{i}"));
    }
    let sessions = get_json(&daemon, "/v1/sessions").await;
    // request id → the agents whose topic session ran it, with their turns.
    let mut ran: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for s in sessions["sessions"].as_array().unwrap() {
        let key = s["key"].as_str().unwrap();
        if let Some(rest) = key.split_once(":topic:team.research:").map(|(_, r)| r) {
            ran.entry(rest.to_string()).or_default().push((
                s["agent"].as_str().unwrap().to_string(),
                s["turns"].as_u64().unwrap(),
            ));
        }
    }
    for id in &ids {
        let runs = ran.get(id).cloned().unwrap_or_default();
        assert_eq!(runs.len(), 1, "{id} ran in exactly one session: {runs:?}");
        let (agent, turns) = &runs[0];
        assert!(
            agent == "a" || agent == "b",
            "{id} ran on a subscriber: {agent}"
        );
        assert_eq!(*turns, 1, "{id} ran once");
    }
    assert_eq!(ran.len(), 10, "{ran:?}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_topic_nobody_subscribes_to_is_404_and_reserved_ones_are_400() {
    let project = team();
    let daemon = project.start().await;
    let (status, body) = post_json(
        &daemon,
        "/v1/topics/team.nobody/tasks",
        json!({ "text": "anyone?" }),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "unknown_topic", "{body}");
    let (status, body) =
        post_json(&daemon, "/v1/topics/agent.a/tasks", json!({ "text": "x" })).await;
    assert_eq!(status, 400, "{body}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn clawbus_post_to_a_shared_topic_waits_for_the_one_answer() {
    let project = team();
    let daemon = project.start().await;
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "team.research",
        "find it",
        "--wait",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    assert_eq!(succeeded(&out).trim(), "echo: find it");
    let mut cmd = project.clawbus();
    cmd.args(["post", "team.nobody", "x", "--url", &daemon.url()]);
    let out = run_cmd(cmd).await;
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no agent subscribes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_broadcast_runs_once_on_every_subscriber_as_one_group() {
    let project = team();
    let daemon = project.start().await;
    let (status, group) = post_json(
        &daemon,
        "/v1/topics/team.research/tasks",
        json!({ "text": "all hands", "request_id": "bc-1", "broadcast": true, "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["state"], "succeeded", "{group}");
    let members = group["members"].as_array().unwrap();
    let mut agents: Vec<&str> = members
        .iter()
        .map(|m| m["agent"].as_str().unwrap())
        .collect();
    agents.sort();
    assert_eq!(agents, ["a", "b"], "{group}");
    let ids: Vec<&str> = members
        .iter()
        .map(|m| m["task_id"].as_str().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "each member is its own task");
    let text = group["result"]["text"].as_str().unwrap();
    assert!(
        text.contains("a: echo: all hands") && text.contains("b: echo: all hands"),
        "{text}"
    );
    // The group shows its members together, and each ran once.
    let tree = get_json(
        &daemon,
        &format!("/v1/tasks/{}/tree", group["task_id"].as_str().unwrap()),
    )
    .await;
    let nodes = tree["tree"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{tree}");
    for node in &nodes[1..] {
        assert_eq!(node["task"]["state"], "succeeded", "{tree}");
        assert_eq!(node["task"]["attempts"], 1, "{tree}");
        assert!(
            ids.contains(&node["task"]["task_id"].as_str().unwrap()),
            "{tree}"
        );
    }
    // The same broadcast again is answered from the store: nothing runs twice.
    let (status, again) = post_json(
        &daemon,
        "/v1/topics/team.research/tasks",
        json!({ "text": "all hands", "request_id": "bc-1", "broadcast": true, "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true, "{again}");
    let sessions = get_json(&daemon, "/v1/sessions").await;
    let ran: Vec<u64> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["key"].as_str().unwrap().contains(":topic:team.research:"))
        .map(|s| s["turns"].as_u64().unwrap())
        .collect();
    assert_eq!(ran, [1, 1], "{sessions}");
    // Without --broadcast, exactly one subscriber runs it; --broadcast on one agent's topic is
    // refused.
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "team.research",
        "one of you",
        "--wait",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    assert_eq!(succeeded(&out).trim(), "echo: one of you");
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "team.research",
        "everyone",
        "--broadcast",
        "--wait",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    succeeded(&out);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("a: echo: everyone") && printed.contains("b: echo: everyone"),
        "{printed}"
    );
    let mut cmd = project.clawbus();
    cmd.args([
        "post",
        "agent.a",
        "x",
        "--broadcast",
        "--url",
        &daemon.url(),
    ]);
    assert_eq!(run_cmd(cmd).await.status.code(), Some(2));
    daemon.shutdown().await;
}
