//! A real `clawbus up` against hostile model servers: answers that never end (of every shape,
//! from an OpenAI-compatible and an Anthropic server) fail with the response cap's error while
//! the daemon stays small; a key the server echoes in its error appears nowhere; the gateway
//! token in a tool result reaches the model redacted.

use super::system::{Child, spawn_up_logging, stop, task};
use crate::support::{Project, get_json, last_user, post_task, tool_results};
use clawbus::testkit::{AnthropicServer, AnthropicTurn, Flood, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;

/// The most the daemon may ever hold resident while it is fed endless answers.
const MAX_RSS_KIB: u64 = 64 * 1024;

/// The word a task says to get flood `flood` from the OpenAI-compatible server.
fn word(flood: Flood) -> &'static str {
    match flood {
        Flood::EndlessLine => "line",
        Flood::EndlessEvent => "event",
        Flood::EndlessErrorBody => "error",
        Flood::EndlessJsonBody => "json",
    }
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`, `RssFile`, …).
fn status_kib(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status:\n{status}"))
}

async fn post(child: &Child, agent: &str, text: &str, request_id: &str) -> Value {
    let body = json!({ "text": text, "request_id": request_id, "wait": true });
    post_task(child, agent, body).await.1
}

#[actix_rt::test]
async fn endless_answers_of_every_shape_fail_with_the_cap_error_and_the_daemon_stays_small() {
    let openai = ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        match Flood::ALL.into_iter().find(|f| word(*f) == user) {
            Some(flood) => Turn::Flood(flood),
            None => Turn::text("ok"),
        }
    })
    .await;
    let anthropic =
        AnthropicServer::start(Flood::ALL.into_iter().map(AnthropicTurn::Flood).collect())
            .await
            .unwrap();
    let project = Project::new();
    // The default cap (4 MiB) on both providers, retries allowed: a capped answer is not retried.
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"60s\"\nmax_retries = 2\n\n\
                 [providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\ntimeout = \"60s\"\nmax_retries = 2\n\n\
                 [defaults]\nmodel = \"mock/m\"\n",
                openai.base_url(),
                anthropic.base_url()
            ),
        )
        .write("agents.d/chat.toml", "")
        .write("agents.d/claude.toml", "model = \"claude/c\"\n");
    let mut cmd = project.clawbus();
    // The start's pages stay mapped, so what the binary maps can only grow from here.
    cmd.args(["up", "--port", "0"])
        .env("CLAWBUS_KEEP_START_PAGES", "1");
    let child = spawn_up_logging(&project, cmd, Stdio::null()).await;
    let pid = child.child.id();
    // The pages of the (debug, 250 MB) binary mapped from its file count in VmRSS but are not
    // memory the daemon allocates: they are taken off the peak (they only grow as code runs).
    let file_backed = status_kib(pid, "RssFile");

    let mut tried = Vec::new();
    for (i, flood) in Flood::ALL.into_iter().enumerate() {
        tried.push((
            "chat",
            flood,
            post(&child, "chat", word(flood), &format!("o-{i}")).await,
        ));
        tried.push((
            "claude",
            flood,
            post(&child, "claude", "anything", &format!("a-{i}")).await,
        ));
    }
    let (rss, peak) = (status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM"));
    stop(child).await;

    for (agent, flood, done) in &tried {
        assert_eq!(done["state"], "failed", "{agent} {flood:?}: {done}");
        let error = done["error"].as_str().unwrap_or_default();
        let provider = if *agent == "chat" { "mock" } else { "claude" };
        assert!(
            error.contains(&format!(
                "([providers.{provider}] max_response_bytes = 4194304); the call was stopped"
            )),
            "{agent} {flood:?}: {error}"
        );
    }
    assert_eq!(openai.request_count(), 4, "a capped answer is not retried");
    assert_eq!(
        anthropic.requests().len(),
        4,
        "a capped answer is not retried"
    );
    let allocated = peak.saturating_sub(file_backed);
    assert!(
        allocated < MAX_RSS_KIB,
        "the daemon peaked at {peak} KiB, {allocated} KiB without its {file_backed} KiB of \
         mapped binary (now {rss} KiB), over {MAX_RSS_KIB} KiB"
    );
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[actix_rt::test]
async fn a_key_the_provider_echoes_in_its_401_appears_nowhere() {
    const KEY: &str = "sk-live-echoed-0123456789abcdef";
    let server = ScriptedServer::with_responder(|_| Turn::HttpError {
        status: 401,
        body: format!(
            r#"{{"error":{{"message":"Incorrect API key provided: Bearer {KEY}","type":"invalid_request_error"}}}}"#
        ),
        retry_after: None,
    })
    .await;
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            &format!(
                "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"ECHO_TEST_KEY\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/m\"\n",
                server.base_url()
            ),
        )
        .write("agents.d/chat.toml", "");
    let log_path = project.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"])
        .env("ECHO_TEST_KEY", KEY)
        .env("RUST_LOG", "info");
    let child = spawn_up_logging(&project, cmd, log.into()).await;

    let done = post(&child, "chat", "hi", "echo-1").await;
    assert_eq!(done["state"], "failed", "{done}");
    let task_id = done["task_id"].as_str().unwrap().to_string();
    let record = task(&child, &task_id).await;
    let sessions = get_json(&child, "/v1/sessions").await;
    let mut shown = Vec::new();
    for row in sessions["sessions"].as_array().unwrap() {
        let key = row["key"].as_str().unwrap();
        shown.push(get_json(&child, &format!("/v1/sessions/{key}")).await);
    }
    stop(child).await;

    let error = done["error"].as_str().unwrap();
    assert!(
        error.contains("Incorrect API key provided: Bearer [REDACTED:ECHO_TEST_KEY]"),
        "the error still says what happened: {error}"
    );
    assert!(!shown.is_empty(), "{sessions}");
    for (what, text) in [
        ("the answer", done.to_string()),
        ("the task record", record.to_string()),
        ("GET /v1/sessions", sessions.to_string()),
        ("GET /v1/sessions/{key}", Value::Array(shown).to_string()),
        ("the log", std::fs::read_to_string(&log_path).unwrap()),
    ] {
        assert!(!text.contains(KEY), "{what} holds the key: {text}");
    }
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains(" WARN ") && l.contains("[REDACTED:ECHO_TEST_KEY]")),
        "the failure is logged, redacted:\n{log}"
    );
    let holding = files_holding(&project.state_dir(), KEY.as_bytes());
    assert!(holding.is_empty(), "stored with the key: {holding:?}");
}

#[actix_rt::test]
async fn the_gateway_token_in_a_tool_result_reaches_the_model_redacted() {
    let server = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call("read", json!({ "path": "notes.txt" }))
        } else {
            Turn::text("read it")
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", "[tools]\nprofile = \"minimal\"\n");
    // A first start: the token file is created by this `up`.
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]);
    let child = spawn_up_logging(&project, cmd, Stdio::null()).await;
    let notes = project.state_dir().join("workspaces/chat/notes.txt");
    std::fs::write(&notes, format!("token: {}\n", child.token)).unwrap();

    let done = post(&child, "chat", "read the notes", "tok-1").await;
    let token = child.token.clone();
    stop(child).await;

    assert_eq!(done["state"], "succeeded", "{done}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "a tool step, then the answer");
    let result = &tool_results(&requests[1])[0];
    assert!(
        result.contains("token: [REDACTED:gateway.token]"),
        "the model sees the token redacted: {result}"
    );
    for request in &requests {
        assert!(!request.to_string().contains(&token), "{request}");
    }
}
