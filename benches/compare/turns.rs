//! The sequential clawbus scenarios: daemon starts, idle RSS, and one turn at a time through the
//! CLI, HTTP, the WebSocket protocol and the OpenAI-compatible endpoint, then the tool turn, the
//! cross-agent call and the subagent round trip.

use super::daemon::{Daemon, post, post_json};
use super::options::Sizes;
use super::report::{Row, Scenario, Stat};
use super::{REQUEST, ws};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// What every scenario against a running daemon needs.
pub(super) struct Ctx<'a> {
    /// The runtime the HTTP and WebSocket clients run on.
    pub rt: &'a tokio::runtime::Runtime,
    /// One keep-alive client.
    pub http: &'a reqwest::Client,
    /// The daemon.
    pub d: &'a Daemon,
    /// Its project folder.
    pub project: &'a Path,
    /// Scenario sizes.
    pub sizes: &'a Sizes,
}

/// `sizes.starts` daemon starts, a fresh state folder under `base` each time.
pub(super) fn starts(project: &Path, base: &Path, sizes: &Sizes) -> Row {
    let mut starts = Vec::new();
    for i in 0..sizes.starts {
        let state = base.join(format!("start-{i}"));
        let mut d = Daemon::start(project, &state);
        starts.push(d.started);
        d.stop();
    }
    Row::new(
        Scenario::Start,
        "start until the port accepts connections",
        "ms",
        Stat::ms(&starts),
    )
}

/// The daemon's RSS after `sizes.idle_wait` with no turn.
pub(super) fn idle_rss(d: &Daemon, sizes: &Sizes) -> Row {
    std::thread::sleep(sizes.idle_wait);
    Row::new(
        Scenario::IdleRss,
        format!("idle RSS after {:?}", sizes.idle_wait),
        "MiB",
        Stat::of(vec![d.rss_mib()]),
    )
}

/// The one-turn rows (CLI, HTTP, WebSocket, OpenAI endpoint), the tool turn, the cross-agent
/// call and the subagent round trip, in the table's order.
pub(super) fn sequential(c: &Ctx, announced: &Receiver<Instant>) -> Vec<Row> {
    vec![
        Row::new(
            Scenario::CliTurn,
            "one turn, CLI process per call (`clawbus post --wait` / `openclaw agent --json`)",
            "ms",
            Stat::ms(&cli_turns(c, c.sizes.turns)),
        ),
        Row::new(
            Scenario::HttpTurn,
            "one turn, HTTP keep-alive",
            "ms",
            Stat::ms(&task_turns(c, "main", "hello", c.sizes.turns)),
        ),
        Row::new(
            Scenario::WsTurn,
            "one turn, WebSocket `agent` + `agent.wait` (connect excluded)",
            "ms",
            Stat::ms(&c.rt.block_on(ws::turns(
                &c.d.url,
                &c.d.token,
                "main",
                c.sizes.turns,
                REQUEST,
            ))),
        ),
        Row::new(
            Scenario::OpenAiTurn,
            "one turn, OpenAI `POST /v1/chat/completions` (non-stream, keep-alive, a `user` per turn)",
            "ms",
            Stat::ms(&openai_turns(c, c.sizes.turns)),
        ),
        Row::new(
            Scenario::ToolTurn,
            "turn with one tool call (2 model calls)",
            "ms",
            Stat::ms(&task_turns(c, "main", "tool", c.sizes.calls)),
        ),
        Row::new(
            Scenario::AgentCall,
            "cross-agent call (`agent_call`, waits for the callee)",
            "ms",
            Stat::ms(&task_turns(c, "a", "ask", c.sizes.calls)),
        ),
        Row::new(
            Scenario::Subagent,
            "subagent round trip (`sessions_spawn` → announce)",
            "ms",
            Stat::ms(&subagent_round_trips(c, announced)),
        ),
    ]
}

/// `n` turns through `clawbus post agent.main … --wait`, a process per call.
fn cli_turns(c: &Ctx, n: usize) -> Vec<Duration> {
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_clawbus"))
            .args(["post", "agent.main", &format!("hi {i}"), "--wait"])
            .args(["--timeout", "60s", "--url", &c.d.url])
            .env("CLAWBUS_TOKEN", &c.d.token)
            .env("RUST_LOG", "warn")
            .current_dir(c.project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        took.push(t.elapsed());
        c.d.check(
            out.status.success(),
            &format!("clawbus post: {}", String::from_utf8_lossy(&out.stderr)),
        );
    }
    took
}

/// `n` sequential `POST /v1/agents/{agent}/tasks {wait: true}`, text `"{prefix} {i}"`, each on
/// a session of its own.
fn task_turns(c: &Ctx, agent: &str, prefix: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|i| {
            let body = json!({ "text": format!("{prefix} {i}"), "wait": true,
                               "session": format!("{prefix}-{i}"), "timeout_ms": 60_000 });
            let t = Instant::now();
            let v = c.rt.block_on(post(c.http, c.d, agent, &body));
            let e = t.elapsed();
            c.d.check(v["state"] == "succeeded", &format!("{prefix}: {v}"));
            e
        })
        .collect()
}

/// `n` sequential non-stream `POST /v1/chat/completions` to `agent:main`, each with a `user` of
/// its own (so a session of its own, as the HTTP and WebSocket turns have).
fn openai_turns(c: &Ctx, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|i| {
            let body = json!({
                "model": "agent:main",
                "user": format!("openai-{i}"),
                "messages": [{ "role": "user", "content": format!("hello {i}") }],
            });
            let t = Instant::now();
            let v =
                c.rt.block_on(post_json(c.http, c.d, "/v1/chat/completions", &body));
            let e = t.elapsed();
            c.d.check(
                v["choices"][0]["message"]["content"] == "ok",
                &format!("chat completion: {v}"),
            );
            e
        })
        .collect()
}

/// Agent `s` spawns a child; each round trip is timed until the child's outcome, announced back
/// to the parent's session, reaches the model.
fn subagent_round_trips(c: &Ctx, announced: &Receiver<Instant>) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in 0..c.sizes.calls {
        while announced.try_recv().is_ok() {}
        let body = json!({ "text": format!("delegate {i}"), "wait": true,
                           "session": format!("sub-{i}"), "timeout_ms": 60_000 });
        let t = Instant::now();
        let v = c.rt.block_on(post(c.http, c.d, "s", &body));
        c.d.check(v["state"] == "succeeded", &format!("delegate: {v}"));
        match announced.recv_timeout(REQUEST) {
            Ok(at) => took.push(at - t),
            Err(_) => {
                c.d.check(false, "the subagent's outcome was never announced")
            }
        }
    }
    took
}
