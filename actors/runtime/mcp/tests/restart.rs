//! Starts and restarts: a server that keeps failing is started again after 1 s, 2 s, 4 s … on
//! the injected clock (never sooner, and a call meanwhile fails at once); a killed server is
//! started again by its keeper without waiting for a call; a lazy server starts on first use.

use super::rust_server::{offers, rust_toml};
use super::*;
use crate::mcp::McpServers;
use serde_json::json;

/// Lines in `file` (one per start of the failing server).
fn starts(file: &Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

/// Waits (bounded) until the keeper has woken and armed its next timer.
async fn keeper_waits(clock: &bus::ManualClock) {
    tokio::time::timeout(BOUND, async {
        clock.settle().await;
        clock.timers_at_least(1).await;
    })
    .await
    .expect("the keeper waits on the clock within the bound");
}

#[tokio::test]
async fn a_failing_server_is_restarted_with_bounded_exponential_backoff_on_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("starts");
    // Starts, says so, and exits before the handshake: every start fails.
    let script = format!("echo started >> {}; exit 3", count.display());
    let (work, config) = project(
        &format!(
            "[mcp.servers.dies]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\ntimeout = \"5s\"\n"
        ),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let clock = bus::ManualClock::new(0);
    let mcp = McpServers::start_with(&config.mcp, clock.clone()).await;
    assert_eq!(starts(&count), 1);
    let status = mcp.status().await;
    assert!(status[0].error.is_some(), "{status:?}");
    keeper_waits(&clock).await;
    // A call before the delay has passed fails at once, naming the server, and starts nothing.
    let set = tools(&config, &mcp);
    let srv = mcp.servers[0].clone();
    let early = tokio::time::timeout(BOUND, srv.call("anything", Default::default()))
        .await
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        early.contains("MCP server \"dies\": not running; the next start is tried in"),
        "{early}"
    );
    assert!(
        set.names().iter().all(|n| !n.starts_with("mcp__")),
        "{set:?}"
    );
    assert_eq!(starts(&count), 1);
    for (delay, expected) in [(1, 2), (2, 3), (4, 4), (8, 5)] {
        let delay = Duration::from_secs(delay);
        // Just short of the delay: nothing starts.
        clock.advance(delay - Duration::from_millis(1));
        tokio::time::timeout(BOUND, clock.settle()).await.unwrap();
        assert_eq!(starts(&count), expected - 1, "not before {delay:?}");
        clock.advance(Duration::from_millis(1));
        keeper_waits(&clock).await;
        assert_eq!(starts(&count), expected, "started again after {delay:?}");
    }
    mcp.stop().await;
    drop(work);
}

#[tokio::test]
async fn a_killed_server_is_started_again_by_its_keeper_without_a_call() {
    let (_dir, config) = project(&rust_toml("rs", ""), "");
    let mcp = McpServers::start(&config.mcp).await;
    let first = mcp.pid("rs").expect("the eager server runs");
    let mut changes = mcp.subscribe();
    let before = *changes.borrow_and_update();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    // The restart lists the tools again, which moves the generation.
    tokio::time::timeout(BOUND, async {
        while *changes.borrow_and_update() == before || mcp.pid("rs") == Some(first) {
            changes.changed().await.unwrap();
        }
    })
    .await
    .expect("the keeper restarts the server within the bound");
    let again = mcp.pid("rs").expect("a new process runs");
    assert_ne!(again, first);
    mcp.stop().await;
}

#[tokio::test]
async fn a_lazy_server_starts_on_first_use_and_an_eager_one_with_the_daemon() {
    let toml = format!(
        "{}\n{}",
        rust_toml("lazy", "start = \"lazy\"\n"),
        rust_toml("eager", "")
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    let mcp = McpServers::start(&config.mcp).await;
    assert!(
        mcp.pid("eager").is_some(),
        "the eager server started with the daemon"
    );
    assert_eq!(mcp.pid("lazy"), None, "the lazy one did not");
    let status = mcp.status().await;
    let lazy = status.iter().find(|s| s.name == "lazy").unwrap();
    assert!(
        lazy.error
            .as_deref()
            .unwrap_or_default()
            .contains("not started yet"),
        "{lazy:?}"
    );
    assert!(
        mcp.tool_names()
            .iter()
            .all(|n| !n.starts_with("mcp__lazy__"))
    );
    // The first use: what an agent run does before it starts.
    let live = live_tools(&config, &mcp);
    let set = live.current().await;
    assert!(mcp.pid("lazy").is_some(), "started on first use");
    offers(&mcp, "mcp__lazy__echo").await;
    assert!(set.names().contains(&"mcp__lazy__echo"), "{set:?}");
    let out = call(&set, dir.path(), "mcp__lazy__echo", json!({"text": "hi"})).await;
    assert!(out.text.contains("echo: hi"), "{}", out.text);
    mcp.stop().await;
}
