//! Full turns over HTTP against a scripted OpenAI-compatible server.

use crate::support::{Project, post_task, roles};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::json;

fn reader_project(server: &ScriptedServer, timeout: &str) -> Project {
    let p = Project::new();
    p.with_mock_provider(&server.base_url(), timeout, 0)
        .write(
            "agents.d/reader.toml",
            "description = \"Reads notes.\"\n[tools]\nprofile = \"minimal\"\nallow = [\"write\"]\n",
        )
        .write("agents.d/reader/SOUL.md", "You are careful and brief.\n")
        .write(
            "agents.d/reader/AGENTS.md",
            "Read notes before answering.\n",
        )
        .write("agents.d/reader/notes.txt", "the launch code is 4242\n");
    p
}

#[actix_rt::test]
async fn model_reads_a_workspace_file_then_answers() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("read", json!({ "path": "notes.txt" })),
        Turn::text("The note says 4242."),
    ])
    .await;
    let project = reader_project(&server, "5s");
    let daemon = project.start().await;
    let (status, body) = post_task(
        &daemon,
        "reader",
        json!({ "text": "what does the note say?", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "succeeded", "{body}");
    assert_eq!(body["result"]["text"], "The note says 4242.");
    assert_eq!(body["duplicate"], false);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "one call for the tool, one for the answer");
    assert_eq!(reqs[0]["model"], "test-model");
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(roles(&reqs[0]), ["system", "user"]);
    let system = reqs[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("You are careful and brief.")
            && system.contains("Read notes before answering."),
        "SOUL.md and AGENTS.md form the system prompt: {system}"
    );
    assert_eq!(reqs[0]["messages"][1]["content"], "what does the note say?");
    let tools: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["read", "write"],
        "the model is offered the agent's tools"
    );
    assert_eq!(reqs[0]["tools"][0]["type"], "function");
    assert_eq!(
        reqs[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["path"])
    );

    assert_eq!(roles(&reqs[1]), ["system", "user", "assistant", "tool"]);
    let call = &reqs[1]["messages"][2]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(call["function"]["arguments"].as_str().unwrap())
            .unwrap(),
        json!({ "path": "notes.txt" })
    );
    let tool_msg = &reqs[1]["messages"][3];
    assert_eq!(
        tool_msg["tool_call_id"], call["id"],
        "the tool result answers the call it belongs to"
    );
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("the launch code is 4242")
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn split_arguments_and_parallel_calls_are_paired_by_id() {
    let server = ScriptedServer::start(vec![
        Turn::tool_calls(vec![
            ("read", json!({ "path": "notes.txt" })),
            (
                "write",
                json!({ "path": "out/answer.txt", "content": "42" }),
            ),
        ])
        .split_args(3),
        Turn::text("done"),
    ])
    .await;
    let project = reader_project(&server, "5s");
    let daemon = project.start().await;
    let (_, body) = post_task(&daemon, "reader", json!({ "text": "go", "wait": true })).await;
    assert_eq!(body["state"], "succeeded", "{body}");
    let second = &server.requests()[1];
    assert_eq!(
        roles(second),
        ["system", "user", "assistant", "tool", "tool"]
    );
    let calls = second["messages"][2]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    assert_eq!(second["messages"][3]["tool_call_id"], calls[0]["id"]);
    assert_eq!(second["messages"][4]["tool_call_id"], calls[1]["id"]);
    assert!(
        second["messages"][3]["content"]
            .as_str()
            .unwrap()
            .contains("4242")
    );
    let written =
        std::fs::read_to_string(project.state_dir().join("workspaces/reader/out/answer.txt"))
            .unwrap();
    assert_eq!(
        written, "42",
        "arguments reassembled from 3-char fragments reach the tool intact"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn escaping_paths_come_back_as_error_results() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("read", json!({ "path": "../../../../etc/passwd" })),
        Turn::tool_call("read", json!({ "path": "/etc/passwd" })),
        Turn::text("I may not read that."),
    ])
    .await;
    let project = reader_project(&server, "5s");
    let daemon = project.start().await;
    let (_, body) = post_task(
        &daemon,
        "reader",
        json!({ "text": "read passwd", "wait": true }),
    )
    .await;
    assert_eq!(
        body["state"], "succeeded",
        "a refused path is recoverable: {body}"
    );
    let last = server.requests().pop().unwrap();
    for i in [3, 5] {
        let content = last["messages"][i]["content"].as_str().unwrap();
        assert!(
            content.contains("path_refused"),
            "message {i} must be a refusal: {content}"
        );
        assert!(!content.contains("root:"), "no passwd content may leak");
    }
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn model_that_never_answers_fails_the_task_with_a_clear_error() {
    let server = ScriptedServer::start(vec![Turn::hang()]).await;
    let project = reader_project(&server, "300ms");
    // A timeout is a passing failure: with one attempt allowed it is dead-lettered at once.
    project.write(
        "agents.d/reader.toml",
        "description = \"Reads notes.\"\n[limits]\nmax_attempts = 1\n",
    );
    let daemon = project.start().await;
    let (_, body) = post_task(&daemon, "reader", json!({ "text": "hello?", "wait": true })).await;
    assert_eq!(body["state"], "dead_lettered", "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("model call failed") && error.contains("300ms"),
        "the error names the model timeout: {error}"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn server_errors_are_retried_until_success() {
    let server = ScriptedServer::start(vec![
        Turn::http_error(500),
        Turn::http_error(503),
        Turn::text("third time lucky"),
    ])
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "5s", 2)
        .write("agents.d/retry.toml", "");
    let daemon = project.start().await;
    let (_, body) = post_task(
        &daemon,
        "retry",
        json!({ "text": "hi", "wait": true, "timeout_ms": 15000 }),
    )
    .await;
    assert_eq!(body["state"], "succeeded", "{body}");
    assert_eq!(body["result"]["text"], "third time lucky");
    assert_eq!(server.request_count(), 3);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_request_id_posted_twice_runs_once() {
    let server = ScriptedServer::start(vec![Turn::text("only once")]).await;
    let project = reader_project(&server, "5s");
    let daemon = project.start().await;
    let body = json!({ "text": "hi", "wait": true, "request_id": "job-7" });
    let (_, first) = post_task(&daemon, "reader", body.clone()).await;
    let (_, second) = post_task(&daemon, "reader", body).await;
    assert_eq!(
        (first["duplicate"].as_bool(), second["duplicate"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(first["task_id"], second["task_id"]);
    assert_eq!(second["result"]["text"], "only once");
    assert_eq!(
        server.request_count(),
        1,
        "the model was called for the first post only"
    );
    daemon.shutdown().await;
}
