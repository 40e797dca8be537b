//! A full state folder on a real `clawbus up` child: the state folder is a small tmpfs (mounted
//! by the test, which runs as root; skipped with the reason printed where mounting is not
//! allowed). Posts answer 503 and `/healthz` 503 while it is full; once space is freed the daemon
//! recovers by itself (no restart by anyone), and a post that answered 503 never runs, not even
//! after a restart. The store-level half (a flush fault injected, the journal rolling the record
//! back) runs everywhere: `bus/tests/sled_store.rs`.

use super::system::{Child, spawn_up, stop};
use crate::support::{NET, Project, eventually, get_json, last_user, post_task};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::json;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// A tmpfs mounted at a folder, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` at `dir`; `Err` says why it cannot be done here.
    fn mount(dir: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Self(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the file system of `dir` to the last byte with `dir/fill`.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("fill");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while file.write_all(&chunk).is_ok() {}
    // The last partial chunk: byte by byte is too slow, halves are enough.
    let mut size = chunk.len() / 2;
    while size > 0 {
        while file.write_all(&chunk[..size]).is_ok() {}
        size /= 2;
    }
    path
}

async fn healthz(child: &Child) -> u16 {
    reqwest::Client::new()
        .get(format!("{}/healthz", child.url))
        .timeout(NET)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn start(project: &Project) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]);
    spawn_up(project, cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_folder_answers_503_recovers_without_a_restart_and_a_refused_post_never_runs()
{
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), "")
        .write("agents.d/ops.toml", "");
    let _tmpfs = match Tmpfs::mount(&project.state_dir(), "24m") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("skipped: a full state folder needs a tmpfs mount here ({why})");
            return;
        }
    };
    let child = start(&project).await;
    let (status, before) =
        post_task(&child, "ops", json!({ "text": "before", "wait": true })).await;
    assert_eq!(status, 200, "{before}");

    // Full: posts are refused (the first ones may still fit in a page sled has); healthz too.
    let filled = fill(&project.state_dir());
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for i in 0..50 {
        let text = format!("during-{i}");
        let (status, answer) =
            post_task(&child, "ops", json!({ "text": text, "request_id": text })).await;
        match status {
            202 | 200 => accepted.push(text),
            503 => refused.push(text),
            other => panic!("a post on a full disk answers 202 or 503, not {other}: {answer}"),
        }
        if refused.len() >= 3 {
            break;
        }
    }
    assert_eq!(
        refused.len(),
        3,
        "posts on a full disk are refused: {accepted:?}"
    );
    eventually(
        "/healthz answers 503 while the store refuses writes",
        async || healthz(&child).await == 503,
    )
    .await;

    // Space again: the same daemon (same port) answers without anyone restarting it.
    std::fs::remove_file(&filled).unwrap();
    eventually(
        "/healthz answers 200 once the folder has room",
        async || healthz(&child).await == 200,
    )
    .await;
    let (status, after) = post_task(&child, "ops", json!({ "text": "after", "wait": true })).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["result"]["text"], "re: after", "{after}");
    // A post answered 202 during the outage is durable: it ends (a transcript that could not
    // be created fails it), it is not lost.
    for text in &accepted {
        eventually(
            "a post answered 202 during the outage has ended",
            async || {
                get_json(&child, "/v1/tasks").await["tasks"]
                    .as_array()
                    .is_some_and(|tasks| {
                        tasks.iter().any(|t| {
                            t["request_id"] == text.as_str()
                                && ["succeeded", "failed", "dead_lettered"]
                                    .contains(&t["state"].as_str().unwrap_or_default())
                        })
                    })
            },
        )
        .await;
    }
    let refused_ran = |server: &ScriptedServer| {
        server
            .requests()
            .iter()
            .map(last_user)
            .filter(|u| refused.contains(u))
            .collect::<Vec<_>>()
    };
    assert!(refused_ran(&server).is_empty(), "a post answered 503 ran");
    let tasks = get_json(&child, "/v1/tasks").await.to_string();
    for text in &refused {
        assert!(!tasks.contains(text.as_str()), "{text} is no task: {tasks}");
    }

    // Nor after a restart.
    stop(child).await;
    let child = start(&project).await;
    let (status, last) = post_task(&child, "ops", json!({ "text": "last", "wait": true })).await;
    assert_eq!(status, 200, "{last}");
    assert!(
        refused_ran(&server).is_empty(),
        "a post answered 503 ran after a restart"
    );
    let tasks = get_json(&child, "/v1/tasks").await.to_string();
    for text in &refused {
        assert!(!tasks.contains(text.as_str()), "{text} is no task: {tasks}");
    }
    stop(child).await;
}
