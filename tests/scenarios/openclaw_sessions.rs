//! `openclaw sessions archive`, `delete` and `compact` (OpenClaw's own CLI, see
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

/// The text of every message of a recorded model request, joined.
fn asked(req: &Value) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of a transcript file, as JSON.
fn lines(file: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[actix_rt::test]
async fn openclaw_sessions_compact_summarises_or_keeps_the_last_lines_and_the_next_turn_sees_it() {
    let gate = Gate::new();
    let held = gate.clone();
    let server = ScriptedServer::with_responder(move |req| {
        let system = req["messages"][0]["content"].as_str().unwrap_or_default();
        if system.starts_with("Summarise the conversation") {
            return Turn::text("SUMMARY of the early talk");
        }
        match last_user(req).as_str() {
            "slow" => Turn::gated(&held, Turn::text("finally")),
            text => Turn::text(format!("re: {text}")),
        }
    })
    .await;
    let p = Project::new();
    p.with_mock_and(&server.base_url(), "").write(
        "agents.d/echo.toml",
        "[session]\nkeep_recent_messages = 2\n",
    );
    let daemon = up(&p).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let key = "agent:echo:long";
    let say = async |text: &str| {
        let said = oc
            .ok(&["agent", "--session-key", key, "--message", text])
            .await;
        assert_eq!(said.trim(), format!("re: {text}"));
        server.requests().last().cloned().unwrap()
    };
    for text in ["one", "two", "three"] {
        say(text).await;
    }

    // A summary: the CLI prints the tokens before and after; the last two messages stay.
    let out = oc.ok(&["sessions", "compact", key]).await;
    let shown = out.trim();
    assert!(
        shown.starts_with(&format!("Compacted session {key} (")) && shown.ends_with(" tokens)."),
        "{out}"
    );
    let summary_call = server.requests().last().cloned().unwrap();
    let summarised = asked(&summary_call);
    assert!(
        summarised.contains("user: one") && !summarised.contains("user: three"),
        "older turns only: {summarised}"
    );
    let file = transcript(&p, &row(&daemon, key).await);
    let written = lines(&file);
    let texts: Vec<&str> = written
        .iter()
        .filter(|l| l["type"] == "message")
        .filter_map(|l| l["message"]["content"].as_str())
        .collect();
    assert_eq!(
        texts,
        ["one", "re: one", "two", "re: two", "three", "re: three"],
        "every message stays in the transcript"
    );
    let record = written.last().unwrap();
    assert_eq!(record["type"], "compaction", "{record}");
    assert_eq!(record["summary"], "SUMMARY of the early talk");

    // The next turn sees the summary and the kept tail, not the older turns.
    let next = asked(&say("four").await);
    assert!(next.contains("SUMMARY of the early talk"), "{next}");
    assert!(
        next.contains("re: three") && !next.contains("re: two"),
        "{next}"
    );

    // `--max-lines 2`: only the last exchange stays, the summary goes too.
    let out = oc
        .ok(&["sessions", "compact", key, "--max-lines", "2"])
        .await;
    assert_eq!(
        out.trim(),
        format!("Compacted session {key} (kept 2 lines).")
    );
    let next = asked(&say("five").await);
    assert!(next.contains("re: four") && next.contains("five"), "{next}");
    assert!(
        !next.contains("SUMMARY") && !next.contains("three"),
        "cut: {next}"
    );
    let kept = oc
        .json(&["sessions", "compact", key, "--max-lines", "50", "--json"])
        .await;
    assert_eq!(
        kept,
        serde_json::json!({"ok": true, "key": key, "compacted": false, "kept": 4})
    );
    let cut = lines(&file)
        .iter()
        .filter(|l| l["type"] == "compaction")
        .count();
    assert_eq!(
        cut, 2,
        "a record per compaction, none for the one that kept all"
    );

    // A session that does not exist: nothing to compact, as OpenClaw says it.
    let out = oc.ok(&["sessions", "compact", "agent:echo:nope"]).await;
    assert_eq!(
        out.trim(),
        "No compaction needed for session agent:echo:nope (no sessionId)."
    );

    // clawbus's own CLI does the same through the HTTP API.
    let mut cmd = p.clawbus();
    cmd.args([
        "sessions",
        "compact",
        key,
        "--max-lines",
        "1",
        "--url",
        &daemon.url,
    ]);
    let said = succeeded(&run_cmd(cmd).await);
    assert!(
        said.contains(&format!("compacted session {key}: 2 messages kept")),
        "the last user message and its answer: {said}"
    );

    // A running session is refused, and its run goes on.
    let busy = "agent:echo:busy-compact";
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
    let refused = oc.run(&["sessions", "compact", busy]).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "Session {busy} has an active run; retry after it finishes"
        )),
        "the person is told why: {said}"
    );
    gate.open();
    let finished = slow.await.unwrap();
    assert_eq!(String::from_utf8_lossy(&finished.stdout).trim(), "finally");
    stop(daemon).await;
}
