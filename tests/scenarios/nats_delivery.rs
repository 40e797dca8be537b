//! The outbox across nodes on one NATS JetStream (a real `nats-server` ≥ 2.11, nodes as
//! separate `clawbus up` processes), through the outbound webhook channel: a reply staged and
//! being tried on a node killed with SIGKILL is adopted and delivered by another node, exactly
//! once, and its delivery record shows on every node.

use super::delivery::{Receiver, SECRET, deliver, events};
use super::system::{Child, spawn_up, stop};
use crate::support::{Project, eventually, eventually_within, get_json, last_user, send};
use clawbus::testkit::{NatsServer, ScriptedServer, Turn};
use serde_json::Value;
use std::time::Duration;

/// Node `id` on `nats` in `project` (agents `ops` and `idle`, the hook `deploys` replying to
/// `receiver`, retries an hour apart), hosting only `here`.
async fn node(project: &Project, nats: &NatsServer, id: &str, here: &str) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", id])
        .args(["--agents-here", here])
        .env("TEST_HOOK_SECRET", SECRET);
    spawn_up(project, cmd).await
}

fn project(model: &ScriptedServer, receiver: &Receiver) -> Project {
    let project = Project::new();
    let hook = format!(
        "[webhooks.deploys]\nagent = \"ops\"\nsecret_env = \"TEST_HOOK_SECRET\"\ndeliver_url = \"{}\"\n\n[delivery]\nbackoff = \"1h\"\nbackoff_max = \"1h\"\nmax_attempts = 5\n",
        receiver.url()
    );
    project
        .with_mock_and(&model.base_url(), &hook)
        .write("agents.d/ops.toml", "")
        .write("agents.d/idle.toml", "");
    project
}

/// A node's delivery records (`GET /v1/deliveries`).
async fn records(child: &Child) -> Vec<Value> {
    get_json(child, "/v1/deliveries").await["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Node 1 runs a hook's task and tries its reply; the receiver refuses it, and the retry is due
/// in an hour. Node 1 is killed with SIGKILL: node 2 adopts the reply once node 1's claim
/// lapses and delivers it (same delivery id), exactly once. Node 2 records it; node 1,
/// started again, shows that record, does not send the reply again, and delivers a new reply
/// as before; `GET /v1/deliveries` lists the newest `limit` records, and refuses a bad
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_left_by_a_node_killed_mid_delivery_is_delivered_once_by_another() {
    let test = "a_reply_left_by_a_node_killed_mid_delivery_is_delivered_once_by_another";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let receiver = Receiver::start(vec![503]).await;
    let (p1, p2) = (project(&model, &receiver), project(&model, &receiver));
    let n1 = node(&p1, &nats, "n1", "ops").await;
    let n2 = node(&p2, &nats, "n2", "idle").await;

    let task_id = deliver(&n1, "d-1", "deploy db").await;
    eventually("node 1 tried the reply once", async || {
        receiver.calls().len() == 1
    })
    .await;
    super::durable::kill9(n1);
    #[allow(
        clippy::disallowed_methods,
        reason = "a printed figure: the claim lapses in real time"
    )]
    let killed = std::time::Instant::now();
    eventually_within(
        Duration::from_secs(60),
        "node 2 delivers the reply",
        async || events(&n2, &task_id).await.contains("event: delivered"),
    )
    .await;
    // A figure, not a check: about the claim's time to live (10 s) and a sweep (5 s) at most.
    eprintln!(
        "Reply adopted and delivered by node 2 {} ms after node 1's kill -9",
        killed.elapsed().as_millis()
    );
    let calls = receiver.calls();
    assert_eq!(calls.len(), 2, "the refused try, then node 2's delivery");
    let (_, delivery, body, _) = &calls[1];
    assert_eq!(delivery, &task_id, "the same delivery id");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["text"], "re: deploy db");
    let on_two = records(&n2).await;
    assert_eq!(on_two.len(), 1, "{on_two:?}");
    assert_eq!(on_two[0]["task_id"], task_id.as_str());
    assert_eq!(on_two[0]["state"], "delivered");

    // Node 1 again, over its own state folder: it shows node 2's record, and what it starts
    // with does not send the reply a second time.
    let n1 = node(&p1, &nats, "n1", "ops").await;
    assert_eq!(
        records(&n1).await,
        on_two,
        "node 2's record, seen on node 1"
    );
    let second = deliver(&n1, "d-2", "deploy web").await;
    eventually("node 1 delivers a new reply", async || {
        events(&n1, &second).await.contains("event: delivered")
    })
    .await;
    let calls = receiver.calls();
    assert_eq!(
        calls.len(),
        3,
        "one more call, for the new reply: {calls:?}"
    );
    assert_eq!(calls[2].1, second);
    assert_eq!(model.request_count(), 2, "the first task ran once");
    assert_eq!(records(&n2).await.len(), 2, "both records on node 2");
    let newest = get_json(&n2, "/v1/deliveries?limit=1").await;
    assert_eq!(
        newest["deliveries"][0]["task_id"],
        second.as_str(),
        "{newest}"
    );
    let (status, answer) = send(&n2, reqwest::Method::GET, "/v1/deliveries?limit=0", None).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "limit must be a whole number from 1 to 1000"
    );
    stop(n1).await;
    stop(n2).await;
}
