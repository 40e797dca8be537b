//! Global lanes through the gateway: the `main` cap holds across sessions, `/metrics` reports it,
//! and `[lanes]` in `clawbus.toml` is validated.

use crate::support::{NET, Project, post_task};
use clawbus::config;
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::sync::{Arc, Condvar, Mutex};

/// A scripted server on its own multi-thread runtime, so its responder may block a worker while
/// the daemon (on the test's actix runtime) keeps going.
struct BlockingServer {
    server: Option<ScriptedServer>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl BlockingServer {
    fn start(responder: impl Fn(&Value) -> Turn + Send + Sync + 'static) -> Self {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(8)
                .enable_all()
                .build()
                .unwrap();
            let server = runtime.block_on(ScriptedServer::with_responder(responder));
            Self {
                server: Some(server),
                runtime: Some(runtime),
            }
        })
        .join()
        .unwrap()
    }

    fn server(&self) -> &ScriptedServer {
        self.server.as_ref().unwrap()
    }
}

impl Drop for BlockingServer {
    fn drop(&mut self) {
        drop(self.server.take());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Answers `done`, but holds every answer until `n` requests have arrived: with a cap of `n`,
/// the cap is then reached, not merely respected. After that, answers at once.
fn hold_until(n: usize) -> impl Fn(&Value) -> Turn + Send + Sync + 'static {
    let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
    move |_| {
        let (count, all_in) = &*arrived;
        let mut count = count.lock().unwrap();
        *count += 1;
        if *count >= n {
            all_in.notify_all();
        } else {
            // block_in_place hands this worker's queued tasks (the next connection may sit in
            // its LIFO slot, which no other worker steals) to another thread while it blocks.
            // The timeout is a safety net only; the test fails on max_concurrency if it fires.
            tokio::task::block_in_place(|| {
                let (_count, _) = all_in.wait_timeout_while(count, NET, |c| *c < n).unwrap();
            });
        }
        Turn::text("done")
    }
}

async fn get_metrics(daemon: &clawbus::daemon::Daemon, token: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .get(format!("{}/metrics", daemon.url()))
        .timeout(NET);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[actix_rt::test]
async fn fifty_tasks_on_fifty_sessions_run_four_at_a_time_with_main_4() {
    let held = BlockingServer::start(hold_until(4));
    let project = Project::new();
    project.with_mock_provider(&held.server().base_url(), "20s", 0);
    let toml = std::fs::read_to_string(project.config_path()).unwrap();
    project
        .write("clawbus.toml", &format!("{toml}\n[lanes]\nmain = 4\n"))
        .write("agents.d/worker.toml", "");
    let daemon = project.start().await;

    let posts = (0..50).map(|n| {
        let body = json!({
            "text": format!("job {n}"),
            "request_id": format!("lanes-job-{n}"),
            "wait": true,
            "timeout_ms": 20_000,
        });
        post_task(&daemon, "worker", body)
    });
    let answers = futures::future::join_all(posts).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "every task finishes: {body}");
        assert_eq!(body["state"], "succeeded", "{body}");
    }
    assert_eq!(held.server().request_count(), 50, "one model call per task");
    assert_eq!(
        held.server().max_concurrency(),
        4,
        "the main lane lets exactly 4 turns call the model at once"
    );

    let (status, _) = get_metrics(&daemon, None).await;
    assert_eq!(status, 401, "/metrics needs the token");
    let (status, text) = get_metrics(&daemon, Some(daemon.token())).await;
    assert_eq!(status, 200, "{text}");
    for line in [
        "# TYPE clawbus_lane_wait_seconds histogram",
        "clawbus_lane_capacity{lane=\"main\"} 4",
        "clawbus_lane_queued{lane=\"main\"} 0",
        "clawbus_lane_wait_seconds_count{lane=\"main\"} 50",
        "clawbus_lane_active{lane=\"cron\"} 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "/metrics shows {line:?}:\n{text}"
        );
    }
    daemon.shutdown().await;
}

#[test]
fn lanes_section_sets_caps_adds_lanes_and_keeps_the_defaults() {
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            "[lanes]\nmain = 2\nresearch = 3\nwarn_after = \"500ms\"\n",
        )
        .write("agents.d/a.toml", "");
    let config = project.load();
    let caps: Vec<(&str, usize)> = config
        .lanes
        .caps
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        caps,
        [("cron", 1), ("main", 2), ("research", 3), ("subagent", 8)]
    );
    assert_eq!(
        config.lanes.warn_after,
        std::time::Duration::from_millis(500)
    );
}

#[test]
fn bad_lanes_are_reported_with_line_and_column() {
    let project = Project::new();
    project
        .write(
            "clawbus.toml",
            "[lanes]\nmain = 0\ncron = 2000\nsubagent = \"four\"\nBig = 2\nwarn_after = 5\n",
        )
        .write("agents.d/a.toml", "");
    let report = config::load(&project.options()).expect_err("bad lanes are rejected");
    let prefix = format!("{}/", project.path().display());
    let problems: Vec<String> = report
        .problems()
        .map(|p| p.to_string().replace(&prefix, ""))
        .collect();
    let expected = [
        "clawbus.toml:2:8: field \"lanes.main\": lane cap 0 out of range (expected 1 to 1024 concurrent runs)",
        "clawbus.toml:3:8: field \"lanes.cron\": lane cap 2000 out of range (expected 1 to 1024 concurrent runs)",
        "clawbus.toml:4:12: field \"lanes.subagent\": string is not a lane cap (expected an integer from 1 to 1024, e.g. subagent = 4)",
        "clawbus.toml:5:1: field \"lanes.Big\": invalid lane name \"Big\" (expected a-z, 0-9, '-' or '_')",
        "clawbus.toml:6:14: field \"lanes.warn_after\": not a duration (expected a string such as \"2s\" or \"500ms\")",
    ];
    assert_eq!(problems, expected);
}
