//! One system: routing at ingress, lanes from the envelope, task events on the bus and their SSE
//! replay, request-id conflicts, and the graceful drain of a real `clawbus up` process.

use crate::support::{
    Gateway, NET, Project, eventually, first_line_async, get_json, last_user, post_json, post_task,
    wait_child_async,
};
use clawbus::testkit::{Gate, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Answers `re: <text>`, and never answers a text starting with `hold`.
async fn holding_server() -> ScriptedServer {
    ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        if user.starts_with("hold") {
            Turn::hang()
        } else {
            Turn::text(format!("re: {user}"))
        }
    })
    .await
}

#[actix_rt::test]
async fn a_channel_message_reaches_the_bound_agent_and_session() {
    let server = holding_server().await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[channels.demo]\nagent = \"helper\"\n")
        .write(
            "agents.d/alpha.toml",
            "[[bindings]]\nchannel = \"demo\"\npeer = \"alice\"\n",
        )
        .write("agents.d/helper.toml", "");
    let daemon = project.start().await;

    let (status, answer) = post_json(
        &daemon,
        "/v1/channels/demo/messages",
        json!({ "peer": "alice", "text": "hi", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["agent"], "alpha",
        "the binding chose the agent: {answer}"
    );
    assert_eq!(answer["session"], "agent:alpha:demo:direct:alice");
    assert_eq!(answer["result"]["text"], "re: hi");
    let session = get_json(&daemon, "/v1/sessions/agent:alpha:demo:direct:alice").await;
    assert_eq!(session["session"]["agent"], "alpha", "{session}");

    // A group chat is its own session.
    let (status, answer) = post_json(
        &daemon,
        "/v1/channels/demo/messages",
        json!({ "peer": "alice", "chat_type": "group", "text": "yo", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["session"], "agent:alpha:demo:group:alice");

    // An unbound peer reaches the channel's default agent.
    let (status, answer) = post_json(
        &daemon,
        "/v1/channels/demo/messages",
        json!({ "peer": "bob", "text": "hey", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["agent"], "helper");
    assert_eq!(answer["session"], "agent:helper:demo:direct:bob");

    // A channel with neither binding nor default agent: a clear 404, nothing enqueued.
    let before = server.request_count();
    let (status, answer) = post_json(
        &daemon,
        "/v1/channels/other/messages",
        json!({ "peer": "bob", "text": "hey", "wait": true }),
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["code"], "unbound");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"other\"") && message.contains("[[bindings]]"),
        "{message}"
    );
    assert_eq!(server.request_count(), before);

    // A channel name out of its alphabet, and "api" (the scripts' channel): 400 naming it.
    for (channel, shown) in [("Demo", "\"Demo\""), ("api", "\"api\"")] {
        let (status, answer) = post_json(
            &daemon,
            &format!("/v1/channels/{channel}/messages"),
            json!({ "peer": "bob", "text": "hey" }),
        )
        .await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["code"], "invalid_channel");
        assert_eq!(
            answer["error"]["message"],
            format!(
                "channel {shown}: expected lowercase letters, digits, '-' or '_' (\"api\" is reserved for scripts)"
            )
        );
    }
    assert_eq!(server.request_count(), before);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn cron_and_main_lanes_run_side_by_side_and_an_unknown_lane_is_refused() {
    let server = holding_server().await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[lanes]\nmain = 1\ncron = 1\n")
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    let (status, main) = post_task(&daemon, "chat", json!({ "text": "hold main" })).await;
    assert_eq!(status, 202, "{main}");
    let (status, cron) = post_task(
        &daemon,
        "chat",
        json!({ "text": "hold cron", "lane": "cron" }),
    )
    .await;
    assert_eq!(status, 202, "{cron}");
    assert_eq!(cron["lane"], "cron");
    // With one slot each, both reach the model only if they hold slots of different lanes.
    eventually("both turns are at the model at once", async || {
        server.max_concurrency() >= 2
    })
    .await;
    let lanes = daemon.lanes().status().await.unwrap();
    for name in ["main", "cron"] {
        let lane = lanes.iter().find(|l| l.name == name).unwrap();
        assert_eq!(lane.holding.len(), 1, "{lane:?}");
    }

    let (status, answer) = post_task(&daemon, "chat", json!({ "text": "x", "lane": "nope" })).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "unknown_lane");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"nope\"") && message.contains("cron, main, subagent"),
        "{message}"
    );
    daemon.shutdown_within(Duration::ZERO).await;
}

/// Reads a whole SSE body into `(event name, data)` pairs.
async fn sse(daemon: &clawbus::daemon::Daemon, path: &str) -> Vec<(String, Value)> {
    let body = crate::support::get_text(daemon, path).await;
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut name = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if !data.is_empty() {
            out.push((name, serde_json::from_str(&data).unwrap()));
        }
    }
    out
}

#[actix_rt::test]
async fn a_tool_turn_emits_its_events_in_order_and_a_late_subscriber_gets_them_replayed() {
    let server = ScriptedServer::start(vec![
        Turn::tool_call("read", json!({ "path": "notes.txt" })),
        Turn::text_chunks(vec!["all ", "read ", "back"]),
    ])
    .await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/chat.toml", "");
    let daemon = project.start().await;
    let mut live = daemon
        .bus()
        .subscribe(bus::Topic::parse("events.agent.chat").unwrap())
        .await
        .unwrap();
    let (status, answer) = post_task(
        &daemon,
        "chat",
        json!({ "text": "read my notes", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "all read back");
    let task_id = answer["task_id"].as_str().unwrap().to_string();

    let replayed = sse(&daemon, &format!("/v1/tasks/{task_id}/events")).await;
    let names: Vec<&str> = replayed.iter().map(|(n, _)| n.as_str()).collect();
    let deltas = names.iter().filter(|n| **n == "delta").count();
    assert!(deltas >= 1, "{names:?}");
    let mut expected = vec![
        "queued",
        "started",
        "model_call",
        "tool_start",
        "tool_end",
        "progress",
        "model_call",
    ];
    expected.extend(std::iter::repeat_n("delta", deltas));
    expected.push("terminal");
    assert_eq!(names, expected);
    let seqs: Vec<u64> = replayed
        .iter()
        .map(|(_, e)| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "no gap");
    let text: String = replayed
        .iter()
        .filter(|(n, _)| n == "delta")
        .map(|(_, e)| e["event"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "all read back");
    let (_, tool_start) = &replayed[3];
    assert_eq!(tool_start["event"]["name"], "read");
    let (_, progress) = &replayed[5];
    assert_eq!(progress["event"]["note"]["tool"], "read", "{progress}");
    let (_, terminal) = replayed.last().unwrap();
    assert_eq!(terminal["event"]["outcome"]["state"], "succeeded");
    assert_eq!(terminal["task_id"], task_id.as_str());

    // The live subscriber of the agent's event topic saw the same events, in the same order,
    // exactly one terminal among them.
    let mut seen = Vec::new();
    while seen.len() < replayed.len() {
        let d = tokio::time::timeout(NET, live.next())
            .await
            .expect("a live event within the bound")
            .expect("the subscription is open");
        seen.push(d.envelope().payload.clone());
    }
    let live_seqs: Vec<u64> = seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(live_seqs, seqs);
    let terminals = seen
        .iter()
        .filter(|e| e["event"]["type"] == "terminal")
        .count();
    assert_eq!(terminals, 1);

    // `clawbus tasks watch` prints the same stream and exits 0 for a success.
    let out = crate::support::run_cmd({
        let mut cmd = project.clawbus();
        cmd.args(["tasks", "watch", &task_id, "--url", &daemon.url()])
            .env("CLAWBUS_TOKEN", daemon.token());
        cmd
    })
    .await;
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), replayed.len());
    assert_eq!(lines.last().unwrap()["event"]["type"], "terminal");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_reused_request_id_with_another_target_or_text_is_a_conflict() {
    let server = holding_server().await;
    let project = Project::new();
    project
        .with_mock_provider(&server.base_url(), "10s", 0)
        .write("agents.d/a.toml", "")
        .write("agents.d/b.toml", "");
    let daemon = project.start().await;
    let (status, first) = post_task(
        &daemon,
        "a",
        json!({ "text": "one", "request_id": "r-1", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let task_id = first["task_id"].as_str().unwrap();

    let (status, other_agent) = post_task(
        &daemon,
        "b",
        json!({ "text": "one", "request_id": "r-1", "wait": true }),
    )
    .await;
    assert_eq!(status, 409, "{other_agent}");
    assert_eq!(other_agent["error"]["code"], "request_id_conflict");
    let message = other_agent["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(task_id),
        "names the original task: {message}"
    );
    assert!(
        message.contains("agent.a"),
        "names the original target: {message}"
    );

    let (status, other_text) = post_task(
        &daemon,
        "a",
        json!({ "text": "two", "request_id": "r-1", "wait": true }),
    )
    .await;
    assert_eq!(status, 409, "{other_text}");
    assert_eq!(other_text["error"]["code"], "request_id_conflict");

    let (status, same) = post_task(
        &daemon,
        "a",
        json!({ "text": "one", "request_id": "r-1", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(same["duplicate"], true);
    assert_eq!(same["task_id"], task_id);
    assert_eq!(same["result"]["text"], "re: one");
    assert_eq!(server.request_count(), 1, "one run for all four posts");
    daemon.shutdown().await;
}

/// A `clawbus up` child process, its URL and token.
pub(super) struct Child {
    pub child: std::process::Child,
    pub url: String,
    pub token: String,
}

impl Gateway for Child {
    fn base_url(&self) -> String {
        self.url.clone()
    }

    fn bearer(&self) -> &str {
        &self.token
    }
}

/// A SIGTERM sent the moment the daemon says it listens is a clean shutdown (exit 0), not death
/// by the signal: its handlers are in place before it says so. (A race: the send comes as early
/// as a client can, three times over.)
#[actix_rt::test]
async fn a_sigterm_right_after_listening_is_a_clean_shutdown() {
    let project = Project::new();
    for _ in 0..3 {
        stop(up(&project).await).await;
    }
}

/// Starts `clawbus up` in the project and reads its address and token.
pub(super) async fn up(project: &Project) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]);
    spawn_up(project, cmd).await
}

/// Spawns `cmd` (which runs `clawbus up --port 0` in the project) and reads its address and
/// token.
pub(super) async fn spawn_up(project: &Project, cmd: std::process::Command) -> Child {
    spawn_up_logging(project, cmd, Stdio::null()).await
}

/// Like [`spawn_up`], its log (stderr) going to `log`.
pub(super) async fn spawn_up_logging(
    project: &Project,
    mut cmd: std::process::Command,
    log: Stdio,
) -> Child {
    let mut child = cmd.stdout(Stdio::piped()).stderr(log).spawn().unwrap();
    let line = first_line_async(child.stdout.take().unwrap()).await;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line must announce the address: {line:?}"))
        .to_string();
    let token = std::fs::read_to_string(project.state_dir().join("gateway.token"))
        .unwrap()
        .trim()
        .to_string();
    Child { child, url, token }
}

/// Stops a child daemon with SIGTERM and checks it exits 0.
pub(super) async fn stop(c: Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &c.child.id().to_string()])
        .status();
    let exit = wait_child_async(c.child).await;
    assert!(exit.success(), "{exit}");
}

/// A task's record from a child daemon.
pub(super) async fn task(c: &Child, id: &str) -> Value {
    get_json(c, &format!("/v1/tasks/{id}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_turns_finish_within_the_grace_and_the_rest_run_on_the_next_start() {
    let gate = Gate::new();
    let second_life = Arc::new(AtomicBool::new(false));
    let server = {
        let (gate, second_life) = (gate.clone(), second_life.clone());
        ScriptedServer::with_responder(move |req| {
            let user = last_user(req);
            let answer = Turn::text(format!("re: {user}"));
            if user.starts_with("slow") {
                Turn::gated(&gate, answer)
            } else if user.starts_with("stuck") && !second_life.load(Ordering::SeqCst) {
                Turn::hang()
            } else {
                answer
            }
        })
        .await
    };
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "[gateway]\nshutdown_grace = \"3s\"\n")
        .write("agents.d/chat.toml", "");
    let first = up(&project).await;
    let mut waiters = Vec::new();
    for text in ["slow 1", "stuck 2", "stuck 3"] {
        let (url, token) = (first.url.clone(), first.token.clone());
        waiters.push(tokio::spawn(async move {
            let resp = reqwest::Client::new()
                .post(format!("{url}/v1/agents/chat/tasks"))
                .bearer_auth(token)
                .json(&json!({ "text": text, "request_id": text.replace(' ', "-"), "wait": true }))
                .timeout(NET)
                .send()
                .await;
            match resp {
                Ok(r) => (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                ),
                Err(_) => (0, Value::Null),
            }
        }));
    }
    eventually("three turns are at the model", async || {
        server.request_count() >= 3
    })
    .await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &first.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The slow turn finishes inside the grace period; its waiter gets the answer.
    gate.open();
    let (status, slow) = tokio::time::timeout(NET, waiters.remove(0))
        .await
        .expect("the slow turn is answered in time")
        .unwrap();
    assert_eq!(status, 200, "{slow}");
    assert_eq!(slow["state"], "succeeded");
    assert_eq!(slow["result"]["text"], "re: slow 1");
    let exit = wait_child_async(first.child).await;
    assert!(exit.success(), "a drained shutdown exits 0, got {exit}");
    for waiter in waiters {
        let (status, answer) = tokio::time::timeout(NET, waiter).await.unwrap().unwrap();
        assert_ne!(answer["state"], "succeeded", "{status} {answer}");
    }

    // The next start runs the two stopped turns; the finished one is not run again.
    second_life.store(true, Ordering::SeqCst);
    let second = up(&project).await;
    let slow_id = slow["task_id"].as_str().unwrap().to_string();
    let mut stuck_ids = Vec::new();
    for rid in ["stuck-2", "stuck-3"] {
        // A duplicate post answers the stored task without running anything.
        let body = json!({ "text": rid.replace('-', " "), "request_id": rid, "wait": true });
        let (_, answer) = post_task(&second, "chat", body).await;
        assert_eq!(answer["duplicate"], true, "{answer}");
        stuck_ids.push(answer["task_id"].as_str().unwrap().to_string());
    }
    for id in &stuck_ids {
        let mut last = Value::Null;
        eventually("the stopped turn ran on the next start", async || {
            last = task(&second, id).await;
            last["state"] == "succeeded"
        })
        .await;
        assert!(
            last["result"]["text"]
                .as_str()
                .unwrap()
                .starts_with("re: stuck")
        );
    }
    let slow_now = task(&second, &slow_id).await;
    assert_eq!(slow_now["state"], "succeeded");
    let texts: Vec<String> = server.requests().iter().map(last_user).collect();
    let count = |t: &str| texts.iter().filter(|x| x.as_str() == t).count();
    assert_eq!(
        count("slow 1"),
        1,
        "the finished turn never ran again: {texts:?}"
    );
    assert_eq!(
        count("stuck 2"),
        2,
        "stopped once, run once more: {texts:?}"
    );
    assert_eq!(
        count("stuck 3"),
        2,
        "stopped once, run once more: {texts:?}"
    );
    stop(second).await;
}

/// Resident KiB of `pid`'s mappings of its own executable with `perms` (`/proc/PID/smaps`).
fn exe_resident_kib(pid: u32, perms: &str) -> u64 {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    clawbus::resident::exe_mappings(&smaps, &exe.to_string_lossy())
        .iter()
        .filter(|m| m.perms == perms)
        .filter_map(|m| m.rss_kib)
        .sum()
}

/// `clawbus up` gives back the executable's pages its start faulted in before it says it serves:
/// right after, less of its code is resident than it gave back, and the figure is exported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_gives_back_the_pages_its_start_used_before_it_serves() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let server = holding_server().await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/chat.toml", "");
    let daemon = up(&project).await;
    let code_now = exe_resident_kib(daemon.child.id(), "r-xp");
    let metrics = crate::support::get_text(&daemon, "/metrics").await;
    let released: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("clawbus_start_pages_released_bytes "))
        .unwrap_or_else(|| panic!("the released figure is exported: {metrics}"))
        .trim()
        .parse()
        .unwrap();
    assert!(released > 0, "the start's pages were released: {released}");
    assert!(
        code_now * 1024 < released,
        "resident code right after the start ({code_now} KiB) is less than what was given back ({} KiB)",
        released / 1024
    );
    // It serves on: a turn runs.
    let (status, answer) = post_task(&daemon, "chat", json!({ "text": "hi", "wait": true })).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "re: hi");
    stop(daemon).await;
}
