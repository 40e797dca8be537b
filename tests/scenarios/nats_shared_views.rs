//! What every node of a NATS cluster sees alike (a real `nats-server` ≥ 2.11, nodes as
//! separate `clawbus up` processes): the session index, so a session run on one node is listed,
//! shown and counted on every node; and approval requests, so one asked by a run on one node is
//! listed and answered on another and the run goes on with that answer; and a deleted session,
//! whose shared row and log go with it, on every node; and a command allowed `always`, which
//! no node asks for again.

use super::nats_cluster::{gated_model, node, said};
use super::system::stop;
use crate::support::{
    Project, eventually, get_json, last_user, post_task, run_cmd, send, tool_results,
};
use clawbus::testkit::{Gate, NatsServer, ScriptedServer, Turn};
use serde_json::{Value, json};

const AGENT_KEY: &str = "agent:chat:api:direct:idx";

/// The row of `key` in a node's `GET /v1/sessions`, if listed.
fn listed(sessions: &Value, key: &str) -> Option<Value> {
    sessions["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions: {sessions}"))
        .iter()
        .find(|r| r["key"] == key)
        .cloned()
}

/// A session's first turn runs on node 1 while node 2 is not up. Node 2, started after, lists
/// it (`GET /v1/sessions`, `clawbus sessions`) and shows it (`GET /v1/sessions/{key}`) with
/// its turn count and tokens. Two more turns, one posted to each node (whichever runs it),
/// are counted once each, and both nodes list the same counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_run_on_one_node_is_listed_shown_and_counted_on_another() {
    let test = "a_session_run_on_one_node_is_listed_shown_and_counted_on_another";
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
    let turn = |text: &str| json!({ "text": text, "request_id": format!("idx-{text}"), "session": "idx", "wait": true, "timeout_ms": 30_000 });
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let (status, answer) = post_task(&n1, "chat", turn("first")).await;
    assert_eq!(status, 200, "{answer}");
    let n2 = node(&p2, &nats, "n2", &[]).await;

    let row = listed(&get_json(&n2, "/v1/sessions").await, AGENT_KEY)
        .expect("node 2 lists the session node 1 ran");
    assert_eq!(row["turns"], 1, "{row}");
    assert!(row["tokens_in"].as_u64().unwrap() > 0, "{row}");
    let mut cli = p2.clawbus();
    cli.args(["sessions", "--json", "--url", &n2.url]);
    let out = run_cmd(cli).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(AGENT_KEY),
        "{stdout}"
    );
    let shown = get_json(&n2, &format!("/v1/sessions/{AGENT_KEY}")).await;
    assert_eq!(
        said(&shown),
        [("user", "first"), ("assistant", "re: first")]
            .map(|(r, t)| (r.to_string(), t.to_string())),
        "node 2 shows the turn node 1 ran: {shown}"
    );

    for (n, text) in [(&n2, "second"), (&n1, "third")] {
        let (status, answer) = post_task(n, "chat", turn(text)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["text"], format!("re: {text}"), "{answer}");
    }
    let mut rows = Vec::new();
    for n in [&n1, &n2] {
        rows.push(listed(&get_json(n, "/v1/sessions").await, AGENT_KEY).unwrap());
    }
    for row in &rows {
        assert_eq!(row["turns"], 3, "every turn counted once: {row}");
    }
    for field in [
        "turns",
        "tokens_in",
        "tokens_out",
        "updated_ms",
        "session_id",
    ] {
        assert_eq!(rows[0][field], rows[1][field], "{field}: {rows:?}");
    }
    assert!(
        rows[0]["tokens_in"].as_u64() > row["tokens_in"].as_u64(),
        "tokens grew: {rows:?}"
    );
    stop(n1).await;
    stop(n2).await;
}

/// A run on node 1 asks to `exec` a command (ask mode). Node 2, started after, lists the
/// pending request (`clawbus approvals`) and allows it (`clawbus approvals allow`); the run
/// on node 1 sees the answer, runs the command and succeeds. The request stays answered:
/// denying it on node 1 is refused, and both nodes show it allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_node_is_answered_on_another() {
    let test = "an_approval_asked_on_one_node_is_answered_on_another";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call("exec", json!({ "command": "touch approved.txt" }))
        } else {
            Turn::text("done")
        }
    })
    .await;
    let (p1, p2) = (Project::new(), Project::new());
    for p in [&p1, &p2] {
        p.with_mock_and(&model.base_url(), "").write(
            "agents.d/chat.toml",
            "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n",
        );
    }
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let task = {
        let (url, token) = (n1.url.clone(), n1.token.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": "make the file", "wait": true, "timeout_ms": 60_000 }))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let mut id = String::new();
    eventually("node 1 lists the pending request", async || {
        let all = get_json(&n1, "/v1/approvals").await;
        match all["approvals"].as_array().and_then(|a| a.first()) {
            Some(rec) if rec["state"] == "pending" => {
                id = rec["id"].as_str().unwrap().to_string();
                true
            }
            _ => false,
        }
    })
    .await;
    let n2 = node(&p2, &nats, "n2", &[]).await;
    let mut list = p2.clawbus();
    list.args(["approvals", "--url", &n2.url]);
    let stdout = String::from_utf8_lossy(&run_cmd(list).await.stdout).into_owned();
    assert!(
        stdout.contains(&id) && stdout.contains("touch approved.txt"),
        "node 2 lists node 1's request: {stdout}"
    );
    let mut allow = p2.clawbus();
    allow.args(["approvals", "allow", &id, "--url", &n2.url]);
    let allowed = run_cmd(allow).await;
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let body = tokio::time::timeout(crate::support::NET, task)
        .await
        .expect("the run on node 1 goes on once answered on node 2")
        .unwrap();
    assert_eq!(body["state"], "succeeded", "{body}");
    assert!(
        p1.state_dir().join("workspaces/chat/approved.txt").exists(),
        "the command ran on node 1"
    );
    let mut deny = p1.clawbus();
    deny.args(["approvals", "deny", &id, "--url", &n1.url]);
    assert_eq!(
        run_cmd(deny).await.status.code(),
        Some(1),
        "an answered request stays answered, on any node"
    );
    for n in [&n1, &n2] {
        let rec = get_json(n, &format!("/v1/approvals/{id}")).await;
        assert_eq!(rec["state"], "allowed", "{rec}");
    }
    stop(n1).await;
    stop(n2).await;
}

/// A run on node 1 asks to `exec` a command; node 2 (hosting another agent) allows it with
/// `clawbus approvals allow --always`. Node 1 stops and node 3, started after, runs the same
/// command for the agent without asking: the entry is the cluster's, not the answering and
/// asking nodes' only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_allowed_always_on_one_node_is_not_asked_again_on_a_node_started_after() {
    let test = "a_command_allowed_always_on_one_node_is_not_asked_again_on_a_node_started_after";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call("exec", json!({ "command": "touch approved.txt" }))
        } else {
            Turn::text("done")
        }
    })
    .await;
    let projects = [Project::new(), Project::new(), Project::new()];
    for p in &projects {
        p.with_mock_and(&model.base_url(), "")
            .write(
                "agents.d/chat.toml",
                "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"5s\"\n",
            )
            .write("agents.d/other.toml", "");
    }
    let [p1, p2, p3] = &projects;
    let n1 = node(p1, &nats, "n1", &["--agents-here", "chat"]).await;
    let n2 = node(p2, &nats, "n2", &["--agents-here", "other"]).await;
    let task = |n: &super::system::Child| {
        let (url, token) = (n.url.clone(), n.token.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": "make the file", "wait": true, "timeout_ms": 60_000 }))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let first = task(&n1);
    let mut id = String::new();
    eventually("node 2 lists node 1's request", async || {
        let all = get_json(&n2, "/v1/approvals").await;
        match all["approvals"].as_array().and_then(|a| a.first()) {
            Some(rec) if rec["state"] == "pending" => {
                id = rec["id"].as_str().unwrap().to_string();
                true
            }
            _ => false,
        }
    })
    .await;
    let mut allow = p2.clawbus();
    allow.args(["approvals", "allow", &id, "--always", "--url", &n2.url]);
    let allowed = run_cmd(allow).await;
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let body = tokio::time::timeout(crate::support::NET, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["state"], "succeeded", "{body}");
    assert!(p1.state_dir().join("workspaces/chat/approved.txt").exists());
    stop(n1).await;

    let n3 = node(p3, &nats, "n3", &["--agents-here", "chat"]).await;
    let body = tokio::time::timeout(crate::support::NET, task(&n3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["state"], "succeeded", "{body}");
    assert!(
        p3.state_dir().join("workspaces/chat/approved.txt").exists(),
        "node 3 ran the command: {body}"
    );
    let all = get_json(&n3, "/v1/approvals").await;
    assert_eq!(
        all["approvals"].as_array().map(Vec::len),
        Some(1),
        "node 3 did not ask again: {all}"
    );
    stop(n2).await;
    stop(n3).await;
}

/// On a node of a cluster, `clawbus sessions delete` removes the session's shared row and its
/// shared transcript log: `GET /v1/sessions/{key}` is 404, and the next turn to the key starts
/// a fresh conversation with a new transcript id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_deleted_on_a_node_loses_its_shared_row_and_log_and_starts_afresh() {
    let test = "a_session_deleted_on_a_node_loses_its_shared_row_and_log_and_starts_afresh";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let model =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let p = Project::new();
    p.with_mock_and(&model.base_url(), "")
        .write("agents.d/chat.toml", "");
    let turn = |text: &str| json!({ "text": text, "request_id": format!("del-{text}"), "session": "idx", "wait": true, "timeout_ms": 30_000 });
    let n1 = node(&p, &nats, "n1", &[]).await;
    let (status, answer) = post_task(&n1, "chat", turn("first")).await;
    assert_eq!(status, 200, "{answer}");
    let before = listed(&get_json(&n1, "/v1/sessions").await, AGENT_KEY).unwrap();

    let mut cli = p.clawbus();
    cli.args(["sessions", "delete", AGENT_KEY, "--url", &n1.url]);
    let out = run_cmd(cli).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("deleted session {AGENT_KEY}"));
    let gone = get_json(&n1, &format!("/v1/sessions/{AGENT_KEY}")).await;
    assert_eq!(gone["error"]["code"], "unknown_session", "{gone}");

    let (status, answer) = post_task(&n1, "chat", turn("again")).await;
    assert_eq!(status, 200, "{answer}");
    let asked = model.requests().last().unwrap()["messages"].to_string();
    assert!(
        !asked.contains("first"),
        "the deleted log is not read: {asked}"
    );
    let shown = get_json(&n1, &format!("/v1/sessions/{AGENT_KEY}")).await;
    assert_eq!(
        said(&shown),
        [("user", "again"), ("assistant", "re: again")]
            .map(|(r, t)| (r.to_string(), t.to_string())),
        "{shown}"
    );
    assert_ne!(
        shown["session"]["session_id"], before["session_id"],
        "{shown}"
    );
    assert_eq!(shown["session"]["turns"], 1, "{shown}");
    stop(n1).await;
}

/// A session runs on node 1 only (node 2 hosts another agent). While a run of it is held on
/// node 1, a delete on node 2 is refused (409 `session_busy`, naming node 1's lease) and the
/// run finishes untouched. Once node 1 is idle, with its live session actor and its own row
/// still in place, `clawbus sessions delete` on node 2 removes it; node 1's next run of the key
/// starts afresh: a new session id, its turns counted from zero, nothing of the old
/// conversation sent to the model, and both nodes list the same fresh row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_deleted_on_another_node_starts_afresh_where_it_ran_and_a_running_one_is_refused()
{
    let test =
        "a_session_deleted_on_another_node_starts_afresh_where_it_ran_and_a_running_one_is_refused";
    let Some(nats) = NatsServer::start_or_skip(test) else {
        return;
    };
    let gate = Gate::new();
    let model = gated_model(&gate).await;
    let (p1, p2) = (Project::new(), Project::new());
    for p in [&p1, &p2] {
        p.with_mock_and(&model.base_url(), "")
            .write("agents.d/chat.toml", "")
            .write("agents.d/other.toml", "");
    }
    let turn = |text: &str| json!({ "text": text, "request_id": format!("xdel-{text}"), "session": "idx", "wait": true, "timeout_ms": 60_000 });
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let n2 = node(&p2, &nats, "n2", &["--agents-here", "other"]).await;
    let (status, answer) = post_task(&n1, "chat", turn("first")).await;
    assert_eq!(status, 200, "{answer}");

    let held = {
        let (url, token, body) = (n1.url.clone(), n1.token.clone(), turn("held"));
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    eventually("node 1 runs the held turn", async || {
        model.requests().iter().any(|r| last_user(r) == "held")
    })
    .await;
    let path = format!("/v1/sessions/{AGENT_KEY}");
    let (status, refused) = send(&n2, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "session_busy", "{refused}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(why.contains("another node") && why.contains("n1/"), "{why}");
    gate.open();
    let body = tokio::time::timeout(crate::support::NET, held)
        .await
        .expect("the held run finishes")
        .unwrap();
    assert_eq!(body["state"], "succeeded", "{body}");
    let before = listed(&get_json(&n2, "/v1/sessions").await, AGENT_KEY).unwrap();
    assert_eq!(
        before["turns"], 2,
        "the refused delete left the session: {before}"
    );

    let mut cli = p2.clawbus();
    cli.args(["sessions", "delete", AGENT_KEY, "--url", &n2.url]);
    let out = run_cmd(cli).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in [&n1, &n2] {
        let gone = get_json(n, &path).await;
        assert_eq!(gone["error"]["code"], "unknown_session", "{gone}");
    }

    let (status, answer) = post_task(&n1, "chat", turn("again")).await;
    assert_eq!(status, 200, "{answer}");
    let asked = model.requests().last().unwrap()["messages"].to_string();
    assert!(
        !asked.contains("first") && !asked.contains("held"),
        "node 1 does not carry the deleted conversation on: {asked}"
    );
    let shown = get_json(&n1, &path).await;
    assert_eq!(
        said(&shown),
        [("user", "again"), ("assistant", "re: again")]
            .map(|(r, t)| (r.to_string(), t.to_string())),
        "{shown}"
    );
    let mut rows = Vec::new();
    for n in [&n1, &n2] {
        rows.push(listed(&get_json(n, "/v1/sessions").await, AGENT_KEY).unwrap());
    }
    for row in &rows {
        assert_ne!(
            row["session_id"], before["session_id"],
            "a fresh session: {row}"
        );
        assert_eq!(row["turns"], 1, "counted from zero: {row}");
        assert_eq!(row["session_id"], rows[0]["session_id"], "{rows:?}");
    }
    stop(n1).await;
    stop(n2).await;
}

/// A session run on node 1 is compacted on node 2 (`clawbus sessions compact --max-lines`):
/// node 2 takes the session's lease, reads the shared log and appends the compaction record to
/// it; the next turn, on node 1, sees only the kept messages, and both nodes show the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_compacted_on_one_node_is_compacted_for_the_next_turn_on_another() {
    let test = "a_session_compacted_on_one_node_is_compacted_for_the_next_turn_on_another";
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
    let turn = |text: &str| json!({ "text": text, "request_id": format!("cmp-{text}"), "session": "idx", "wait": true, "timeout_ms": 30_000 });
    let n1 = node(&p1, &nats, "n1", &[]).await;
    let n2 = node(&p2, &nats, "n2", &[]).await;
    for text in ["first", "second", "third"] {
        let (status, answer) = post_task(&n1, "chat", turn(text)).await;
        assert_eq!(status, 200, "{answer}");
    }

    let mut cli = p2.clawbus();
    cli.args([
        "sessions",
        "compact",
        AGENT_KEY,
        "--max-lines",
        "2",
        "--url",
        &n2.url,
    ]);
    let out = run_cmd(cli).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("compacted session {AGENT_KEY}: 2 messages kept")),
        "{stdout}"
    );
    for n in [&n1, &n2] {
        let shown = get_json(n, &format!("/v1/sessions/{AGENT_KEY}")).await;
        let records = shown["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "compaction")
            .count();
        assert_eq!(records, 1, "the shared log holds the record: {shown}");
        assert_eq!(said(&shown).len(), 6, "and every message: {shown}");
    }

    let (status, answer) = post_task(&n1, "chat", turn("fourth")).await;
    assert_eq!(status, 200, "{answer}");
    let asked = model.requests().last().unwrap()["messages"].to_string();
    assert!(
        asked.contains("re: third") && !asked.contains("second"),
        "node 1's next turn starts from the compacted history: {asked}"
    );
    stop(n1).await;
    stop(n2).await;
}
