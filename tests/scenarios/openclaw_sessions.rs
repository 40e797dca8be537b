//! `openclaw sessions archive` and `openclaw sessions delete` (OpenClaw's own CLI, see
//! `openclaw_cli`) against a `clawbus up` child: what a person sees, and what clawbus keeps.

use super::openclaw_cli::OpenClaw;
use super::system::{Child as Daemon, stop, up};
use crate::support::{Project, eventually, get_json, last_user, run_cmd, succeeded};
use clawbus::testkit::{Gate, ScriptedServer, Turn};
use serde_json::Value;
use std::path::PathBuf;

/// The keys of `GET <path>`'s sessions.
async fn keys(daemon: &Daemon, path: &str) -> Vec<String> {
    let listed = get_json(daemon, path).await;
    listed["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{path}: {listed}"))
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect()
}

/// `clawbus sessions <extra>` as a person reads it.
async fn clawbus_sessions(p: &Project, daemon: &Daemon, extra: &[&str]) -> String {
    let mut cmd = p.clawbus();
    cmd.args(["sessions", "--url", &daemon.url]).args(extra);
    succeeded(&run_cmd(cmd).await)
}

/// The row of `key` among every session, archived or not.
async fn row(daemon: &Daemon, key: &str) -> Value {
    let listed = get_json(daemon, "/v1/sessions?archived=all").await;
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .cloned()
        .unwrap_or_else(|| panic!("no row {key}: {listed}"))
}

fn transcript(p: &Project, row: &Value) -> PathBuf {
    p.state_dir()
        .join("sessions/echo")
        .join(format!("{}.jsonl", row["session_id"].as_str().unwrap()))
}

#[actix_rt::test]
async fn openclaw_sessions_archive_hides_a_session_and_delete_removes_it_for_a_fresh_start() {
    let gate = Gate::new();
    let held = gate.clone();
    let server = ScriptedServer::with_responder(move |req| match last_user(req).as_str() {
        "slow" => Turn::gated(&held, Turn::text("finally")),
        text => Turn::text(format!("re: {text}")),
    })
    .await;
    let p = Project::new();
    p.with_mock_and(&server.base_url(), "")
        .write("agents.d/echo.toml", "");
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let (old, keep) = ("agent:echo:old", "agent:echo:keep");
    for (key, text) in [(old, "first"), (keep, "kept")] {
        let said = oc
            .ok(&["agent", "--session-key", key, "--message", text])
            .await;
        assert_eq!(said.trim(), format!("re: {text}"));
    }

    // Archive: the CLI confirms, and the session leaves the default listings.
    let out = oc.ok(&["sessions", "archive", old]).await;
    assert_eq!(out.trim(), format!("Archived session {old}."), "{out}");
    assert_eq!(keys(&daemon, "/v1/sessions").await, [keep]);
    assert_eq!(keys(&daemon, "/v1/sessions?archived=true").await, [old]);
    let archived = row(&daemon, old).await;
    assert!(archived["archived_ms"].is_u64(), "{archived}");
    let plain = clawbus_sessions(&p, &daemon, &[]).await;
    assert!(plain.contains(keep) && !plain.contains(old), "{plain}");
    let only = clawbus_sessions(&p, &daemon, &["--archived"]).await;
    assert!(only.contains(old) && !only.contains(keep), "{only}");
    let again = oc.ok(&["sessions", "archive", old]).await;
    assert_eq!(again.trim(), format!("Session {old} is already archived."));

    // Delete: the row and the transcript go.
    let file = transcript(&p, &archived);
    assert!(file.exists(), "{} before the delete", file.display());
    let out = oc.ok(&["sessions", "delete", old, "--yes"]).await;
    assert!(
        out.contains(&format!("Deleted session {old}.")),
        "the CLI says so: {out}"
    );
    let gone = get_json(&daemon, &format!("/v1/sessions/{old}")).await;
    assert_eq!(gone["error"]["code"], "unknown_session", "{gone}");
    assert!(!file.exists(), "{} after the delete", file.display());
    let all = clawbus_sessions(&p, &daemon, &["--archived"]).await;
    assert!(!all.contains(old), "{all}");

    // A new message to the key starts a fresh session: no earlier exchange, a new transcript.
    let said = oc
        .ok(&["agent", "--session-key", old, "--message", "anew"])
        .await;
    assert_eq!(said.trim(), "re: anew");
    let asked = server.requests().last().unwrap()["messages"].to_string();
    assert!(
        !asked.contains("first"),
        "the deleted exchange is gone: {asked}"
    );
    let fresh = row(&daemon, old).await;
    assert_ne!(fresh["session_id"], archived["session_id"], "{fresh}");
    assert_eq!(fresh["turns"], 1, "{fresh}");
    assert!(fresh.get("archived_ms").is_none(), "{fresh}");

    // A running session is refused, and stays.
    let busy = "agent:echo:busy";
    let Some(bg) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let slow = actix_rt::spawn(async move {
        bg.run(&["agent", "--session-key", busy, "--message", "slow"])
            .await
    });
    eventually("the slow run is processing", async || {
        let listed = get_json(&daemon, "/v1/sessions").await;
        listed["sessions"].as_array().is_some_and(|rs| {
            rs.iter()
                .any(|r| r["key"] == busy && r["state"] == "processing")
        })
    })
    .await;
    let refused = oc.run(&["sessions", "delete", busy, "--yes"]).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("delete {busy}")) && said.contains("is running"),
        "the person is told why: {said}"
    );
    assert_eq!(row(&daemon, busy).await["key"], busy, "still there");
    gate.open();
    let finished = slow.await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&finished.stdout).trim(),
        "finally",
        "the run was not disturbed"
    );
    stop(daemon).await;
}
