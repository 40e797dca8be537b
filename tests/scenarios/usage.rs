//! Usage and cost: a turn's tokens summed over its model calls on the task record, priced by
//! `[prices]`, and summed again by `GET /v1/usage` and `clawbus usage --json`.
use crate::support::{Project, get_json, get_text, post_task, run_cmd};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// The tokens the scripted server reports for a request: a quarter of its messages' JSON.
fn prompt_tokens(request: &Value) -> u64 {
    (request["messages"].to_string().len() / 4) as u64
}

#[actix_rt::test]
async fn usage_of_three_calls_adds_up_on_the_task_and_in_clawbus_usage() {
    let read_a = json!({ "path": "a.txt" });
    let read_b = json!({ "path": "b.txt" });
    let answer = "Both notes are read.";
    let server = ScriptedServer::start(vec![
        Turn::tool_call("read", read_a.clone()),
        Turn::tool_call("read", read_b.clone()),
        Turn::text(answer),
    ])
    .await;
    let project = Project::new();
    project
        .with_mock_and(
            &server.base_url(),
            "[prices.\"mock/m\"]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n",
        )
        .write("agents.d/reader.toml", "[tools]\nprofile = \"minimal\"\n")
        .write("agents.d/reader/a.txt", "alpha\n")
        .write("agents.d/reader/b.txt", "beta\n");
    let daemon = project.start().await;
    let (status, body) = post_task(
        &daemon,
        "reader",
        json!({ "text": "read both notes", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "succeeded", "{body}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let prompt: u64 = requests.iter().map(prompt_tokens).sum();
    // The server reports a quarter of the reply's characters, plus one, per call.
    let call = |args: &Value| (("read".len() + args.to_string().len()) / 4 + 1) as u64;
    let completion = call(&read_a) + call(&read_b) + (answer.len() / 4 + 1) as u64;
    let usage = &body["result"]["usage"];
    assert_eq!(usage["prompt_tokens"], prompt, "{usage}");
    assert_eq!(usage["completion_tokens"], completion, "{usage}");
    assert_eq!(usage["cache_read_tokens"], 0, "{usage}");
    assert_eq!(usage["cache_write_tokens"], 0, "{usage}");
    assert!(
        usage.get("estimated").is_none(),
        "the server sent usage: {usage}"
    );
    assert_eq!(usage["agent"], "reader");
    assert_eq!(usage["model"], "mock/m");
    let cost = (prompt as f64 * 2.0 + completion as f64 * 10.0) / 1e6;
    let got = usage["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!((got - cost).abs() < 1e-12, "cost {got}, expected {cost}");

    let task_id = body["task_id"].as_str().unwrap().to_string();
    let record = get_json(&daemon, &format!("/v1/tasks/{task_id}")).await;
    assert_eq!(record["result"]["usage"], *usage, "{record}");

    let out = run_cmd({
        let mut cmd = project.clawbus();
        cmd.args(["usage", "--json", "--since", "1h", "--url", &daemon.url()])
            .env("CLAWBUS_TOKEN", daemon.token());
        cmd
    })
    .await;
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = listed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    for sum in [&rows[0], &listed["total"]] {
        assert_eq!(sum["tasks"], 1, "{listed}");
        assert_eq!(sum["prompt_tokens"], prompt, "{listed}");
        assert_eq!(sum["completion_tokens"], completion, "{listed}");
        assert_eq!(sum["estimated"], false, "{listed}");
        let c = sum["cost_usd"].as_f64().unwrap_or(-1.0);
        assert!((c - cost).abs() < 1e-12, "{listed}");
    }
    assert_eq!(rows[0]["agent"], "reader");
    assert_eq!(rows[0]["model"], "mock/m");

    let metrics = get_text(&daemon, "/metrics").await;
    let series = |name: &str, labels: &str| {
        let head = format!("{name}{{{labels}}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(head.as_str()))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    assert_eq!(
        series(
            "clawbus_tokens_total",
            "agent=\"reader\",kind=\"input\",model=\"mock/m\""
        ),
        Some(prompt),
        "{metrics}"
    );
    assert_eq!(
        series(
            "clawbus_tokens_total",
            "agent=\"reader\",kind=\"output\",model=\"mock/m\""
        ),
        Some(completion),
        "{metrics}"
    );
    assert_eq!(
        series(
            "clawbus_cost_usd_micros_total",
            "agent=\"reader\",model=\"mock/m\""
        ),
        Some((cost * 1e6).round() as u64),
        "{metrics}"
    );

    let other = get_json(&daemon, "/v1/usage?agent=nobody").await;
    assert_eq!(other["error"]["code"], "unknown_agent", "{other}");
}

#[actix_rt::test]
async fn a_server_that_sends_no_usage_gets_an_estimate_marked_as_such() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let (status, body) = post_task(
        &daemon,
        "echo",
        json!({ "text": "hello there", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let usage = &body["result"]["usage"];
    assert_eq!(usage["estimated"], true, "{body}");
    assert!(usage["prompt_tokens"].as_u64().unwrap_or(0) > 0, "{usage}");
    assert!(
        usage.get("cost_usd").is_none(),
        "no price, no cost: {usage}"
    );
    let summed = get_json(&daemon, "/v1/usage?agent=echo").await;
    assert_eq!(summed["total"]["estimated"], true, "{summed}");
    assert_eq!(
        summed["total"]["prompt_tokens"], usage["prompt_tokens"],
        "{summed}"
    );
}

#[actix_rt::test]
async fn a_fallback_that_answers_is_in_the_transcript_and_its_tokens_are_counted_under_its_model() {
    let primary = ScriptedServer::with_responder(|_| Turn::http_error(503)).await;
    let backup = ScriptedServer::with_responder(|_| Turn::text("backup answers")).await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.flaky]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\n\
                 [providers.steady]\nkind = \"openai\"\nbase_url = \"{}\"\nmax_retries = 0\n\n\
                 [prices.\"flaky/big\"]\ninput_per_mtok = 100.0\noutput_per_mtok = 100.0\n\n\
                 [prices.\"steady/small\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
                primary.base_url(),
                backup.base_url()
            ),
        )
        .write(
            "agents.d/chat.toml",
            "model = \"flaky/big\"\nfallbacks = [\"steady/small\"]\n",
        );
    let daemon = project.start().await;
    let (status, done) = post_task(
        &daemon,
        "chat",
        json!({ "text": "hi", "session": "s", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["text"], "backup answers", "{done}");
    assert_eq!(primary.request_count(), 1);

    // The usage is the fallback's, at the fallback's price.
    let requests = backup.requests();
    assert_eq!(requests.len(), 1);
    let prompt = prompt_tokens(&requests[0]);
    let completion = ("backup answers".len() / 4 + 1) as u64;
    let usage = &done["result"]["usage"];
    assert_eq!(usage["model"], "steady/small", "{usage}");
    assert_eq!(usage["prompt_tokens"], prompt, "{usage}");
    let models = usage["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{usage}");
    assert_eq!(models[0]["model"], "steady/small", "{usage}");
    let cost = (prompt as f64 * 1.0 + completion as f64 * 2.0) / 1e6;
    let got = usage["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!((got - cost).abs() < 1e-12, "cost {got}, expected {cost}");

    // The transcript has the failed attempt, then the reply and the model that gave it.
    let session = get_json(&daemon, "/v1/sessions/agent:chat:api:direct:s").await;
    let entries = session["entries"].as_array().unwrap();
    let moved: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "model_fell_over")
        .collect();
    assert_eq!(moved.len(), 1, "{session}");
    assert_eq!(moved[0]["from"], "flaky/big");
    assert_eq!(moved[0]["to"], "steady/small");
    assert!(
        moved[0]["reason"].as_str().unwrap().contains("503"),
        "{session}"
    );
    let reply = entries
        .iter()
        .position(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(entries[reply]["model"], "steady/small", "{session}");
    assert!(
        entries.iter().position(|e| e["type"] == "model_fell_over") < Some(reply),
        "the move comes before the reply: {session}"
    );

    // The task's events say which model answered.
    let task_id = done["task_id"].as_str().unwrap();
    let events = crate::support::get_text(&daemon, &format!("/v1/tasks/{task_id}/events")).await;
    assert!(
        events.contains("\"answered_by\"") && events.contains("steady/small"),
        "{events}"
    );

    // `clawbus usage` and the counters count the tokens under the fallback, none under the primary.
    let summed = get_json(&daemon, "/v1/usage?agent=chat").await;
    let rows = summed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{summed}");
    assert_eq!(rows[0]["model"], "steady/small", "{summed}");
    assert_eq!(rows[0]["prompt_tokens"], prompt, "{summed}");
    let metrics = crate::support::get_text(&daemon, "/metrics").await;
    let input = format!(
        "clawbus_tokens_total{{agent=\"chat\",kind=\"input\",model=\"steady/small\"}} {prompt}"
    );
    assert!(metrics.lines().any(|l| l == input), "{metrics}");
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("clawbus_tokens_total") && l.contains("flaky/big")),
        "{metrics}"
    );
    daemon.shutdown().await;
}
