//! Figures, not assertions (ignored; run by hand): trivial tasks per second through 1, 2 and 3
//! `clawbus up` nodes on NATS and through one on the embedded bus; and the time from a node's
//! `kill -9` to its task running on another node.
//!
//! `cargo test --test main scenarios::nats_figures -- --ignored --nocapture --test-threads 1`
//!
//! A node marks a running task in progress every third of `ack_wait`; the server hands it to
//! another node `ack_wait` after the last mark, so the kill-to-elsewhere time lies between two
//! thirds of `ack_wait` and `ack_wait`, plus a pull.

use super::system::{Child, spawn_up, stop};
use crate::support::{Project, eventually, last_user, post_task};
use clawbus::testkit::{NatsServer, ScriptedServer, Turn};
use serde_json::json;
use std::time::Duration;

const TASKS: usize = 300;
const IN_FLIGHT: usize = 32;

async fn start(project: &Project, bus: Option<(&NatsServer, &str)>, extra: &[&str]) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]).args(extra);
    if let Some((nats, id)) = bus {
        cmd.args(["--bus", nats.url(), "--node-id", id]);
    }
    spawn_up(project, cmd).await
}

/// Tasks per second for `TASKS` posts (each `wait: true`), `IN_FLIGHT` at a time, spread over
/// `nodes`.
#[allow(clippy::disallowed_methods, reason = "a figure is wall-clock time")]
async fn rate(nodes: &[Child], tag: &str) -> f64 {
    use futures::StreamExt as _;
    let began = std::time::Instant::now();
    let posts = futures::stream::iter(0..TASKS)
        .map(|i| {
            let node = &nodes[i % nodes.len()];
            let body = json!({ "text": format!("{tag}-{i}"), "wait": true, "timeout_ms": 60_000 });
            async move { post_task(node, "chat", body).await.0 }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<u16>>()
        .await;
    assert!(posts.iter().all(|s| *s == 200), "every task answered");
    TASKS as f64 / began.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a figure: run by hand with --ignored --nocapture"]
async fn figure_trivial_tasks_per_second_on_1_2_3_nodes_and_local() {
    let Some(nats) = NatsServer::start_or_skip("figure_trivial_tasks_per_second") else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let local = Project::new();
    local
        .with_mock_and(&model.base_url(), "")
        .write("agents.d/chat.toml", "");
    let node = start(&local, None, &[]).await;
    let r = rate(std::slice::from_ref(&node), "local").await;
    println!(
        "figure: local backend, 1 node: {r:.0} tasks/s ({TASKS} tasks, {IN_FLIGHT} in flight)"
    );
    stop(node).await;
    let projects: Vec<Project> = (0..3).map(|_| Project::new()).collect();
    for p in &projects {
        p.with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
    }
    let mut nodes = Vec::new();
    for (n, project) in projects.iter().enumerate() {
        let id = format!("f{}", n + 1);
        nodes.push(start(project, Some((&nats, &id)), &[]).await);
        let r = rate(&nodes, &format!("nats{}", n + 1)).await;
        println!(
            "figure: NATS, {} node(s): {r:.0} tasks/s ({TASKS} tasks, {IN_FLIGHT} in flight)",
            n + 1
        );
    }
    for node in nodes {
        stop(node).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a figure: run by hand with --ignored --nocapture"]
#[allow(clippy::disallowed_methods, reason = "a figure is wall-clock time")]
async fn figure_time_from_kill_9_to_the_task_running_on_another_node() {
    let stuck = ScriptedServer::with_responder(|_| Turn::hang()).await;
    let live = ScriptedServer::with_responder(|_| Turn::text("done")).await;
    for ack_wait in ["2s", "5s"] {
        // A server each: an agent's durable consumer keeps the ack wait it was created with.
        let Some(nats) = NatsServer::start_or_skip("figure_time_from_kill_9") else {
            return;
        };
        let extra = format!("[bus]\nack_wait = \"{ack_wait}\"\n");
        let (p1, p2) = (Project::new(), Project::new());
        p1.with_mock_and(&stuck.base_url(), &extra)
            .write("agents.d/chat.toml", "");
        p2.with_mock_and(&live.base_url(), &extra)
            .write("agents.d/chat.toml", "");
        let n1 = start(&p1, Some((&nats, "k1")), &[]).await;
        let before = (stuck.request_count(), live.request_count());
        let (status, _) = post_task(&n1, "chat", json!({ "text": "survive" })).await;
        assert_eq!(status, 202);
        eventually("node 1 runs the task", async || {
            stuck.request_count() > before.0
        })
        .await;
        let n2 = start(&p2, Some((&nats, "k2")), &[]).await;
        let killed = std::time::Instant::now();
        super::durable::kill9(n1);
        tokio::time::timeout(Duration::from_secs(60), async {
            while live.request_count() == before.1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        println!(
            "figure: ack_wait {ack_wait}: kill -9 to the task running on another node: {} ms",
            killed.elapsed().as_millis()
        );
        stop(n2).await;
    }
}
