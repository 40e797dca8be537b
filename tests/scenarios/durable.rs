//! Durable turns: a turn interrupted by `kill -9` resumes from its last durable step — the user
//! message once, finished tool calls not run again, a call that was running answered as
//! interrupted — and re-queued tasks run in admission order.

use super::system::{Child, spawn_up, stop, task, up};
use crate::support::{NET, Project, eventually, get_json, last_user, post_task, tool_results};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Every transcript line of the project's agent `chat`.
pub(super) fn transcript_lines(project: &Project) -> Vec<Value> {
    let dir = project.state_dir().join("sessions").join("chat");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            lines.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
            );
        }
    }
    lines
}

pub(super) fn kill9(child: Child) {
    let mut process = child.child;
    process.kill().unwrap();
    process.wait().unwrap();
}

async fn post_async(c: &Child, text: &str, request_id: &str) -> Value {
    let body = json!({ "text": text, "request_id": request_id, "session": "s" });
    post_task(c, "chat", body).await.1
}

pub(super) async fn until_succeeded(c: &Child, task_id: &str) -> Value {
    let mut last = Value::Null;
    eventually("the task succeeded after the restart", async || {
        last = task(c, task_id).await;
        last["state"] == "succeeded"
    })
    .await;
    last
}

fn user_count(req: &Value, text: &str) -> usize {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" && m["content"] == text)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_a_write_resumes_without_writing_again_or_repeating_the_message() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            if tool_results(req).is_empty() {
                Turn::tool_call("write", json!({ "path": "out.txt", "content": "once" }))
            } else if second_life.load(Ordering::SeqCst) {
                Turn::text("written")
            } else {
                Turn::hang()
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write("agents.d/chat.toml", "[tools]\nprofile = \"coding\"\n");
    let first = up(&project).await;
    let posted = post_async(&first, "save it", "w-1").await;
    let task_id = posted["task_id"].as_str().unwrap().to_string();
    // The write ran and the next model call is in flight.
    eventually("the second model call is in flight", async || {
        server.request_count() >= 2
    })
    .await;
    let file = project.state_dir().join("workspaces/chat/out.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "once");
    kill9(first);
    std::fs::remove_file(&file).unwrap();

    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    let done = until_succeeded(&second, &task_id).await;
    assert_eq!(done["result"]["text"], "written");
    assert!(!file.exists(), "the write that had run is not run again");
    let requests = server.requests();
    let last = requests.last().unwrap();
    assert_eq!(
        user_count(last, "save it"),
        1,
        "the model saw the message once: {last}"
    );
    let results = tool_results(last);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        !results[0].contains("interrupted"),
        "the earlier result is reused: {results:?}"
    );
    let lines = transcript_lines(&project);
    let count = |ty: &str| lines.iter().filter(|l| l["type"] == ty).count();
    assert_eq!(count("tool_call_started"), 1, "{lines:#?}");
    assert_eq!(
        count("run_resumed"),
        1,
        "the transcript records the resumption"
    );
    let users = lines
        .iter()
        .filter(|l| l["type"] == "message" && l["message"]["role"] == "user")
        .count();
    assert_eq!(users, 1, "the user message is in the transcript once");
    let shown = crate::support::run_cmd({
        let mut cmd = project.clawbus();
        cmd.args([
            "sessions",
            "show",
            "agent:chat:api:direct:s",
            "--url",
            &second.url,
        ])
        .env("CLAWBUS_TOKEN", &second.token);
        cmd
    })
    .await;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("tool write started"), "{text}");
    assert!(text.contains("resumed after a stop (attempt 2)"), "{text}");
    stop(second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_exec_runs_answers_interrupted_and_does_not_run_it_again() {
    let server = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call("exec", json!({ "command": "sleep 20" }))
        } else {
            Turn::text(format!("saw: {}", tool_results(req).join(" | ")))
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write(
            "agents.d/chat.toml",
            "[tools]\nprofile = \"coding\"\n[exec]\nsecurity = \"allowlist\"\nallow = [\"sleep *\"]\n",
        );
    let first = up(&project).await;
    let posted = post_async(&first, "wait a bit", "x-1").await;
    let task_id = posted["task_id"].as_str().unwrap().to_string();
    eventually("the exec call is journaled as started", async || {
        transcript_lines(&project)
            .iter()
            .any(|l| l["type"] == "tool_call_started" && l["name"] == "exec")
    })
    .await;
    kill9(first);

    let second = up(&project).await;
    let done = until_succeeded(&second, &task_id).await;
    let text = done["result"]["text"].as_str().unwrap();
    assert!(
        text.contains("\"interrupted\""),
        "the model got the interrupted result: {text}"
    );
    assert_eq!(server.request_count(), 2, "one model call per life");
    let lines = transcript_lines(&project);
    let started = lines
        .iter()
        .filter(|l| l["type"] == "tool_call_started")
        .count();
    assert_eq!(started, 1, "the command was not run again: {lines:#?}");
    let resumed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "run_resumed")
        .collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["interrupted"].as_array().unwrap().len(), 1);
    stop(second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_requeued_tasks_run_in_admission_order() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            if second_life.load(Ordering::SeqCst) {
                Turn::text(format!("re: {}", last_user(req)))
            } else {
                Turn::hang()
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write("agents.d/chat.toml", "");
    let first = up(&project).await;
    let mut ids = Vec::new();
    for n in 1..=3 {
        let posted = post_async(&first, &format!("m{n}"), &format!("o-{n}")).await;
        ids.push(posted["task_id"].as_str().unwrap().to_string());
    }
    // The first is at the model; the other two wait behind it in the session lane.
    eventually("the first turn is at the model", async || {
        server.request_count() >= 1
    })
    .await;
    kill9(first);

    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    for id in &ids {
        until_succeeded(&second, id).await;
    }
    let order: Vec<String> = server.requests()[1..].iter().map(last_user).collect();
    assert_eq!(
        order,
        ["m1", "m2", "m3"],
        "admission order after the restart"
    );
    stop(second).await;
}

/// Open descriptors of a process.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_sessions_under_a_256_descriptor_limit_all_answer() {
    let project = Project::new();
    project.write("agents.d/chat.toml", "");
    // The daemon's hard and soft limits are 256: it cannot raise them.
    let mut cmd = project.clawbus();
    cmd.arg("-c").arg(format!(
        "ulimit -n 256 && exec {} up --port 0",
        env!("CARGO_BIN_EXE_clawbus")
    ));
    let sh = std::process::Command::new("sh");
    let daemon = spawn_up(&project, with_env_of(sh, &cmd)).await;
    let (url, token) = (daemon.url.clone(), daemon.token.clone());
    let pid = daemon.child.id();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert!(open_files.contains(" 256 "), "{open_files}");

    let client = reqwest::Client::new();
    let sessions = 3000;
    let workers = 8;
    let mut handles = Vec::new();
    for w in 0..workers {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        handles.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for n in (w..sessions).step_by(workers) {
                let resp = client
                    .post(format!("{url}/v1/agents/chat/tasks"))
                    .bearer_auth(&token)
                    .json(&json!({ "text": format!("hi {n}"), "session": format!("s{n}"), "wait": true }))
                    .timeout(NET)
                    .send()
                    .await;
                let answer: Value = match resp {
                    Ok(r) => r.json().await.unwrap_or(Value::Null),
                    Err(e) => json!({ "error": e.to_string() }),
                };
                if answer["state"] != "succeeded" {
                    failures.push(answer);
                }
            }
            failures
        }));
    }
    let mut peak = 0;
    let mut failures = Vec::new();
    for h in handles {
        failures.extend(tokio::time::timeout(NET * 6, h).await.unwrap().unwrap());
        peak = peak.max(descriptors(pid));
    }
    assert!(
        failures.is_empty(),
        "{} failed, first: {}",
        failures.len(),
        failures[0]
    );
    let open = descriptors(pid);
    assert!(
        open < 128,
        "descriptors stay bounded: {open} open after {sessions} sessions"
    );
    assert!(peak < 200, "peak descriptors {peak}");
    let listed = get_json(&daemon, "/v1/sessions").await;
    let count = listed["sessions"].as_array().map_or(0, Vec::len);
    assert!(count >= sessions, "{count} sessions listed");
    stop(daemon).await;
}

/// `cmd` with the arguments of `like` and its folder and environment.
fn with_env_of(
    mut cmd: std::process::Command,
    like: &std::process::Command,
) -> std::process::Command {
    cmd.args(like.get_args());
    if let Some(dir) = like.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (k, v) in like.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

/// Resident memory the process allocated (`RssAnon`: heap and stacks, not the pages of its
/// executable, which a debug build makes large), in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_model_stream_fails_at_the_cap_while_memory_stays_bounded() {
    let server = ScriptedServer::with_responder(|req| {
        if last_user(req) == "flood" {
            Turn::Endless {
                chunk_bytes: 64 * 1024,
            }
        } else {
            Turn::text("fine")
        }
    })
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "60s", 0)
        .write("agents.d/chat.toml", "");
    let daemon = up(&project).await;
    let pid = daemon.child.id();
    let flood = {
        let (url, token) = (daemon.url.clone(), daemon.token.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": "flood", "wait": true }))
                .timeout(NET)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    // Another session answers while the flood streams.
    let mut peak = 0;
    for n in 0..5 {
        let body = json!({ "text": format!("hello {n}"), "wait": true });
        let (_, answer) = post_task(&daemon, "chat", body).await;
        assert_eq!(answer["state"], "succeeded", "{answer}");
        peak = peak.max(rss_kib(pid));
    }
    let failed = tokio::time::timeout(NET, flood).await.unwrap().unwrap();
    peak = peak.max(rss_kib(pid));
    assert_eq!(failed["state"], "failed", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("4194304") || error.contains("4 MiB"),
        "names the cap: {error}"
    );
    eprintln!("peak anonymous RSS {peak} KiB");
    assert!(
        peak > 0 && peak < 64 * 1024,
        "anonymous RSS stayed under 64 MiB: {peak} KiB"
    );
    stop(daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_lost_to_a_crash_still_reports_to_its_parent() {
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let second_life = second_life.clone();
        ScriptedServer::with_responder(move |req| {
            let user = last_user(req);
            match (user.as_str(), tool_results(req).is_empty()) {
                ("delegate", true) => Turn::tool_call(
                    "sessions_spawn",
                    json!({ "task": "long child", "label": "child" }),
                ),
                ("delegate", false) => Turn::text("spawned"),
                ("long child", _) if !second_life.load(Ordering::SeqCst) => Turn::hang(),
                ("long child", _) => Turn::text("child done after the restart"),
                _ => Turn::text("ack"),
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "30s", 0)
        .write(
            "agents.d/chat.toml",
            "[tools]\nallow = [\"sessions_spawn\"]\n",
        );
    let first = up(&project).await;
    let parent = post_async(&first, "delegate", "p-1").await;
    let parent_id = parent["task_id"].as_str().unwrap().to_string();
    until_succeeded(&first, &parent_id).await;
    eventually("the child is at the model", async || {
        server
            .requests()
            .iter()
            .any(|r| last_user(r) == "long child")
    })
    .await;
    kill9(first);

    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    let key = "agent:chat:api:direct:s";
    eventually("the parent session heard of the child", async || {
        let session = get_json(&second, &format!("/v1/sessions/{key}")).await;
        session["entries"].as_array().is_some_and(|entries| {
            entries.iter().any(|e| {
                e["message"]["role"] == "user"
                    && e["message"]["content"]
                        .as_str()
                        .is_some_and(|t| t.contains("child done after the restart"))
            })
        })
    })
    .await;
    stop(second).await;
}
