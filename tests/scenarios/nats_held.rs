//! A node killed (kill -9) while it holds transcript lines for an unreachable NATS server: at
//! its restart the next run of the session appends them to the shared log, once and in order,
//! before its own lines.

use super::durable::kill9;
use super::nats_cluster::{gated_model, health, node, parked};
use super::system::stop;
use crate::support::{Project, eventually, post_task};
use clawbus::testkit::{Gate, NatsServer};
use serde_json::json;

/// This node's records of held lines for `agent`'s sessions.
fn held_records(project: &Project, agent: &str) -> usize {
    let dir = project.state_dir().join("sessions").join(agent);
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "held"))
        .count()
}

/// The run's reply is written while NATS is away (held, recorded beside the node's copy), and
/// the node is killed before the server comes back. Restarted on the same state dir, its next
/// run of the session appends the held reply first: the model sees the whole history, the
/// reply once, and the record is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_held_by_a_node_killed_while_nats_is_away_reach_the_shared_log_at_its_restart() {
    let test = "lines_held_by_a_node_killed_while_nats_is_away_reach_the_shared_log_at_its_restart";
    let Some(mut nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let gate = Gate::new();
    let model = gated_model(&gate).await;
    let p1 = Project::new();
    p1.with_mock_and(
        &model.base_url(),
        "[bus]\nack_wait = \"60s\"\nsession_lease_ttl = \"10s\"\n",
    )
    .write("agents.d/chat.toml", "");
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let body = json!({ "text": "held-crash", "request_id": "crash-1", "session": "crash" });
    let (status, queued) = post_task(&n1, "chat", body).await;
    assert_eq!(status, 202, "{queued}");
    eventually("the run is at the model", async || {
        model.request_count() == 1
    })
    .await;
    nats.stop().unwrap();
    eventually("node 1 sees NATS away", async || health(&n1).await.0 == 503).await;
    gate.open();
    eventually(
        "the run ended while NATS is away, its reply held",
        async || parked(&health(&n1).await.1) == 1 && held_records(&p1, "chat") == 1,
    )
    .await;
    kill9(n1);
    nats.start_again().unwrap();
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let body = json!({ "text": "and then?", "request_id": "crash-2", "session": "crash", "wait": true, "timeout_ms": 60_000 });
    let (status, answer) = post_task(&n1, "chat", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "re: and then?", "{answer}");
    let next = model.requests().last().unwrap().clone();
    let history: Vec<(String, String)> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default().to_string();
            (m["role"].as_str().unwrap_or_default().to_string(), text)
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user", "held-crash"),
        ("assistant", "re: held-crash"),
        ("user", "and then?"),
    ]
    .iter()
    .map(|(r, t)| (r.to_string(), t.to_string()))
    .collect();
    assert_eq!(
        history, expected,
        "the held reply is in the log once: {next}"
    );
    assert_eq!(held_records(&p1, "chat"), 0, "the record is gone");
    stop(n1).await;
}
