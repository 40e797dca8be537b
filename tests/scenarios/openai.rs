//! The OpenAI-compatible endpoint, driven the way the official SDKs drive it: the same headers
//! and bodies, and server-sent events read as the SDK's decoder reads them (`data:` lines of a
//! blank-line-terminated event, stop at `[DONE]`, raise on an `error` object).

use crate::support::{NET, Project, get_json, last_user};
use clawbus::daemon::Daemon;
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// Answers `re: <last user message>`.
async fn echo_server() -> ScriptedServer {
    ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await
}

/// `client.chat.completions.create(...)`: POST with the SDK's headers.
fn create(daemon: &Daemon, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", daemon.url()))
        .bearer_auth(daemon.token())
        .header("Accept", "application/json")
        .header("User-Agent", "OpenAI/Python 1.99.0")
        .header("X-Stainless-Lang", "python")
        .json(body)
        .timeout(NET)
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Reads an SSE body as the SDK does: the `data` of each event, in order, up to and including
/// `[DONE]`.
pub(crate) fn sse_data(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    for event in body.replace("\r\n", "\n").split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        out.push(data.join("\n"));
        if out.last().is_some_and(|d| d.starts_with("[DONE]")) {
            break;
        }
    }
    out
}

#[actix_rt::test]
async fn a_completion_answers_with_the_agents_reply_and_models_list_the_agents() {
    let server = echo_server().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "")
        .write("agents.d/other.toml", "");
    let daemon = project.start().await;

    let body = json!({ "model": "agent:echo", "messages": [
        { "role": "system", "content": "be brief" },
        { "role": "user", "content": "hi" },
    ] });
    let (status, answer) = send(create(&daemon, &body)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert!(answer["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(answer["created"].as_u64().unwrap() > 0);
    assert_eq!(answer["model"], "agent:echo");
    assert_eq!(answer["choices"][0]["index"], 0);
    assert_eq!(answer["choices"][0]["message"]["role"], "assistant");
    assert_eq!(answer["choices"][0]["message"]["content"], "re: hi");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");

    // The bare id names the agent too; content parts are read like the SDK sends them.
    let body = json!({ "model": "other", "messages": [
        { "role": "user", "content": [{ "type": "text", "text": "parts" }] },
    ] });
    let (status, answer) = send(create(&daemon, &body)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "re: parts");

    let models = get_json(&daemon, "/v1/models").await;
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["agent:echo", "agent:other"], "{models}");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["owned_by"], "clawbus");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_streamed_completion_sends_chunks_that_add_up_to_the_answer_then_done() {
    let server = ScriptedServer::start(vec![Turn::text_chunks(vec!["Hel", "lo, ", "world"])]).await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "");
    let daemon = project.start().await;

    let body = json!({ "model": "agent:echo", "stream": true,
        "messages": [{ "role": "user", "content": "greet" }] });
    let resp = create(&daemon, &body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let text = resp.text().await.unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk" && c.get("error").is_none()),
        "{text}"
    );
    let ids: std::collections::BTreeSet<&str> =
        chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one id for every chunk: {text}");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Hello, world");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop", "{text}");
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null()),
        "{text}"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn turns_in_one_session_see_the_earlier_turns_in_their_history() {
    let server = echo_server().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "");
    let daemon = project.start().await;

    // The first turn names the session with `user`, the second with the header.
    let first = json!({ "model": "agent:echo", "user": "alice",
        "messages": [{ "role": "user", "content": "one" }] });
    let (status, answer) = send(create(&daemon, &first)).await;
    assert_eq!(status, 200, "{answer}");
    let second = json!({ "model": "agent:echo", "messages": [
        { "role": "user", "content": "one" },
        { "role": "assistant", "content": "re: one" },
        { "role": "user", "content": "two" },
    ] });
    let (status, answer) =
        send(create(&daemon, &second).header("X-Clawbus-Session", "alice")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "re: two");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let history: Vec<(String, String)> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = history
        .iter()
        .map(|(r, c)| (r.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("user", "one"), ("assistant", "re: one"), ("user", "two")],
        "the second call carries the first turn once, from the session's transcript"
    );
    let session = get_json(&daemon, "/v1/sessions/agent:echo:openai:direct:alice").await;
    assert_eq!(session["session"]["agent"], "echo", "{session}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn an_unknown_model_is_404_and_a_missing_token_401_in_openais_error_shape() {
    let server = echo_server().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "");
    let daemon = project.start().await;

    let body =
        json!({ "model": "agent:nobody", "messages": [{ "role": "user", "content": "hi" }] });
    let (status, answer) = send(create(&daemon, &body)).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    assert_eq!(answer["error"]["code"], "model_not_found");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("agent:nobody"),
        "{answer}"
    );

    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", daemon.url()))
        .json(&json!({ "model": "agent:echo", "messages": [{ "role": "user", "content": "hi" }] }))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let answer: Value = resp.json().await.unwrap();
    assert!(answer["error"]["message"].is_string(), "{answer}");
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/models", daemon.url()))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(server.request_count(), 0, "nothing reached the model");
    daemon.shutdown().await;
}

/// What the SDK script does: list models, a completion, a streamed one in the same session, and
/// an unknown model; one line each.
const SDK_SCRIPT: &str = r#"
import sys, openai
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0, timeout=20)
print([m.id for m in c.models.list()])
r = c.chat.completions.create(model="agent:echo", user="sdk", messages=[{"role": "user", "content": "one"}])
print(r.choices[0].message.content)
s = c.chat.completions.create(model="echo", user="sdk", stream=True, messages=[{"role": "user", "content": "two"}])
print("".join(ch.choices[0].delta.content or "" for ch in s))
try:
    c.chat.completions.create(model="agent:nope", messages=[{"role": "user", "content": "x"}])
except openai.NotFoundError as e:
    print(e.code)
"#;

/// What one run of an SDK script left: the project (kept for its folder), the daemon, and the
/// script's output.
struct SdkRun {
    _project: Project,
    daemon: Daemon,
    stdout: String,
    stderr: String,
}

/// Runs `script` (argv: the gateway URL and token) with the official Python SDK against a daemon
/// whose `echo` agent talks to `server`, and checks it exited 0; `None`, saying it was skipped,
/// when `CLAWBUS_TEST_OPENAI_PYTHON` names no Python with the package.
async fn run_sdk(server: &ScriptedServer, script: &str) -> Option<SdkRun> {
    let Ok(python) = std::env::var("CLAWBUS_TEST_OPENAI_PYTHON") else {
        eprintln!("skipped: set CLAWBUS_TEST_OPENAI_PYTHON to a python with the openai package");
        return None;
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "")
        .write("sdk.py", script);
    let daemon = project.start().await;
    let mut cmd = std::process::Command::new(python);
    cmd.arg(project.path().join("sdk.py"))
        .arg(daemon.url())
        .arg(daemon.token());
    let out = crate::support::run_cmd(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    Some(SdkRun {
        _project: project,
        daemon,
        stdout,
        stderr,
    })
}

/// The official Python SDK, when `CLAWBUS_TEST_OPENAI_PYTHON` names a Python that has it
/// (`pip install openai`); without it the test only says it was skipped.
#[actix_rt::test]
async fn the_official_python_sdk_talks_to_an_agent_when_installed() {
    let server = echo_server().await;
    let Some(SdkRun {
        _project,
        daemon,
        stdout,
        stderr,
    }) = run_sdk(&server, SDK_SCRIPT).await
    else {
        return;
    };
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["['agent:echo']", "re: one", "re: two", "model_not_found"],
        "{stderr}"
    );
    daemon.shutdown().await;
}

/// A model that refuses every request (400): every turn fails at once.
async fn refusing_server() -> ScriptedServer {
    ScriptedServer::with_responder(|_| Turn::http_error(400)).await
}

/// A failed turn answers 422 with `x-should-retry: false`, not a 5xx the SDKs would send again
/// (each retry a new task running the turn, and its tools, again).
#[actix_rt::test]
async fn a_failed_turn_answers_a_status_the_sdks_do_not_retry() {
    let server = refusing_server().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let body = json!({ "model": "agent:echo", "messages": [{ "role": "user", "content": "x" }] });
    let resp = create(&daemon, &body).send().await.unwrap();
    assert_eq!(resp.status(), 422);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "task_failed", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 400"),
        "{answer}"
    );
    daemon.shutdown().await;
}

/// The SDK with its default retries (2) against an agent whose turns fail.
const SDK_RETRY_SCRIPT: &str = r#"
import sys, openai
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], timeout=20)
try:
    c.chat.completions.create(model="agent:echo", messages=[{"role": "user", "content": "fail"}])
    print("no error")
except openai.APIStatusError as e:
    print(type(e).__name__, e.status_code)
"#;

/// The official Python SDK, its default retries on, against a failing agent: the turn runs
/// once, as one task (skipped without `CLAWBUS_TEST_OPENAI_PYTHON`).
#[actix_rt::test]
async fn the_official_python_sdk_does_not_run_a_failed_turn_again() {
    let server = refusing_server().await;
    let Some(SdkRun {
        _project,
        daemon,
        stdout,
        stderr,
    }) = run_sdk(&server, SDK_RETRY_SCRIPT).await
    else {
        return;
    };
    assert_eq!(stdout.trim(), "UnprocessableEntityError 422", "{stderr}");
    assert_eq!(server.request_count(), 1, "the turn ran once");
    let tasks = get_json(&daemon, "/v1/tasks?agent=echo").await;
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 1, "{tasks}");
    daemon.shutdown().await;
}
