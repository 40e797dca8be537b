//! Several `clawbus up` nodes on one NATS JetStream (a real `nats-server` ≥ 2.11 on loopback),
//! each a separate process: many tasks with duplicates over many sessions, the server restarted
//! under running nodes, an `agent_call` and a cycle across nodes, and `clawbus nodes`.

use super::system::{Child, spawn_up, stop};
use super::ws_client::Client;
use crate::support::{
    Project, eventually, eventually_within, get_json, last_user, output, post_json, post_task,
    run_cmd, tool_results,
};
use clawbus::testkit::{Gate, NatsServer, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Starts `clawbus up` in `project` as node `id` on `nats`, with `extra` flags. With
/// `CLAWBUS_TEST_NODE_LOGS=DIR` each node logs (at info) to `DIR/<id>.log`, for debugging.
pub(super) async fn node(project: &Project, nats: &NatsServer, id: &str, extra: &[&str]) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--bus", nats.url(), "--node-id", id])
        .args(extra);
    if let Ok(dir) = std::env::var("CLAWBUS_TEST_NODE_LOGS") {
        let log = std::fs::File::create(format!("{dir}/{id}.log")).unwrap();
        cmd.env("RUST_LOG", "info");
        return super::system::spawn_up_logging(project, cmd, log.into()).await;
    }
    spawn_up(project, cmd).await
}

/// Transcripts (one per session) node `project` wrote for `agent`.
fn transcripts(project: &Project, agent: &str) -> usize {
    let dir = project.state_dir().join("sessions").join(agent);
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count()
}

/// One run's session lease, from a `run_lease` transcript record.
#[derive(Debug)]
struct RunLease {
    request_id: String,
    holder: String,
    first: u64,
    last: u64,
}

/// The `run_lease` records node `project` wrote for `agent`, by session key.
fn run_leases(project: &Project, agent: &str) -> BTreeMap<String, Vec<RunLease>> {
    let dir = project.state_dir().join("sessions").join(agent);
    let mut out: BTreeMap<String, Vec<RunLease>> = BTreeMap::new();
    for file in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if file.path().extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(file.path()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let Some(key) = lines.first().and_then(|l| l["key"].as_str()) else {
            continue;
        };
        let records = out.entry(key.to_string()).or_default();
        for l in lines.iter().filter(|l| l["type"] == "run_lease") {
            records.push(RunLease {
                request_id: l["request_id"].as_str().unwrap().to_string(),
                holder: l["holder"].as_str().unwrap().to_string(),
                first: l["first_revision"].as_u64().unwrap(),
                last: l["last_revision"].as_u64().unwrap(),
            });
        }
    }
    out
}

/// `/healthz` of a node: its status and body.
async fn health(node: &Child) -> (u16, String) {
    let resp = reqwest::get(format!("{}/healthz", node.url)).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

const SESSIONS: usize = 30;
const PER_SESSION: usize = 10;

/// 300 posts over 30 sessions through 3 nodes, every fifth post of a session a re-post of the
/// one before (60 duplicates, 20%). A session's posts go one after another (each waits for
/// its answer), hopping across the nodes; the sessions run side by side.
///
/// Checked: every post answered, each of the 240 tasks run exactly once (the model saw each
/// text once), every duplicate answered from the store with its original task, each session's
/// texts reached the model in the order posted, every node took work, and no session ever ran
/// on two nodes at once: each run records the session lease it held (revisions of the shared
/// lease store, which only grow), and in every session, across every node's transcripts, each
/// run's lease was taken after the one before it was last renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_answer_300_tasks_with_duplicates_each_once_in_session_order() {
    let test = "three_nodes_answer_300_tasks_with_duplicates_each_once_in_session_order";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let projects = [Project::new(), Project::new(), Project::new()];
    let mut nodes = Vec::new();
    for (i, project) in projects.iter().enumerate() {
        project
            .with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
        nodes.push(node(project, &nats, &format!("n{}", i + 1), &[]).await);
    }
    let session = |s: usize| {
        let nodes = &nodes;
        async move {
            let mut answers = Vec::new();
            let mut k = 0;
            for post in 0..PER_SESSION {
                let duplicate = post % 5 == 4;
                if !duplicate {
                    k += 1;
                }
                let body = json!({
                    "text": format!("s{s}-m{k}"),
                    "request_id": format!("c-s{s}-m{k}"),
                    "session": format!("s{s}"),
                    "wait": true,
                    "timeout_ms": 30_000,
                });
                let (status, answer) = post_task(&nodes[(s + post) % 3], "chat", body).await;
                assert_eq!(status, 200, "s{s} post {post}: {answer}");
                answers.push((k, duplicate, answer));
            }
            answers
        }
    };
    let all = futures::future::join_all((0..SESSIONS).map(session)).await;
    let mut unique = 0;
    for (s, answers) in all.iter().enumerate() {
        let mut task_of: BTreeMap<usize, Value> = BTreeMap::new();
        for (k, duplicate, answer) in answers {
            assert_eq!(answer["state"], "succeeded", "{answer}");
            assert_eq!(
                answer["result"]["text"],
                format!("re: s{s}-m{k}"),
                "{answer}"
            );
            assert_eq!(answer["duplicate"], *duplicate, "{answer}");
            if *duplicate {
                assert_eq!(answer["task_id"], task_of[k], "the original task answers");
            } else {
                task_of.insert(*k, answer["task_id"].clone());
                unique += 1;
            }
        }
    }
    assert_eq!(unique, SESSIONS * PER_SESSION * 4 / 5);
    let requests = model.requests();
    assert_eq!(requests.len(), unique, "every task ran exactly once");
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for r in &requests {
        let text = last_user(r);
        let (s, k) = text.split_once("-m").unwrap();
        seen.entry(s.to_string())
            .or_default()
            .push(k.parse().unwrap());
    }
    for (s, ks) in &seen {
        let expected: Vec<usize> = (1..=ks.len()).collect();
        assert_eq!(ks, &expected, "session {s}: each text once, in order");
    }
    let ran: Vec<usize> = projects.iter().map(|p| transcripts(p, "chat")).collect();
    assert!(ran.iter().all(|n| *n > 0), "every node took work: {ran:?}");
    // A run's lease record is written once its answer is out: wait for all of them.
    let mut by_session: BTreeMap<String, Vec<RunLease>> = BTreeMap::new();
    eventually("every run's session lease is in a transcript", async || {
        by_session.clear();
        for p in &projects {
            for (key, records) in run_leases(p, "chat") {
                by_session.entry(key).or_default().extend(records);
            }
        }
        let runs: std::collections::BTreeSet<&str> = by_session
            .values()
            .flatten()
            .map(|r| r.request_id.as_str())
            .collect();
        runs.len() == unique
    })
    .await;
    assert_eq!(by_session.len(), SESSIONS, "{:?}", by_session.keys());
    let mut hopped = 0;
    for (key, records) in &mut by_session {
        records.sort_by_key(|r| r.first);
        for pair in records.windows(2) {
            assert!(
                pair[1].first > pair[0].last,
                "session {key}: a run took the lease before the one before it let go: {pair:?}"
            );
        }
        let holders: std::collections::BTreeSet<&str> =
            records.iter().map(|r| r.holder.as_str()).collect();
        hopped += usize::from(holders.len() > 1);
    }
    assert!(hopped > 0, "some session ran on more than one node");
    for node in nodes {
        stop(node).await;
    }
}

/// Node 1 runs a task whose `write` has run and whose next model call the model holds, and is
/// killed with SIGKILL. The task completes on node 2 within 15 s (its lease expires, the
/// server hands node 2 the task, node 2 reads the session's shared transcript): the write is
/// not run again (its result is in the transcript), and the next message of the session,
/// answered on node 2, carries the whole history written on node 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_run_after_a_write_its_session_goes_on_elsewhere_with_its_history() {
    let test = "a_node_killed_mid_run_after_a_write_its_session_goes_on_elsewhere_with_its_history";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let second_life = Arc::new(AtomicBool::new(false));
    let model = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            if last_user(req) == "and then?" {
                Turn::text("continued")
            } else if tool_results(req).is_empty() {
                Turn::tool_call("write", json!({ "path": "out.txt", "content": "once" }))
            } else if second_life.load(Ordering::SeqCst) {
                Turn::text("written")
            } else {
                Turn::hang()
            }
        })
        .await
    };
    let extra = "[bus]\nack_wait = \"2s\"\n";
    let (p1, p2) = (Project::new(), Project::new());
    for p in [&p1, &p2] {
        p.with_mock_and(&model.base_url(), extra)
            .write("agents.d/chat.toml", "[tools]\nprofile = \"coding\"\n");
    }
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let body = json!({ "text": "save it", "request_id": "w-1", "session": "w" });
    let (status, queued) = post_task(&n1, "chat", body).await;
    assert_eq!(status, 202, "{queued}");
    let task_id = queued["task_id"].as_str().unwrap().to_string();
    eventually(
        "the write ran and the next model call is held",
        async || model.request_count() >= 2,
    )
    .await;
    let written = p1.state_dir().join("workspaces/chat/out.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "once");
    let n2 = node(&p2, &nats, "n2", &[]).await;
    second_life.store(true, Ordering::SeqCst);
    super::durable::kill9(n1);
    let mut done = Value::Null;
    eventually_within(
        std::time::Duration::from_secs(15),
        "the task succeeded on node 2 within 15 s of the kill",
        async || {
            done = super::system::task(&n2, &task_id).await;
            done["state"] == "succeeded"
        },
    )
    .await;
    assert_eq!(done["result"]["text"], "written", "{done}");
    assert_eq!(model.request_count(), 3, "node 2 made the one call left");
    let resumed = model.requests().last().unwrap().clone();
    let results = tool_results(&resumed);
    assert_eq!(results.len(), 1, "the write's result once: {resumed}");
    assert!(
        !results[0].contains("interrupted"),
        "the write's result was read back, not run again: {results:?}"
    );
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "once");
    assert!(
        !p2.state_dir().join("workspaces/chat/out.txt").exists(),
        "node 2 did not write the file again"
    );
    // The session goes on on node 2 with everything node 1 wrote.
    let body = json!({ "text": "and then?", "request_id": "w-2", "session": "w", "wait": true, "timeout_ms": 30_000 });
    let (status, answer) = post_task(&n2, "chat", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "continued", "{answer}");
    let next = model.requests().last().unwrap().clone();
    let history: Vec<(String, String)> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let call = m["tool_calls"][0]["function"]["name"].as_str();
            let what = match (call, m["role"].as_str()) {
                (Some(name), _) => format!("call {name}"),
                (None, Some("tool")) => "result".to_string(),
                _ => m["content"].as_str().unwrap_or_default().to_string(),
            };
            (m["role"].as_str().unwrap_or_default().to_string(), what)
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user", "save it"),
        ("assistant", "call write"),
        ("tool", "result"),
        ("assistant", "written"),
        ("user", "and then?"),
    ]
    .iter()
    .map(|(r, w)| (r.to_string(), w.to_string()))
    .collect();
    assert_eq!(history, expected, "the whole history: {next}");
    stop(n2).await;
}

/// Texts starting with `held` wait at the gate; the rest are answered at once.
pub(super) async fn gated_model(gate: &Gate) -> ScriptedServer {
    let gate = gate.clone();
    ScriptedServer::with_responder(move |req| {
        let user = last_user(req);
        let answer = Turn::text(format!("re: {user}"));
        if user.starts_with("held") {
            Turn::gated(&gate, answer)
        } else {
            answer
        }
    })
    .await
}

/// The number in "`N` outcome(s) wait in the local outbox" of a `/healthz` answer.
fn parked(body: &str) -> usize {
    body.split(" outcome(s) wait in the local outbox")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Six tasks accepted (202) and running on two nodes when the server stops. While it is away:
/// `/healthz` says so, new posts are refused naming the server (HTTP 503, a WebSocket
/// `UNAVAILABLE` error, the CLI's exit code 4), and the six runs finish, their outcomes parked in each node's outbox. Once the
/// server is back: the nodes reconnect by themselves, the six end succeeded, each run once, and
/// new work is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_ride_out_a_nats_restart_without_losing_or_repeating_an_accepted_task() {
    let test = "nodes_ride_out_a_nats_restart_without_losing_or_repeating_an_accepted_task";
    let Some(mut nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let gate = Gate::new();
    let model = gated_model(&gate).await;
    let projects = [Project::new(), Project::new()];
    let mut nodes = Vec::new();
    for (i, project) in projects.iter().enumerate() {
        project
            .with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
        nodes.push(node(project, &nats, &format!("n{}", i + 1), &[]).await);
    }
    let mut accepted = Vec::new();
    for i in 0..6 {
        let body = json!({ "text": format!("held-{i}"), "request_id": format!("held-{i}"), "session": format!("h{i}") });
        let (status, answer) = post_task(&nodes[i % 2], "chat", body).await;
        assert_eq!(status, 202, "{answer}");
        accepted.push(answer["task_id"].as_str().unwrap().to_string());
    }
    eventually("the six runs are at the model", async || {
        model.request_count() == 6
    })
    .await;

    nats.stop().unwrap();
    for n in &nodes {
        eventually("the node's /healthz says NATS is away", async || {
            let (status, body) = health(n).await;
            status == 503 && body.contains(&format!("NATS at {} is unreachable", nats.url()))
        })
        .await;
    }
    let body = json!({ "text": "refused", "request_id": "refused-1", "wait": true });
    let (status, refused) = post_json(&nodes[0], "/v1/agents/chat/tasks", body).await;
    assert_eq!(status, 503, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("NATS at {}", nats.url())) && message.contains("not connected"),
        "{message}"
    );
    let (mut ws, hello) = Client::connect_to(&nodes[1].url, &nodes[1].token).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let params = json!({ "message": "refused", "agentId": "chat", "sessionKey": "w", "idempotencyKey": "refused-ws" });
    let id = ws.send("agent", params).await;
    let res = ws.answer(&id).await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "UNAVAILABLE", "{res}");
    let message = res["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("NATS at {}", nats.url())),
        "{message}"
    );
    let mut cli = projects[0].clawbus();
    cli.args(["post", "agent.chat", "refused too", "--url", &nodes[0].url])
        .env("CLAWBUS_TOKEN", &nodes[0].token);
    let out = run_cmd(cli).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("503") && stderr.contains("try again"),
        "{stderr}"
    );

    gate.open();
    eventually("the six outcomes wait in the nodes' outboxes", async || {
        let mut total = 0;
        for n in &nodes {
            total += parked(&health(n).await.1);
        }
        total == 6
    })
    .await;
    nats.start_again().unwrap();
    for n in &nodes {
        eventually("the node reconnected", async || health(n).await.0 == 200).await;
    }
    for id in &accepted {
        eventually("the accepted task succeeded", async || {
            let t = get_json(&nodes[1], &format!("/v1/tasks/{id}")).await;
            t["state"] == "succeeded"
        })
        .await;
    }
    let held = model
        .requests()
        .iter()
        .filter(|r| last_user(r).starts_with("held"))
        .count();
    assert_eq!(held, 6, "no accepted task ran twice");
    for i in 0..4 {
        let body = json!({ "text": format!("after-{i}"), "wait": true, "timeout_ms": 30_000 });
        let (status, answer) = post_task(&nodes[i % 2], "chat", body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["text"], format!("re: after-{i}"));
    }
    assert!(
        post_task(
            &nodes[0],
            "chat",
            json!({ "text": "refused", "request_id": "refused-1" })
        )
        .await
        .1["duplicate"]
            == false,
        "the refused post was never accepted"
    );
    for node in nodes {
        stop(node).await;
    }
}

/// A run answered while the server is away: its reply is written to the node's own copy and
/// held for the session's shared log, its outcome parked. Once the server is back the held
/// lines are appended, fenced, before the run lets its lease go, so the next message, run on
/// another node, reaches the model with the whole history (the lease lives 30 s here, longer
/// than the outage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_written_while_nats_is_away_reach_the_shared_log_before_another_node_goes_on() {
    let test = "lines_written_while_nats_is_away_reach_the_shared_log_before_another_node_goes_on";
    let Some(mut nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let gate = Gate::new();
    let model = gated_model(&gate).await;
    let (p1, p2) = (Project::new(), Project::new());
    for p in [&p1, &p2] {
        p.with_mock_and(&model.base_url(), "[bus]\nack_wait = \"30s\"\n")
            .write("agents.d/chat.toml", "");
    }
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let body = json!({ "text": "held-away", "request_id": "away-1", "session": "away" });
    let (status, queued) = post_task(&n1, "chat", body).await;
    assert_eq!(status, 202, "{queued}");
    let task_id = queued["task_id"].as_str().unwrap().to_string();
    eventually("the run is at the model", async || {
        model.request_count() == 1
    })
    .await;
    nats.stop().unwrap();
    eventually("node 1 sees NATS away", async || health(&n1).await.0 == 503).await;
    gate.open();
    eventually(
        "the run ended while NATS is away, its outcome parked",
        async || parked(&health(&n1).await.1) == 1,
    )
    .await;
    nats.start_again().unwrap();
    eventually("node 1 reconnected", async || health(&n1).await.0 == 200).await;
    eventually("the task succeeded", async || {
        super::system::task(&n1, &task_id).await["state"] == "succeeded"
    })
    .await;
    let n2 = node(&p2, &nats, "n2", &[]).await;
    let body = json!({ "text": "and then?", "request_id": "away-2", "session": "away", "wait": true, "timeout_ms": 60_000 });
    let (status, answer) = post_task(&n2, "chat", body).await;
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
        ("user", "held-away"),
        ("assistant", "re: held-away"),
        ("user", "and then?"),
    ]
    .iter()
    .map(|(r, t)| (r.to_string(), t.to_string()))
    .collect();
    assert_eq!(
        history, expected,
        "node 2 goes on with the whole history: {next}"
    );
    assert_eq!(model.request_count(), 2, "the held run was not run again");
    stop(n1).await;
    stop(n2).await;
}

/// `a` is hosted on node 1 only and `b` on node 2 only (`--agents-here`); each may call the
/// other.
fn split_team(model_url: &str) -> Project {
    let caller =
        |peer: &str| format!("may_call = [\"{peer}\"]\n[tools]\nallow = [\"agent_call\"]\n");
    let project = Project::new();
    project
        .with_mock_and(model_url, "")
        .write("agents.d/a.toml", &caller("b"))
        .write("agents.d/b.toml", &caller("a"));
    project
}

/// A task posted to `a` through node 2 runs on node 1 and calls `b`, which runs on node 2; a
/// call back from `b` to `a` (a cycle across the nodes) is refused at once, naming it.
/// `clawbus nodes` lists both nodes with their agents and lanes, and one that stops leaves the
/// list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_call_crosses_nodes_and_a_cycle_across_nodes_is_refused() {
    let test = "an_agent_call_crosses_nodes_and_a_cycle_across_nodes_is_refused";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model = ScriptedServer::with_responder(|req| {
        let call = |agent: &str, task: &str| {
            Turn::tool_call("agent_call", json!({ "agent": agent, "task": task }))
        };
        match (last_user(req).as_str(), tool_results(req).first()) {
            ("start", None) => call("b", "ping"),
            ("cycle", None) => call("b", "back"),
            ("back", None) => call("a", "again"),
            (user, Some(result)) => Turn::text(format!("{user} got: {result}")),
            (other, None) => Turn::text(format!("re: {other}")),
        }
    })
    .await;
    let (p1, p2) = (split_team(&model.base_url()), split_team(&model.base_url()));
    let n1 = node(&p1, &nats, "n1", &["--agents-here", "a"]).await;
    let n2 = node(&p2, &nats, "n2", &["--agents-here", "b"]).await;

    let body = json!({ "text": "start", "wait": true, "timeout_ms": 30_000 });
    let (status, done) = post_task(&n2, "a", body).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "start got: re: ping", "{done}");
    assert_eq!(
        (transcripts(&p1, "a"), transcripts(&p1, "b")),
        (1, 0),
        "a ran on node 1, b did not"
    );
    assert_eq!(
        (transcripts(&p2, "a"), transcripts(&p2, "b")),
        (0, 1),
        "b ran on node 2, a did not"
    );

    let body = json!({ "text": "cycle", "wait": true, "timeout_ms": 30_000 });
    let (status, done) = post_task(&n1, "a", body).await;
    assert_eq!(status, 200, "{done}");
    let text = done["result"]["text"].as_str().unwrap();
    assert!(text.contains("deadlock"), "{text}");
    assert!(text.contains("a → b → a"), "names the cycle: {text}");
    assert!(
        model.requests().iter().all(|r| last_user(r) != "again"),
        "a was never asked to run the cyclic call"
    );

    let mut cli = p1.clawbus();
    cli.args(["nodes", "--json", "--url", &n1.url])
        .env("CLAWBUS_TOKEN", &n1.token);
    let out = run_cmd(cli).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = listed["nodes"].as_array().unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(ids, ["n1", "n2"], "{listed}");
    assert_eq!(nodes[0]["agents"], json!(["a"]));
    assert_eq!(nodes[1]["agents"], json!(["b"]));
    assert_eq!(nodes[1]["gateway"], json!(n2.url));
    assert_eq!(nodes[0]["bus"]["connected"], true, "{listed}");
    assert!(
        nodes[0]["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["name"] == "main" && l["cap"].as_u64() > Some(0)),
        "{listed}"
    );
    stop(n2).await;
    let listed = get_json(&n1, "/v1/nodes").await;
    let ids: Vec<&str> = listed["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["n1"], "a node that stops leaves the list: {listed}");
    stop(n1).await;
}

#[test]
fn agents_here_naming_an_unknown_agent_is_refused_naming_it() {
    let project = Project::new();
    project
        .write("agents.d/a.toml", "")
        .write("agents.d/b.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0", "--agents-here", "a,zed"]);
    let out = output(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--agents-here: unknown agent \"zed\" (configured: a, b)"),
        "{stderr}"
    );
}

/// The user and assistant messages of a `GET /v1/sessions/{key}` answer, in order.
pub(super) fn said(shown: &Value) -> Vec<(String, String)> {
    shown["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {shown}"))
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m = &e["message"];
            let text = m["content"].as_str().unwrap_or_default().to_string();
            (m["role"].as_str().unwrap_or_default().to_string(), text)
        })
        .collect()
}

/// A session's first turn runs on node 1 (alone), its second on node 2 (node 1 stopped); with
/// node 1 back, `GET /v1/sessions/{key}` on either node shows both turns in order: the
/// transcript is read from the session's shared log, not from the node's own copy (which
/// holds only the turn it ran).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_run_on_two_nodes_shows_both_turns_on_either_node() {
    let test = "a_session_run_on_two_nodes_shows_both_turns_on_either_node";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let (p1, p2) = (Project::new(), Project::new());
    for p in [&p1, &p2] {
        p.with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "");
    }
    let turn = |text: &str, id: &str| json!({ "text": text, "request_id": id, "session": "two", "wait": true, "timeout_ms": 30_000 });
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let (status, answer) = post_task(&n1, "chat", turn("first", "two-1")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "re: first", "{answer}");
    let n2 = node(&p2, &nats, "n2", &[]).await;
    stop(n1).await;
    let (status, answer) = post_task(&n2, "chat", turn("second", "two-2")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "re: second", "{answer}");
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let expected: Vec<(String, String)> = [
        ("user", "first"),
        ("assistant", "re: first"),
        ("user", "second"),
        ("assistant", "re: second"),
    ]
    .iter()
    .map(|(r, t)| (r.to_string(), t.to_string()))
    .collect();
    let key = "/v1/sessions/agent:chat:api:direct:two";
    for (name, n) in [("node 1", &n1), ("node 2", &n2)] {
        let shown = get_json(n, key).await;
        assert_eq!(said(&shown), expected, "both turns on {name}: {shown}");
    }
    stop(n1).await;
    stop(n2).await;
}
