//! Cron over the real HTTP API and CLI: a job added over HTTP and run with `clawbus cron run`
//! reaches the agent on the cron lane; bad input answers 400 and stores nothing; `clawbus check`
//! places a bad `[[cron]]`; an announcement to a channel that does not deliver is recorded
//! failed (`no_channel`) on the run's task; after `kill -9` mid-fire an every-second job fires
//! again at once on restart (its lease taken over, not waited out).

use super::durable::kill9;
use super::system::{Child, stop, up};
use crate::support::{
    Project, eventually, eventually_within, get_json, get_text, post_json, run_cmd, send, succeeded,
};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn job(schedule: Value, agent: &str) -> Value {
    json!({
        "agent": agent,
        "schedule": schedule,
        "payload": { "kind": "agentTurn", "message": "report the queue length" },
    })
}

/// A project with one agent, `ops`, on the scripted `server`, and its daemon.
async fn ops_daemon(server: &ScriptedServer) -> (Project, clawbus::daemon::Daemon) {
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/ops.toml", "");
    let daemon = project.start().await;
    (project, daemon)
}

/// Adds the job `body` over HTTP and runs it now with `clawbus cron run`; returns its id and
/// what the CLI printed.
async fn add_and_run(
    project: &Project,
    daemon: &clawbus::daemon::Daemon,
    body: Value,
) -> (String, Value) {
    let (status, added) = send(daemon, reqwest::Method::POST, "/v1/cron", Some(body)).await;
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_str().unwrap().to_string();
    let mut cmd = project.clawbus();
    cmd.args(["cron", "run", &id, "--url", &daemon.url()]);
    let out = run_cmd(cmd).await;
    let fired = serde_json::from_str(&succeeded(&out)).unwrap();
    (id, fired)
}

#[actix_rt::test]
async fn a_job_added_over_http_and_run_from_the_cli_reaches_the_agent() {
    let server = ScriptedServer::start(vec![Turn::text("queue is empty")]).await;
    let (project, daemon) = ops_daemon(&server).await;
    let before = get_json(&daemon, "/v1/cron").await["jobs"].clone();
    // Bad input: each a 400 naming the field, nothing stored.
    let bad = [
        (
            job(json!({"kind": "cron", "expr": "61 * * * *"}), "ops"),
            "schedule.expr",
        ),
        (
            job(
                json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Nowhere/City"}),
                "ops",
            ),
            "schedule.tz",
        ),
        (
            job(json!({"kind": "at", "at": "2001-01-01T00:00:00Z"}), "ops"),
            "schedule.at",
        ),
        (
            job(json!({"kind": "every", "every_ms": 60000}), "ghost"),
            "agent",
        ),
    ];
    for (body, field) in bad {
        let (status, answer) = send(&daemon, reqwest::Method::POST, "/v1/cron", Some(body)).await;
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{message}");
    }
    let (_, answer) = send(
        &daemon,
        reqwest::Method::POST,
        "/v1/cron",
        Some(job(json!({"kind": "cron", "expr": "61 * * * *"}), "ops")),
    )
    .await;
    assert_eq!(
        answer["error"]["message"],
        "schedule.expr: invalid cron expression \"61 * * * *\": minute 61 is out of range 0-59"
    );
    assert_eq!(get_json(&daemon, "/v1/cron").await["jobs"], before);
    let (status, answer) = send(&daemon, reqwest::Method::GET, "/v1/cron?x=1", None).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );

    // A job every hour, run now from the CLI.
    let body = job(json!({"kind": "every", "every_ms": 3_600_000}), "ops");
    let (id, fired) = add_and_run(&project, &daemon, body).await;
    assert!(
        fired["request_id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("cron:{id}:"))
    );
    let runs = format!("/v1/cron/{id}/runs");
    eventually("the run is recorded as succeeded", async || {
        get_json(&daemon, &runs).await["runs"][0]["outcome"] == "succeeded"
    })
    .await;
    let task = fired["task_id"].as_str().unwrap();
    let record = get_json(&daemon, &format!("/v1/tasks/{task}")).await;
    assert_eq!(record["lane"], "cron", "{record}");
    assert_eq!(record["result"]["text"], "queue is empty");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].to_string().contains("report the queue length"));

    // list, disable, runs, rm from the CLI.
    let cli = |args: &[&str]| {
        let mut cmd = project.clawbus();
        cmd.args(["cron"]).args(args).args(["--url", &daemon.url()]);
        cmd
    };
    let out = run_cmd(cli(&["list", "--json"])).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["job"]["id"] == id.as_str())
    );
    let out = run_cmd(cli(&["disable", &id])).await;
    let disabled: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(disabled["enabled"], false);
    let out = run_cmd(cli(&["runs", &id])).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("succeeded"));
    assert_eq!(run_cmd(cli(&["rm", &id])).await.status.code(), Some(0));
    let (status, _) = send(
        &daemon,
        reqwest::Method::GET,
        &format!("/v1/cron/{id}"),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let again = run_cmd(cli(&["rm", &id])).await;
    assert_eq!(again.status.code(), Some(2));
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains(&format!("unknown cron job \"{id}\"")),
        "{said}"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn cron_add_from_the_cli_and_declared_jobs_are_listed() {
    let project = Project::new();
    project.write(
        "agents.d/ops.toml",
        "[[cron]]\nid = \"daily\"\ncron = \"0 9 * * 1-5\"\ntz = \"America/New_York\"\nmessage = \"standup\"\n",
    );
    let daemon = project.start().await;
    let mut cmd = project.clawbus();
    cmd.args([
        "cron",
        "add",
        "--agent",
        "ops",
        "--every",
        "10m",
        "--system-event",
        "tick",
        "--session",
        "main",
        "--announce",
        "chat:alice",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    succeeded(&out);
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["payload"]["kind"], "systemEvent");
    assert_eq!(added["session"], "main");
    assert_eq!(added["delivery"]["channel"], "chat");
    let jobs = get_json(&daemon, "/v1/cron").await["jobs"].clone();
    let ids: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["job"]["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"ops--daily") && ids.contains(&"heartbeat-ops"),
        "{ids:?}"
    );
    let mut cmd = project.clawbus();
    cmd.args([
        "cron",
        "add",
        "--agent",
        "ops",
        "--cron",
        "bad",
        "--message",
        "x",
        "--url",
        &daemon.url(),
    ]);
    let out = run_cmd(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid cron expression"));
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn an_announcement_to_a_channel_without_delivery_is_recorded_no_channel() {
    let server = ScriptedServer::start(vec![Turn::text("all green")]).await;
    let (project, daemon) = ops_daemon(&server).await;
    let mut body = job(json!({"kind": "every", "every_ms": 3_600_000}), "ops");
    body["delivery"] = json!({"mode": "announce", "channel": "telegram", "to": "42"});
    let (_, fired) = add_and_run(&project, &daemon, body).await;
    let task = fired["task_id"].as_str().unwrap().to_string();
    let events = async || get_text(&daemon, &format!("/v1/tasks/{task}/events")).await;
    eventually(
        "the undeliverable announcement is on the task's events",
        async || events().await.contains("event: delivery_failed"),
    )
    .await;
    let text = events().await;
    assert!(
        text.contains("\"reason\":\"no_channel\"") && text.contains("\"target\":\"telegram:42\""),
        "{text}"
    );
    daemon.shutdown().await;
}

#[test]
fn check_places_a_bad_cron_table() {
    let project = Project::new();
    project.write(
        "agents.d/ops.toml",
        "[[cron]]\nid = \"x\"\ncron = \"0 9 * * *\"\ntz = \"Mars/Base\"\nmessage = \"m\"\n",
    );
    let out = project.clawbus().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("ops.toml:4:6: field \"cron[0].tz\": unknown timezone \"Mars/Base\""),
        "{stdout}"
    );
}

/// A job's run records from a child daemon.
async fn runs_of(c: &Child, id: &str) -> Vec<Value> {
    let runs = get_json(c, &format!("/v1/cron/{id}/runs")).await;
    runs["runs"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_fire_of_an_every_second_job_fires_again_within_two_seconds_of_the_restart() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |_| {
            if second_life.load(Ordering::SeqCst) {
                Turn::text("tick")
            } else {
                Turn::hang()
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write("agents.d/ops.toml", "");
    let first = up(&project).await;
    let body = job(json!({"kind": "every", "every_ms": 1000}), "ops");
    let (status, added) = post_json(&first, "/v1/cron", body).await;
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_str().unwrap().to_string();
    // The first fire is submitted and its model call hangs: the lease is held when it dies.
    let mut in_flight = 0;
    eventually("the first fire's model call is in flight", async || {
        let view = get_json(&first, &format!("/v1/cron/{id}")).await;
        in_flight = view["state"]["lease"]["scheduled_ms"].as_u64().unwrap_or(0);
        in_flight > 0
            && view["state"]["lease"]["task_id"].is_string()
            && server.request_count() >= 1
    })
    .await;
    kill9(first);
    #[allow(
        clippy::disallowed_methods,
        reason = "the child runs on the system clock: how many fires it missed is bounded by the real time it was down"
    )]
    let killed = std::time::Instant::now();

    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    // `cron list` never shows a next fire in the past.
    let listed = get_json(&second, "/v1/cron").await;
    let now_ms = chrono::Utc::now().timestamp_millis() as u64;
    for v in listed["jobs"].as_array().unwrap() {
        let next = v["state"]["next_fire_ms"].as_u64();
        assert!(next.is_none_or(|n| n + 1000 >= now_ms), "{v}");
    }
    let mut runs = Vec::new();
    eventually_within(
        Duration::from_secs(2),
        "a fire after the interrupted one has run",
        async || {
            runs = runs_of(&second, &id).await;
            runs.iter().any(|r| {
                r["outcome"] == "succeeded" && r["scheduled_ms"].as_u64() > Some(in_flight)
            })
        },
    )
    .await;
    // The interrupted fire's run is recorded with its real outcome, once.
    let interrupted: Vec<&Value> = runs
        .iter()
        .filter(|r| r["scheduled_ms"].as_u64() == Some(in_flight))
        .collect();
    assert_eq!(interrupted.len(), 1, "{runs:#?}");
    assert_eq!(interrupted[0]["outcome"], "succeeded", "{runs:#?}");
    // Only the fires missed while it was down are skipped (catch_up = latest), not a burst.
    let skipped = runs.iter().filter(|r| r["outcome"] == "skipped").count() as u64;
    assert!(
        skipped <= killed.elapsed().as_secs() + 1,
        "{skipped} skipped in {:?}: {runs:#?}",
        killed.elapsed()
    );
    let (status, _) = post_json(&second, &format!("/v1/cron/{id}/disable"), json!({})).await;
    assert_eq!(status, 200);
    stop(second).await;
}

#[actix_rt::test]
async fn a_model_cannot_schedule_every_second_nor_past_its_cap_and_its_jobs_are_marked() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "cron",
            json!({"action": "add", "every": "1s", "message": "poll"}),
        ),
        Turn::tool_call(
            "cron",
            json!({"action": "add", "every": "10m", "message": "poll"}),
        ),
        Turn::tool_call(
            "cron",
            json!({"action": "add", "every": "1h", "message": "more"}),
        ),
        Turn::text("scheduled"),
    ])
    .await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[cron]\nmax_agent_jobs = 1\n")
        .write("agents.d/ops.toml", "[tools]\nallow = [\"cron\"]\n");
    let daemon = project.start().await;
    let body = json!({ "text": "poll the queue every second", "wait": true });
    let (_, answer) = crate::support::post_task(&daemon, "ops", body).await;
    assert_eq!(answer["state"], "succeeded", "{answer}");
    let requests = server.requests();
    let results = crate::support::tool_results(requests.last().unwrap());
    assert_eq!(results.len(), 3, "{results:?}");
    let error = |i: usize| -> Value { serde_json::from_str(&results[i]).unwrap() };
    let too_frequent = error(0);
    assert_eq!(
        too_frequent["error"]["type"], "too_frequent",
        "{too_frequent}"
    );
    assert!(
        too_frequent["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it fires every 1s but jobs you schedule may fire at most every 1m"),
        "{too_frequent}"
    );
    assert!(
        results[1].contains("\"created_by\": \"agent:ops\""),
        "{}",
        results[1]
    );
    assert_eq!(error(2)["error"]["type"], "too_many_jobs", "{}", results[2]);
    // One job stored, marked as the model's; `cron list` shows who made each job.
    let jobs = get_json(&daemon, "/v1/cron").await["jobs"].clone();
    let made: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["job"]["created_by"] == "agent:ops")
        .collect();
    assert_eq!(made.len(), 1, "{jobs}");
    let mut cmd = project.clawbus();
    cmd.args(["cron", "list", "--url", &daemon.url()]);
    let listed = succeeded(&run_cmd(cmd).await);
    assert!(
        listed.lines().next().unwrap().contains("CREATED_BY"),
        "{listed}"
    );
    let line = listed
        .lines()
        .find(|l| l.contains("agent:ops"))
        .unwrap_or_else(|| panic!("no job marked agent:ops: {listed}"));
    assert!(line.contains("every 10m"), "{line}");
    assert!(
        listed
            .lines()
            .any(|l| l.contains("heartbeat-ops") && l.contains("\theartbeat\t"))
    );
    daemon.shutdown().await;
}
