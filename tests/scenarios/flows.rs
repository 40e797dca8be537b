//! Flows on a real gateway: parallel nodes on a slow scripted model, refusal before any model
//! request, one run per request id, cancel, and `kill -9` of a `clawbus up` child mid-flow.

use super::durable::kill9;
use super::system::up;
use crate::support::{NET, Project, eventually, get_json, last_user, post_json};
use clawbus::testkit::{Gate, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const DIAMOND: &str = r#"[flow]
name = "diamond"
[[node]]
id = "a"
agent = "researcher"
prompt = "start here"
[[node]]
id = "b"
agent = "researcher"
depends_on = ["a"]
prompt = "b from {{a.output}}"
[[node]]
id = "c"
agent = "researcher"
depends_on = ["a"]
prompt = "c from {{a.output}}"
[[node]]
id = "d"
agent = "writer"
depends_on = ["b", "c"]
prompt = "combine [{{b.output}}] and [{{c.output}}]"
"#;

/// A project with agents `researcher` and `writer` on the mock provider and `flow` in flows.d/.
fn project(base_url: &str, flow: &str) -> Project {
    let p = Project::new();
    p.with_mock_provider(base_url, "30s", 0)
        .write("agents.d/researcher.toml", "")
        .write("agents.d/writer.toml", "")
        .write("flows.d/flow.toml", flow);
    p
}

/// How many recorded model requests carried `text` in their last user message.
fn asked(server: &ScriptedServer, text: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| last_user(r).contains(text))
        .count()
}

async fn run_state(g: &impl crate::support::Gateway, id: &str) -> Value {
    get_json(g, &format!("/v1/flow-runs/{id}")).await
}

async fn until_ended(g: &impl crate::support::Gateway, id: &str) -> Value {
    let mut last = Value::Null;
    eventually("the flow run ended", async || {
        last = run_state(g, id).await;
        last["state"] != "running"
    })
    .await;
    last
}

#[actix_rt::test]
async fn a_diamond_runs_its_middle_nodes_together_and_the_last_prompt_holds_both() {
    let gate = Gate::new();
    let server = {
        let gate = gate.clone();
        ScriptedServer::with_responder(move |req| {
            let text = last_user(req);
            if text.contains("b from") {
                Turn::gated(&gate, Turn::text("B-out"))
            } else if text.contains("c from") {
                Turn::gated(&gate, Turn::text("C-out"))
            } else if text.contains("combine") {
                Turn::text("done")
            } else {
                Turn::text("A-out")
            }
        })
        .await
    };
    let p = project(&server.base_url(), DIAMOND);
    let daemon = p.start().await;
    let (status, run) = post_json(&daemon, "/v1/flows/diamond/runs", json!({})).await;
    assert_eq!(status, 202, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    // Both middle nodes reach the (slow, gated) model before either answers.
    eventually("b and c are both at the model", async || {
        asked(&server, "b from A-out") == 1 && asked(&server, "c from A-out") == 1
    })
    .await;
    assert_eq!(
        run_state(&daemon, &id).await["nodes"][1]["state"],
        "running"
    );
    gate.open();
    let done = until_ended(&daemon, &id).await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    assert_eq!(asked(&server, "combine [B-out] and [C-out]"), 1);
    assert!(
        server.max_concurrency() >= 2,
        "b and c were in flight together"
    );
}

#[actix_rt::test]
async fn bad_flows_are_refused_before_any_model_request() {
    let server = ScriptedServer::with_responder(|_| Turn::text("x")).await;
    let p = project(&server.base_url(), DIAMOND);
    let daemon = p.start().await;
    let bad = [
        (
            "[flow]\nname = \"c\"\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\ndepends_on = [\"b\"]\n[[node]]\nid = \"b\"\nagent = \"writer\"\nprompt = \"y\"\ndepends_on = [\"a\"]\n",
            "bad.toml:12:15: field \"node[1].depends_on[0]\": dependency cycle: a → b → a",
        ),
        (
            "[flow]\nname = \"u\"\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\ndepends_on = [\"ghost\"]\n",
            "bad.toml:7:15: field \"node[0].depends_on[0]\": unknown node \"ghost\"",
        ),
        (
            "[flow]\nname = \"t\"\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\n[[node]]\nid = \"b\"\nagent = \"writer\"\nprompt = \"see {{a.output}}\"\n",
            "bad.toml:10:17: field \"node[1].prompt\": node \"a\" is not upstream of this node",
        ),
    ];
    for (source, want) in bad {
        let body = json!({ "source": source, "path": "bad.toml" });
        let (status, answer) = post_json(&daemon, "/v1/flow-runs", body).await;
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(want), "{message}");
    }
    assert_eq!(server.request_count(), 0, "no model request was made");
    // `clawbus check` covers flows.d/ too.
    p.write("flows.d/bad.toml", bad[0].0);
    let out = crate::support::output({
        let mut c = p.clawbus();
        c.arg("check");
        c
    });
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("✗ ") && text.contains("dependency cycle: a → b → a"),
        "{text}"
    );
}

#[actix_rt::test]
async fn one_request_id_runs_once_and_a_cancel_starts_no_dependant() {
    let server = ScriptedServer::with_responder(|req| {
        if last_user(req).contains("start here") {
            Turn::hang()
        } else {
            Turn::text("ok")
        }
    })
    .await;
    let p = project(&server.base_url(), DIAMOND);
    let daemon = p.start().await;
    let body = json!({ "request_id": "flow-req-1" });
    let (s1, one) = post_json(&daemon, "/v1/flows/diamond/runs", body.clone()).await;
    let (s2, two) = post_json(&daemon, "/v1/flows/diamond/runs", body).await;
    assert_eq!((s1, s2), (202, 202));
    assert_eq!(one["id"], two["id"]);
    assert_eq!(
        (one["duplicate"].clone(), two["duplicate"].clone()),
        (json!(false), json!(true))
    );
    let id = one["id"].as_str().unwrap().to_string();
    eventually("a is at the model", async || {
        asked(&server, "start here") == 1
    })
    .await;
    let (status, _) = post_json(&daemon, &format!("/v1/flow-runs/{id}/cancel"), json!({})).await;
    assert_eq!(status, 200);
    let done = until_ended(&daemon, &id).await;
    assert_eq!(done["state"], "cancelled", "{done:#}");
    for n in 1..4 {
        assert_eq!(done["nodes"][n]["state"], "cancelled", "{done:#}");
    }
    assert_eq!(
        server.request_count(),
        1,
        "only a ever reached the model, once"
    );
    let runs = get_json(&daemon, "/v1/flow-runs").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        1,
        "one run for the request id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_flow_resumes_without_running_finished_nodes_again() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            let text = last_user(req);
            if text.contains("combine") && !second_life.load(Ordering::SeqCst) {
                Turn::hang()
            } else {
                Turn::text("out")
            }
        })
        .await
    };
    let p = project(&server.base_url(), DIAMOND);
    let first = up(&p).await;
    let (status, run) = post_json(&first, "/v1/flows/diamond/runs", json!({})).await;
    assert_eq!(status, 202, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    eventually("d is at the model", async || asked(&server, "combine") == 1).await;
    kill9(first);
    second_life.store(true, Ordering::SeqCst);
    let second = up(&p).await;
    let done = tokio::time::timeout(NET * 3, until_ended(&second, &id))
        .await
        .expect("the resumed run ends");
    assert_eq!(done["state"], "succeeded", "{done:#}");
    for (text, n) in [("start here", 1), ("b from", 1), ("c from", 1)] {
        assert_eq!(asked(&server, text), n, "{text:?} was not asked again");
    }
    assert_eq!(done["nodes"][3]["output"], "out");
    super::system::stop(second).await;
}

#[actix_rt::test]
async fn the_shipped_flow_runs_on_the_shipped_agents_out_of_the_box() {
    let p = Project::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    super::agents::copy_tree(&root.join("agents.d"), &p.agents_dir());
    super::agents::copy_tree(&root.join("flows.d"), &p.path().join("flows.d"));
    std::fs::copy(root.join("clawbus.toml"), p.config_path()).unwrap();
    let daemon = p.start().await;
    let body = json!({ "inputs": { "topic": "tides" }, "wait": true });
    let (status, done) = post_json(&daemon, "/v1/flows/brief/runs", body).await;
    assert_eq!(status, 200, "{done:#}");
    assert_eq!(done["state"], "succeeded", "{done:#}");
    let nodes = done["nodes"].as_array().unwrap();
    let state = |id: &str| nodes.iter().find(|n| n["id"] == id).unwrap().clone();
    assert_eq!(
        state("history")["output"],
        "echo: research the history of tides"
    );
    assert_eq!(state("review")["output"]["verdict"], "pass");
    let revise = state("revise");
    assert_eq!(revise["state"], "skipped");
    assert_eq!(
        revise["reason"],
        "condition is false: review.output.verdict == \"fail\""
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn the_websocket_gateway_lists_runs_shows_and_cancels_flows() {
    use super::ws_client::{Client, Up};
    let server = ScriptedServer::with_responder(|req| {
        if last_user(req).contains("start here") {
            Turn::hang()
        } else {
            Turn::text("ok")
        }
    })
    .await;
    let p = project(&server.base_url(), DIAMOND);
    let up = Up::start(&p).await;
    let (mut c, _) = Client::connect(&up, &up.token).await;
    let listed = c.call("flows.list", json!({})).await;
    assert_eq!(listed["flows"][0]["name"], "diamond", "{listed}");
    let run = c
        .call(
            "flows.run",
            json!({ "name": "diamond", "requestId": "ws-1" }),
        )
        .await;
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["state"], "running", "{run}");
    eventually("a is at the model", async || {
        asked(&server, "start here") == 1
    })
    .await;
    let got = c.call("flows.get", json!({ "id": id })).await;
    assert_eq!(got["nodes"][0]["state"], "running", "{got}");
    c.call("flows.cancel", json!({ "id": id })).await;
    let mut last = Value::Null;
    eventually("the run is cancelled", async || {
        last = c.call("flows.get", json!({ "id": id })).await;
        last["state"] == "cancelled"
    })
    .await;
    let runs = c.call("flows.runs", json!({})).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
}

#[actix_rt::test]
async fn an_agent_allowed_flow_run_starts_a_flow_and_reads_its_outcome() {
    let server = ScriptedServer::with_responder(|req| {
        let results = crate::support::tool_results(req);
        let text = last_user(req);
        if text.contains("run the diamond") {
            match results.first() {
                None => Turn::tool_call("flow_run", json!({ "flow": "diamond", "wait": true })),
                Some(r) => Turn::text(format!("flow said: {r}")),
            }
        } else {
            Turn::text("part")
        }
    })
    .await;
    let p = project(&server.base_url(), DIAMOND);
    p.write(
        "agents.d/boss.toml",
        "[tools]\nprofile = \"full\"\nallow = [\"flow_run\"]\n",
    )
    .write("agents.d/plain.toml", "[tools]\nprofile = \"full\"\n");
    let daemon = p.start().await;
    let (status, done) = crate::support::post_task(
        &daemon,
        "boss",
        json!({ "text": "run the diamond", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let text = done["result"]["text"].as_str().unwrap();
    assert!(text.starts_with("flow said: {"), "{text}");
    assert!(text.contains("\"state\":\"succeeded\""), "{text}");
    let runs = get_json(&daemon, "/v1/flow-runs").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    // Off by default: even the full profile does not offer it.
    let (_, plain) =
        crate::support::post_task(&daemon, "plain", json!({ "text": "hi", "wait": true })).await;
    assert_eq!(plain["state"], "succeeded");
    let offered = crate::support::offered_tools(server.requests().last().unwrap());
    assert!(!offered.contains(&"flow_run".to_string()), "{offered:?}");
    assert!(offered.contains(&"cron".to_string()), "{offered:?}");
}

#[actix_rt::test]
async fn the_flow_commands_run_show_and_exit_by_the_outcome() {
    let server = ScriptedServer::with_responder(|req| {
        if last_user(req).contains("c from") {
            Turn::http_error(401)
        } else {
            Turn::text("fine")
        }
    })
    .await;
    let p = project(&server.base_url(), DIAMOND);
    p.write("flows.d/ok.toml", "[flow]\nname = \"ok\"\n[inputs]\nn = { type = \"integer\" }\n[[node]]\nid = \"x\"\nagent = \"writer\"\nprompt = \"n is {{inputs.n}}\"\n");
    let daemon = p.start().await;
    let cli = |args: &[&str]| {
        let mut cmd = p.clawbus();
        cmd.args(args)
            .args(["--url", &daemon.url()])
            .env("CLAWBUS_TOKEN", daemon.token());
        crate::support::run_cmd(cmd)
    };
    let out = cli(&["flow", "run", "ok", "--input", "n=3", "--wait"]).await;
    let text = crate::support::succeeded(&out);
    assert!(
        text.contains(" ok  succeeded") && text.contains("x "),
        "{text}"
    );
    assert_eq!(asked(&server, "n is 3"), 1);
    let out = cli(&["flow", "run", "ok", "--input", "n=three"]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad input starts nothing: {out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("input \"n\": \"three\" is not a valid integer")
    );
    // c fails (auth, not retried), d is skipped, b succeeded: partially succeeded, exit 1.
    let out = cli(&["flow", "run", "diamond", "--wait", "--json"]).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["state"], "partially_succeeded", "{run:#}");
    let id = run["id"].as_str().unwrap();
    let out = cli(&["flow", "status", id]).await;
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("c ") && l.contains("failed") && l.contains("HTTP 401")),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("d ")
            && l.contains("skipped")
            && l.contains("upstream node \"c\" failed")),
        "{table}"
    );
    let out = cli(&["flow", "watch", id]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "watch of an ended run exits by its state"
    );
    let out = cli(&["flow", "list"]).await;
    let text = crate::support::succeeded(&out);
    assert!(text.contains("diamond") && text.contains("ok"), "{text}");
}

/// `(event name, data)` of each complete SSE block in `text`.
fn sse_blocks(text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut name, mut data) = (String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if let Ok(v) = serde_json::from_str(&data) {
            out.push((name, v));
        }
    }
    out
}

#[actix_rt::test]
async fn the_events_route_streams_the_run_then_each_event_live_and_ends_with_the_run() {
    let gate = Gate::new();
    let server = {
        let gate = gate.clone();
        ScriptedServer::with_responder(move |req| {
            if last_user(req).contains("start here") {
                Turn::gated(&gate, Turn::text("A-out"))
            } else {
                Turn::text("ok")
            }
        })
        .await
    };
    let p = project(&server.base_url(), DIAMOND);
    let daemon = p.start().await;
    let (_, run) = post_json(&daemon, "/v1/flows/diamond/runs", json!({})).await;
    let id = run["id"].as_str().unwrap().to_string();
    let mut resp = reqwest::Client::new()
        .get(format!("{}/v1/flow-runs/{id}/events", daemon.url()))
        .bearer_auth(daemon.token())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    // The first event is the run as it stands: a is held at the model, nothing has ended.
    let mut body = String::new();
    while sse_blocks(&body).is_empty() {
        let chunk = tokio::time::timeout(NET, resp.chunk())
            .await
            .unwrap()
            .unwrap();
        body.push_str(&String::from_utf8_lossy(
            &chunk.expect("the stream is open"),
        ));
    }
    let (name, first) = sse_blocks(&body).remove(0);
    assert_eq!(
        (name.as_str(), first["state"].as_str()),
        ("run", Some("running"))
    );
    assert_eq!(first["nodes"][0]["state"], "running", "{first}");
    gate.open();
    // Then each event live, and the stream ends after `run_finished`.
    while let Some(chunk) = tokio::time::timeout(NET, resp.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events = sse_blocks(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.last(), Some(&"run_finished"), "{names:?}");
    assert_eq!(events.last().unwrap().1["state"], "succeeded");
    let finished: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "node_finished")
        .filter_map(|(_, e)| e["node"].as_str())
        .collect();
    assert_eq!(finished.len(), 4, "{names:?}");
    assert_eq!((finished[0], finished[3]), ("a", "d"), "{finished:?}");
    assert!(
        events
            .iter()
            .all(|(_, e)| e.get("run_id").is_none_or(|r| r == &json!(id)))
    );
    // A run that has ended: its record alone, and the stream ends.
    let again =
        sse_blocks(&crate::support::get_text(&daemon, &format!("/v1/flow-runs/{id}/events")).await);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(
        (again[0].0.as_str(), again[0].1["state"].as_str()),
        ("run", Some("succeeded"))
    );
    let (status, _) = send_get(&daemon, "/v1/flow-runs/nope/events").await;
    assert_eq!(status, 404);
    daemon.shutdown().await;
}

async fn send_get(g: &impl crate::support::Gateway, path: &str) -> (u16, Value) {
    crate::support::send(g, reqwest::Method::GET, path, None).await
}

const OUTER: &str = r#"[flow]
name = "outer"
[[node]]
id = "first"
agent = "researcher"
prompt = "outer first"
[[node]]
id = "sub"
flow = "diamond"
depends_on = ["first"]
[[node]]
id = "last"
agent = "writer"
depends_on = ["sub"]
prompt = "outer last [{{sub.output}}]"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_child_flow_resumes_parent_and_child_without_asking_again() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            let text = last_user(req);
            if text.contains("combine") && !second_life.load(Ordering::SeqCst) {
                Turn::hang()
            } else if text.contains("combine") {
                Turn::text("child-out")
            } else {
                Turn::text("out")
            }
        })
        .await
    };
    let p = project(&server.base_url(), DIAMOND);
    p.write("flows.d/outer.toml", OUTER);
    let first = up(&p).await;
    let (status, run) = post_json(&first, "/v1/flows/outer/runs", json!({})).await;
    assert_eq!(status, 202, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    eventually("the child's d is at the model", async || {
        asked(&server, "combine") == 1
    })
    .await;
    kill9(first);
    second_life.store(true, Ordering::SeqCst);
    let second = up(&p).await;
    let done = tokio::time::timeout(NET * 3, until_ended(&second, &id))
        .await
        .expect("the resumed run ends");
    assert_eq!(done["state"], "succeeded", "{done:#}");
    assert_eq!(done["nodes"][1]["flow"], "diamond", "{done:#}");
    assert_eq!(done["nodes"][1]["output"], "child-out", "{done:#}");
    for (text, n) in [
        ("outer first", 1),
        ("start here", 1),
        ("b from", 1),
        ("c from", 1),
    ] {
        assert_eq!(asked(&server, text), n, "{text:?} was not asked again");
    }
    assert_eq!(asked(&server, "outer last [child-out]"), 1);
    let runs = get_json(&second, "/v1/flow-runs").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        2,
        "one child run: {runs:#}"
    );
    super::system::stop(second).await;
}

const TOPICAL: &str = r#"[flow]
name = "topical"
[inputs]
topic = { type = "string" }
[[node]]
id = "look"
agent = "researcher"
prompt = "look into {{inputs.topic}}"
"#;

#[actix_rt::test]
async fn a_cron_job_added_from_the_cli_starts_the_flow_once_per_fire() {
    use crate::support::{run_cmd, succeeded};
    let server = ScriptedServer::with_responder(|_| Turn::text("found it")).await;
    let p = project(&server.base_url(), TOPICAL);
    let daemon = p.start().await;
    let mut cmd = p.clawbus();
    cmd.args([
        "cron",
        "add",
        "--agent",
        "researcher",
        "--every",
        "1h",
        "--flow",
        "topical",
        "--input",
        "topic=tides",
        "--url",
        &daemon.url(),
    ]);
    let added: Value = serde_json::from_str(&succeeded(&run_cmd(cmd).await)).unwrap();
    assert_eq!(added["payload"]["kind"], "flow", "{added}");
    let job = added["id"].as_str().unwrap().to_string();
    let mut cmd = p.clawbus();
    cmd.args(["cron", "run", &job, "--url", &daemon.url()]);
    let fired: Value = serde_json::from_str(&succeeded(&run_cmd(cmd).await)).unwrap();
    let request_id = fired["request_id"].as_str().unwrap().to_string();
    let mut runs = Value::Null;
    eventually("the fired flow run ended", async || {
        runs = get_json(&daemon, "/v1/flow-runs").await;
        runs["runs"][0]["state"] == "succeeded"
    })
    .await;
    let run = &runs["runs"][0];
    assert_eq!(run["flow"], "topical");
    assert_eq!(run["request_id"], request_id.as_str(), "keyed by the fire");
    assert_eq!(run["nodes"][0]["output"], "found it");
    assert_eq!(asked(&server, "look into tides"), 1);
    // The fire's run ends with the flow's.
    let mut history = Value::Null;
    eventually("the fire is recorded", async || {
        history = get_json(&daemon, &format!("/v1/cron/{job}/runs")).await;
        history["runs"][0]["outcome"] == "succeeded"
    })
    .await;
    // An unknown input is refused by the engine; the fire is recorded failed, naming it.
    let mut cmd = p.clawbus();
    cmd.args([
        "cron",
        "add",
        "--agent",
        "researcher",
        "--every",
        "1h",
        "--flow",
        "topical",
        "--input",
        "nope=1",
        "--url",
        &daemon.url(),
    ]);
    let bad: Value = serde_json::from_str(&succeeded(&run_cmd(cmd).await)).unwrap();
    let bad_id = bad["id"].as_str().unwrap().to_string();
    let mut cmd = p.clawbus();
    cmd.args(["cron", "run", &bad_id, "--url", &daemon.url()]);
    succeeded(&run_cmd(cmd).await);
    eventually("the bad fire is recorded failed", async || {
        let h = get_json(&daemon, &format!("/v1/cron/{bad_id}/runs")).await;
        h["runs"][0]["outcome"] == "failed"
            && h["runs"][0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("no input \"nope\""))
    })
    .await;
    assert_eq!(
        get_json(&daemon, "/v1/flow-runs").await["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    daemon.shutdown().await;
}
