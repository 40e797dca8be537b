//! `clawbus up --bus nats://…`: a daemon on NATS JetStream (a real `nats-server` ≥ 2.11 on
//! loopback), end to end; and the startup errors that name the URL.

use super::system::{spawn_up, stop};
use crate::support::{Project, eventually, last_user, output, post_task};
use clawbus::testkit::{NatsServer, ScriptedServer, Turn};
use serde_json::json;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_on_nats_answers_a_task_posted_over_http_and_a_duplicate_from_the_store() {
    let Some(nats) = NatsServer::start_or_skip(
        "a_node_on_nats_answers_a_task_posted_over_http_and_a_duplicate_from_the_store",
    ) else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let project = Project::new();
    project
        .with_mock_and(&model.base_url(), "")
        .write("agents.d/chat.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", "n1"]);
    let node = spawn_up(&project, cmd).await;
    let body = json!({ "text": "hello", "request_id": "nats-1", "wait": true });
    let (status, first) = post_task(&node, "chat", body.clone()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["state"], "succeeded", "{first}");
    assert_eq!(first["result"]["text"], "re: hello");
    let (status, again) = post_task(&node, "chat", body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["task_id"], first["task_id"]);
    assert_eq!(
        model.request_count(),
        1,
        "the duplicate must not call the model"
    );
    stop(node).await;
}

#[test]
fn up_on_an_unreachable_nats_fails_naming_the_url() {
    let project = Project::new();
    project.write("agents.d/chat.toml", "");
    let url = format!("nats://127.0.0.1:{}", free_port());
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", &url]);
    let out = output(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("NATS at {url}: cannot connect after 3 attempts")),
        "the error must name the URL: {stderr}"
    );
}

#[test]
fn up_on_a_nats_without_jetstream_fails_saying_so() {
    let Some(nats) =
        NatsServer::start_with_or_skip("up_on_a_nats_without_jetstream_fails_saying_so", false)
    else {
        return;
    };
    let project = Project::new();
    project.write("agents.d/chat.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", nats.url()]);
    let out = output(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "NATS at {}: JetStream is not available",
            nats.url()
        )) && stderr.contains("-js"),
        "the error must name the URL and the fix: {stderr}"
    );
}

#[test]
fn a_bad_bus_flag_is_refused_before_anything_starts() {
    let project = Project::new();
    project.write("agents.d/chat.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", "redis://x"]);
    let out = output(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--bus: unknown bus backend \"redis://x\""),
        "{stderr}"
    );
}

/// Transcripts (one per session) a node wrote for agent `chat`.
fn sessions_run_by(project: &Project) -> usize {
    let dir = project.state_dir().join("sessions").join("chat");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_the_agents_work_each_task_running_once() {
    let Some(nats) =
        NatsServer::start_or_skip("two_nodes_share_the_agents_work_each_task_running_once")
    else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let projects = [Project::new(), Project::new()];
    let mut nodes = Vec::new();
    for (i, project) in projects.iter().enumerate() {
        project
            .with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
        let mut cmd = project.clawbus();
        let name = format!("n{}", i + 1);
        cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", &name]);
        nodes.push(spawn_up(project, cmd).await);
    }
    const TASKS: usize = 20;
    let posts = (0..TASKS).map(|i| {
        let node = &nodes[i % 2];
        let body =
            json!({ "text": format!("t{i}"), "request_id": format!("two-{i}"), "wait": true });
        post_task(node, "chat", body)
    });
    for (i, (status, answer)) in futures::future::join_all(posts)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["text"], format!("re: t{i}"), "{answer}");
    }
    assert_eq!(model.request_count(), TASKS, "every task ran exactly once");
    let ran: Vec<usize> = projects.iter().map(sessions_run_by).collect();
    assert_eq!(
        ran.iter().sum::<usize>(),
        TASKS,
        "each task ran on one node: {ran:?}"
    );
    assert!(
        ran.iter().all(|n| *n > 0),
        "both nodes took work from the shared consumer: {ran:?}"
    );
    // Either node answers for every task: the records are the cluster's.
    let (_, listed) = crate::support::post_json(
        &nodes[0],
        "/v1/agents/chat/tasks",
        json!({ "text": "t3", "request_id": "two-3" }),
    )
    .await;
    assert_eq!(listed["duplicate"], true, "{listed}");
    for node in nodes {
        stop(node).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_a_node_killed_mid_run_completes_on_the_other_node() {
    let Some(nats) =
        NatsServer::start_or_skip("a_task_of_a_node_killed_mid_run_completes_on_the_other_node")
    else {
        return;
    };
    // Node 1's model never answers; node 2's does: which one answered says where it ran.
    let stuck = ScriptedServer::with_responder(|_| Turn::hang()).await;
    let live =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let extra = "[bus]\nack_wait = \"2s\"\n";
    let (p1, p2) = (Project::new(), Project::new());
    p1.with_mock_and(&stuck.base_url(), extra)
        .write("agents.d/chat.toml", "");
    p2.with_mock_and(&live.base_url(), extra)
        .write("agents.d/chat.toml", "");
    let start = async |project: &Project, name: &str| {
        let mut cmd = project.clawbus();
        cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", name]);
        spawn_up(project, cmd).await
    };
    let node1 = start(&p1, "n1").await;
    let body = json!({ "text": "survive", "request_id": "kill-1" });
    let (status, queued) = post_task(&node1, "chat", body).await;
    assert_eq!(status, 202, "{queued}");
    eventually(
        "node 1 is running the task (its model got the call)",
        async || stuck.request_count() == 1,
    )
    .await;
    let node2 = start(&p2, "n2").await;
    super::durable::kill9(node1);
    let task_id = queued["task_id"].as_str().unwrap().to_string();
    let mut done = serde_json::Value::Null;
    eventually("the task succeeded on node 2", async || {
        done = super::system::task(&node2, &task_id).await;
        done["state"] == "succeeded"
    })
    .await;
    assert_eq!(done["result"]["text"], "re: survive", "{done}");
    assert_eq!(live.request_count(), 1, "node 2 ran it once");
    assert_eq!(stuck.request_count(), 1, "node 1 did not run it again");
    stop(node2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_delivery_replayed_to_another_node_is_refused() {
    let Some(nats) =
        NatsServer::start_or_skip("a_webhook_delivery_replayed_to_another_node_is_refused")
    else {
        return;
    };
    const SECRET: &str = "hook-secret-for-tests";
    let hook = "[webhooks.deploys]\nagent = \"ops\"\nsecret_env = \"TEST_HOOK_SECRET\"\n";
    let model = ScriptedServer::with_responder(|_| Turn::text("deployed")).await;
    let projects = [Project::new(), Project::new()];
    let mut nodes = Vec::new();
    for (i, project) in projects.iter().enumerate() {
        project
            .with_mock_and(&model.base_url(), hook)
            .write("agents.d/ops.toml", "");
        let mut cmd = project.clawbus();
        let name = format!("n{}", i + 1);
        cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", &name])
            .env("TEST_HOOK_SECRET", SECRET);
        nodes.push(spawn_up(project, cmd).await);
    }
    let body = json!({ "event": "deploy" }).to_string();
    let now_s = super::webhooks::now_s();
    let sig = clawbus::gateway::webhooks::sign(SECRET.as_bytes(), now_s, body.as_bytes()).unwrap();
    let deliver = async |node: &super::system::Child, delivery: &str| {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/hooks/deploys", node.url))
            .header("Content-Type", "application/json")
            .header("X-Clawbus-Delivery", delivery)
            .header("X-Clawbus-Timestamp", now_s.to_string())
            .header("X-Clawbus-Signature", sig.clone())
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json::<serde_json::Value>().await.unwrap())
    };
    let (status, first) = deliver(&nodes[0], "d-1").await;
    assert_eq!(status, 202, "{first}");
    let (status, replayed) = deliver(&nodes[1], "d-2").await;
    assert_eq!(status, 401, "{replayed}");
    assert_eq!(
        replayed["error"]["code"], "replayed_signature",
        "the signature store is the cluster's: {replayed}"
    );
    for node in nodes {
        stop(node).await;
    }
}

/// `clawbus cron add` on one node is seen by the other, and an every-second job that both
/// nodes' schedulers run fires once per scheduled time: every fire is one run in the shared
/// history and one model call, whichever node took it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_added_on_one_node_is_seen_by_the_other_and_each_fire_runs_once() {
    let Some(nats) = NatsServer::start_or_skip(
        "a_cron_job_added_on_one_node_is_seen_by_the_other_and_each_fire_runs_once",
    ) else {
        return;
    };
    let model = ScriptedServer::with_responder(|_| Turn::text("tick")).await;
    let projects = [Project::new(), Project::new()];
    let mut nodes = Vec::new();
    for (i, project) in projects.iter().enumerate() {
        project
            .with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
        let mut cmd = project.clawbus();
        let name = format!("n{}", i + 1);
        cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", &name]);
        nodes.push(spawn_up(project, cmd).await);
    }
    let mut cmd = projects[0].clawbus();
    cmd.args([
        "cron",
        "add",
        "--agent",
        "chat",
        "--every",
        "1s",
        "--message",
        "tick",
    ]);
    cmd.args(["--name", "beat", "--url", &nodes[0].url]);
    let added: serde_json::Value = serde_json::from_str(&crate::support::succeeded(
        &crate::support::run_cmd(cmd).await,
    ))
    .unwrap();
    let id = added["id"].as_str().unwrap().to_string();
    let listed = crate::support::get_json(&nodes[1], "/v1/cron").await;
    let seen = listed["jobs"].as_array().unwrap();
    assert!(
        seen.iter().any(|v| v["job"]["id"] == id.as_str()),
        "the other node lists the job: {listed}"
    );
    let runs_path = format!("/v1/cron/{id}/runs");
    eventually("five fires ran", async || {
        let runs = crate::support::get_json(&nodes[1], &runs_path).await;
        runs["runs"].as_array().is_some_and(|r| r.len() >= 5)
    })
    .await;
    // Disabled on the other node: both schedulers stop firing it.
    let (status, off) =
        crate::support::post_json(&nodes[1], &format!("/v1/cron/{id}/disable"), json!({})).await;
    assert_eq!(status, 200, "{off}");
    let settled = async || {
        let runs = crate::support::get_json(&nodes[0], &runs_path).await;
        let list = runs["runs"].as_array().cloned().unwrap_or_default();
        let state = crate::support::get_json(&nodes[0], &format!("/v1/cron/{id}")).await;
        state["state"]["lease"].is_null().then_some(list)
    };
    let mut runs = Vec::new();
    eventually("the last fire ended", async || match settled().await {
        Some(list) => {
            runs = list;
            true
        }
        None => false,
    })
    .await;
    let mut at: Vec<u64> = runs
        .iter()
        .map(|r| r["scheduled_ms"].as_u64().unwrap())
        .collect();
    let fires = at.len();
    at.dedup();
    assert_eq!(at.len(), fires, "one run per scheduled time: {runs:?}");
    let ran = runs.iter().filter(|r| r["outcome"] == "succeeded").count();
    assert_eq!(
        model.request_count(),
        ran,
        "each run called the model once: {runs:?}"
    );
    for node in nodes {
        stop(node).await;
    }
}

/// The bytes JetStream keeps on disk under `dir`.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Figures, not a check: the time of one turn over HTTP (keep-alive, `wait`) on the embedded bus
/// and on NATS, one node each, and the bytes the NATS store grows by per turn.
/// `cargo test --test main scenarios::nats::figure -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a figure, run by hand"]
async fn figure_turn_latency_and_bytes_per_turn_on_nats_and_local() {
    let Some(nats) = NatsServer::start_or_skip("figure_turn_latency") else {
        return;
    };
    const TURNS: usize = 200;
    let model = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    for backend in ["local", nats.url()] {
        let project = Project::new();
        project
            .with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
        let mut cmd = project.clawbus();
        cmd.args(["up", "--port", "0", "--bus", backend, "--node-id", "n1"]);
        let node = spawn_up(&project, cmd).await;
        // Warm up (connections, buckets), then measure.
        for i in 0..20 {
            let body = json!({ "text": "w", "request_id": format!("warm-{i}"), "wait": true });
            post_task(&node, "chat", body).await;
        }
        let before = disk_bytes(nats.store_dir());
        #[allow(clippy::disallowed_methods, reason = "a figure measured in real time")]
        let started = std::time::Instant::now();
        for i in 0..TURNS {
            let body = json!({
                "text": "hello",
                "request_id": format!("fig-{i}"),
                "session": format!("s{i}"),
                "wait": true,
            });
            let (status, answer) = post_task(&node, "chat", body).await;
            assert_eq!(status, 200, "{answer}");
        }
        let per_turn = started.elapsed() / TURNS as u32;
        let grew = disk_bytes(nats.store_dir()).saturating_sub(before);
        let bytes = if backend == "local" {
            String::from("n/a")
        } else {
            format!("{} B", grew / TURNS as u64)
        };
        println!("figure: {backend}: {per_turn:?} per turn, NATS store +{bytes} per turn");
        stop(node).await;
    }
}
