//! Retries and dead letters: a passing model failure is tried again with backoff, resuming from
//! the journal; a final one fails at once; past `max_attempts` the task is dead-lettered, and
//! posting it again (or `tasks retry`) runs it as its next attempt.

use crate::support::{NET, Project, eventually, get_json, last_user, post_task, run_cmd};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const FAST_RETRIES: &str =
    "[limits]\nmax_attempts = 3\nretry_backoff = \"10ms\"\nretry_backoff_max = \"40ms\"\n";

async fn until_ended(daemon: &clawbus::daemon::Daemon, task_id: &str) -> Value {
    let mut last = Value::Null;
    eventually("the task ended", async || {
        last = get_json(daemon, &format!("/v1/tasks/{task_id}")).await;
        !matches!(last["state"].as_str(), Some("queued" | "running"))
    })
    .await;
    last
}

/// A model that fails `flaky` twice with a 503 and then answers `finally`, answers `limited`
/// with a 429 and `auth` with a 401, and anything else with `re: <text>`.
async fn by_error_class() -> ScriptedServer {
    let flaky = AtomicUsize::new(0);
    ScriptedServer::with_responder(move |req| match last_user(req).as_str() {
        "flaky" if flaky.fetch_add(1, Ordering::SeqCst) < 2 => Turn::http_error(503),
        "flaky" => Turn::text("finally"),
        "limited" => Turn::http_error(429),
        "auth" => Turn::http_error(401),
        other => Turn::text(format!("re: {other}")),
    })
    .await
}

#[actix_rt::test]
async fn passing_failures_are_retried_and_final_ones_are_not() {
    let server = by_error_class().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", FAST_RETRIES);
    let daemon = project.start().await;

    let (_, flaky_task) = post_task(&daemon, "chat", json!({ "text": "flaky" })).await;
    let done = until_ended(&daemon, flaky_task["task_id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["result"]["text"], "finally");
    let listed = get_json(&daemon, "/v1/tasks?state=succeeded").await;
    let row = &listed["tasks"].as_array().unwrap()[0];
    assert_eq!(row["attempts"], 3, "{row}");
    // Each attempt resumed from the journal: the model saw the message once every time.
    for req in server.requests().iter().filter(|r| last_user(r) == "flaky") {
        let users = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .count();
        assert_eq!(users, 1, "{req}");
    }

    let (_, auth_task) = post_task(&daemon, "chat", json!({ "text": "auth" })).await;
    let failed = until_ended(&daemon, auth_task["task_id"].as_str().unwrap()).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    let auth_calls = server
        .requests()
        .iter()
        .filter(|r| last_user(r) == "auth")
        .count();
    assert_eq!(auth_calls, 1, "an auth error is not tried again");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_task_failing_every_attempt_is_dead_lettered_and_runs_again_when_asked() {
    let down = Arc::new(AtomicBool::new(true));
    let server = {
        let down = down.clone();
        ScriptedServer::with_responder(move |req| {
            if down.load(Ordering::SeqCst) {
                Turn::http_error(503)
            } else {
                Turn::text(format!("re: {}", last_user(req)))
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", FAST_RETRIES);
    let daemon = project.start().await;
    let (_, first) = post_task(
        &daemon,
        "chat",
        json!({ "text": "outage", "request_id": "dl-1" }),
    )
    .await;
    let (_, second) = post_task(
        &daemon,
        "chat",
        json!({ "text": "outage two", "request_id": "dl-2" }),
    )
    .await;
    for t in [&first, &second] {
        let dead = until_ended(&daemon, t["task_id"].as_str().unwrap()).await;
        assert_eq!(dead["state"], "dead_lettered", "{dead}");
        assert!(
            dead["error"].as_str().unwrap().contains("after 3 attempts"),
            "{dead}"
        );
    }
    assert_eq!(server.request_count(), 6, "three attempts each");
    let listed = get_json(&daemon, "/v1/tasks?state=dead_lettered").await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 2, "{listed}");

    // The outage is over: posting the same request again is an explicit retry.
    down.store(false, Ordering::SeqCst);
    let (status, again) = post_task(
        &daemon,
        "chat",
        json!({ "text": "outage", "request_id": "dl-1", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], false);
    assert_eq!(
        again["task_id"], first["task_id"],
        "the same task, its next attempt"
    );
    assert_eq!(again["result"]["text"], "re: outage");

    // `clawbus tasks retry` does the same for the other one.
    let id = second["task_id"].as_str().unwrap();
    let out = run_cmd({
        let mut cmd = project.clawbus();
        cmd.args(["tasks", "retry", id, "--url", &daemon.url()])
            .env("CLAWBUS_TOKEN", daemon.token());
        cmd
    })
    .await;
    assert!(out.status.success(), "{out:?}");
    let done = until_ended(&daemon, id).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    // A succeeded task is not retried.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/tasks/{id}/retry", daemon.url()))
        .bearer_auth(daemon.token())
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 409);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn two_hundred_concurrent_posts_with_duplicates_get_one_terminal_answer_each() {
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[lanes]\nmain = 16\n")
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    // 160 distinct request ids; 40 of the 200 posts repeat one of them (20 %).
    let ids: Vec<String> = (0..200)
        .map(|i| format!("c-{}", if i % 5 == 4 { i - 1 } else { i }))
        .collect();
    let mut posts = Vec::new();
    for id in &ids {
        let (url, token, id) = (daemon.url(), daemon.token().to_string(), id.clone());
        posts.push(tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": format!("t {id}"), "request_id": id, "wait": true }))
                .timeout(NET)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }));
    }
    let mut answers: std::collections::HashMap<String, Vec<Value>> = Default::default();
    for p in posts {
        let a = tokio::time::timeout(NET, p).await.unwrap().unwrap();
        answers
            .entry(a["request_id"].as_str().unwrap().to_string())
            .or_default()
            .push(a);
    }
    assert_eq!(answers.len(), 160);
    for (id, got) in &answers {
        let task_ids: std::collections::HashSet<&str> =
            got.iter().map(|a| a["task_id"].as_str().unwrap()).collect();
        assert_eq!(task_ids.len(), 1, "one task for {id}: {got:?}");
        for a in got {
            assert_eq!(a["state"], "succeeded", "{a}");
            assert_eq!(a["result"]["text"], format!("re: t {id}"));
        }
    }
    assert_eq!(server.request_count(), 160, "each request id ran once");
    let succeeded = get_json(&daemon, "/v1/tasks?state=succeeded").await;
    assert_eq!(succeeded["tasks"].as_array().unwrap().len(), 160);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_failing_primary_falls_over_and_the_events_say_so() {
    let primary = ScriptedServer::with_responder(|_| Turn::http_error(503)).await;
    let backup =
        ScriptedServer::with_responder(|req| Turn::text(format!("backup: {}", last_user(req))))
            .await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.flaky-primary]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\n[providers.steady-backup]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n",
                primary.base_url(),
                backup.base_url()
            ),
        )
        .write(
            "agents.d/chat.toml",
            "model = \"flaky-primary/m\"\nfallbacks = [\"steady-backup/m\"]\n",
        );
    let daemon = project.start().await;
    let (status, done) = post_task(&daemon, "chat", json!({ "text": "hi", "wait": true })).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "backup: hi");
    assert_eq!(primary.request_count(), 1);
    let task_id = done["task_id"].as_str().unwrap();
    let body = crate::support::get_text(&daemon, &format!("/v1/tasks/{task_id}/events")).await;
    assert!(
        body.contains("\"fell_over\"")
            && body.contains("flaky-primary/m")
            && body.contains("steady-backup/m"),
        "the events name both models: {body}"
    );
    daemon.shutdown().await;
}

/// The `retry` events of a finished task: (attempt, delay_ms), in order.
async fn retry_events(daemon: &clawbus::daemon::Daemon, task_id: &str) -> Vec<(u64, u64)> {
    let body = crate::support::get_text(daemon, &format!("/v1/tasks/{task_id}/events")).await;
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|ev| ev["event"]["type"] == "retry")
        .map(|ev| {
            (
                ev["event"]["attempt"].as_u64().unwrap(),
                ev["event"]["delay_ms"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `[retry]` per agent and `max_attempts` per task: transient twice then success waits as the
/// policy says; a rate limit is its own class (retried by default, not by an agent that retries
/// transient errors only); a task's own `max_attempts` dead-letters it sooner.
#[actix_rt::test]
async fn the_retry_policy_of_the_agent_and_the_task_applies_by_error_class() {
    let server = by_error_class().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write(
            "agents.d/chat.toml",
            "[retry]\nmax_attempts = 3\nbase_ms = 20\nmax_ms = 30\n",
        )
        .write(
            "agents.d/strict.toml",
            "[retry]\nbase_ms = 10\nretry_on = [\"transient\"]\n",
        );
    let daemon = project.start().await;
    let calls = |text: &str| {
        server
            .requests()
            .iter()
            .filter(|r| last_user(r) == text)
            .count()
    };

    let (_, flaky_task) = post_task(&daemon, "chat", json!({ "text": "flaky" })).await;
    let id = flaky_task["task_id"].as_str().unwrap();
    let done = until_ended(&daemon, id).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let retries = retry_events(&daemon, id).await;
    assert_eq!(retries.len(), 2, "{retries:?}");
    // 20 ms, then doubled but capped at 30 ms; each ±20 % jitter.
    assert_eq!((retries[0].0, retries[1].0), (2, 3), "{retries:?}");
    assert!((16..=24).contains(&retries[0].1), "{retries:?}");
    assert!((24..=36).contains(&retries[1].1), "{retries:?}");
    let listed = get_json(&daemon, "/v1/tasks?state=succeeded&agent=chat").await;
    assert_eq!(listed["tasks"][0]["attempts"], 3, "{listed}");

    let (_, limited) = post_task(&daemon, "strict", json!({ "text": "limited" })).await;
    let failed = until_ended(&daemon, limited["task_id"].as_str().unwrap()).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(calls("limited"), 1, "strict retries transient errors only");

    let (_, capped) = post_task(
        &daemon,
        "chat",
        json!({ "text": "limited", "max_attempts": 2 }),
    )
    .await;
    let dead = until_ended(&daemon, capped["task_id"].as_str().unwrap()).await;
    assert_eq!(dead["state"], "dead_lettered", "{dead}");
    assert!(
        dead["error"].as_str().unwrap().contains("after 2 attempts"),
        "{dead}"
    );
    assert_eq!(calls("limited"), 3, "chat retried the rate limit once");

    let (_, auth) = post_task(&daemon, "chat", json!({ "text": "auth" })).await;
    let failed = until_ended(&daemon, auth["task_id"].as_str().unwrap()).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(calls("auth"), 1, "auth is never tried again");

    let (status, refused) =
        post_task(&daemon, "chat", json!({ "text": "x", "max_attempts": 9 })).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("max_attempts: 9 is out of range"),
        "{refused}"
    );
    daemon.shutdown().await;
}
