use super::compaction::split_point;
use super::history::View;
use super::transcript::{Entry, EntryBody, Transcript};
use crate::model::{ChatMessage, ToolCall};
use std::io::Write;

fn msg(text: &str) -> Entry {
    Entry::message(ChatMessage::user(text), Some("r"), false)
}

#[test]
fn appended_entries_load_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, loaded) = Transcript::open(&path).unwrap();
    assert!(loaded.entries.is_empty());
    t.append(&[msg("one"), msg("two")]).unwrap();
    t.append(&[msg("three")]).unwrap();
    let (_, loaded) = Transcript::open(&path).unwrap();
    let texts: Vec<_> = View::from_entries(&loaded.entries)
        .messages()
        .into_iter()
        .map(|m| m.content.unwrap())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
}

#[test]
fn torn_last_line_is_set_aside_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    t.append(&[msg("kept 1"), msg("kept 2")]).unwrap();
    drop(t);
    let intact = std::fs::read(&path).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"id":"0192","ts":1,"type":"mess"#).unwrap();
    drop(f);

    let (t, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(loaded.entries.len(), 2, "every intact entry survives");
    assert!(loaded.torn_bytes > 0);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        intact,
        "only the torn tail is cut"
    );
    let corrupt = std::fs::read_to_string(dir.path().join("s.jsonl.corrupt")).unwrap();
    assert!(
        corrupt.contains(r#""type":"mess"#),
        "the torn bytes are kept aside: {corrupt}"
    );
    t.append(&[msg("after")]).unwrap();
    let (_, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(
        loaded.entries.len(),
        3,
        "the session continues after the repair"
    );
}

#[test]
fn a_complete_last_line_without_newline_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let line = serde_json::to_string(&msg("no newline")).unwrap();
    std::fs::write(&path, line).unwrap();
    let (t, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(loaded.entries.len(), 1);
    t.append(&[msg("next")]).unwrap();
    let (_, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(loaded.entries.len(), 2);
}

/// Appends `bytes` to the file at `path` as they are.
fn append_raw(path: &std::path::Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn a_bad_line_in_the_middle_is_skipped_and_kept_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    t.append(&[msg("before")]).unwrap();
    append_raw(&path, b"not json\n\n");
    t.append(&[msg("after")]).unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    let mut seen = Vec::new();
    let (_, read) = Transcript::open_each(&path, |e| seen.push(e)).unwrap();
    assert_eq!(read.entries, 2);
    assert_eq!(read.torn_bytes, 0);
    assert_eq!(seen.len(), 2, "the entries on both sides of the bad lines");
    assert_eq!(std::fs::read(&path).unwrap(), on_disk, "nothing is cut");
    assert!(!dir.path().join("s.jsonl.corrupt").exists());
}

#[test]
fn an_unparsable_last_line_with_its_newline_is_set_aside_as_torn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    t.append(&[msg("kept")]).unwrap();
    let intact = std::fs::read(&path).unwrap();
    let torn = b"{\"id\":\"01\",\"ty\n";
    append_raw(&path, torn);
    let (_, read) = Transcript::open_each(&path, |_| {}).unwrap();
    assert_eq!(read.entries, 1);
    assert_eq!(read.torn_bytes, torn.len());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        intact,
        "cut back to the intact lines"
    );
    let corrupt = std::fs::read(dir.path().join("s.jsonl.corrupt")).unwrap();
    assert!(corrupt.starts_with(torn), "the torn line is kept aside");
}

/// A transcript longer than the read buffer, read line by line into a view, gives the view
/// the entries give.
#[test]
fn a_view_read_line_by_line_is_the_view_of_the_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    let long = "x".repeat(700);
    let mut written: Vec<Entry> = (0..60).map(|i| msg(&format!("m{i} {long}"))).collect();
    written.push(Entry::new(EntryBody::Compaction {
        summary: "earlier".into(),
        first_kept: Some(written[50].id),
        tokens_before: 100,
    }));
    written.push(msg("last"));
    t.append(&written).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 40_000);
    let mut view = View::default();
    let (_, read) = Transcript::open_each(&path, |e| view.apply_owned(e)).unwrap();
    assert_eq!(read.entries, written.len());
    let (_, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(
        view.messages(),
        View::from_entries(&loaded.entries).messages()
    );
    assert_eq!(view.messages().len(), 1 + 10 + 1, "summary, m50..m59, last");
}

#[test]
fn compaction_record_replaces_older_messages_in_the_view_only() {
    let entries: Vec<Entry> = (0..6).map(|i| msg(&format!("m{i}"))).collect();
    let mut view = View::from_entries(&entries);
    let compaction = Entry::new(EntryBody::Compaction {
        summary: "earlier: m0..m3".into(),
        first_kept: Some(entries[4].id),
        tokens_before: 100,
    });
    view.apply(&compaction);
    let texts: Vec<_> = view
        .messages()
        .into_iter()
        .map(|m| m.content.unwrap())
        .collect();
    assert_eq!(texts.len(), 3);
    assert!(texts[0].contains("earlier: m0..m3"));
    assert_eq!(&texts[1..], ["m4", "m5"]);
}

#[test]
fn kept_tail_never_starts_with_a_tool_result() {
    let call = ToolCall {
        id: "c1".into(),
        name: "read".into(),
        arguments: "{}".into(),
    };
    let entries = vec![
        msg("q1"),
        Entry::message(ChatMessage::assistant(None, vec![call]), None, false),
        Entry::message(ChatMessage::tool("c1", "data"), None, false),
        Entry::message(
            ChatMessage::assistant(Some("a1".into()), vec![]),
            None,
            false,
        ),
        msg("q2"),
    ];
    let view = View::from_entries(&entries);
    // Keeping the last 3 would start at the tool result; the split moves back to "q1".
    assert_eq!(split_point(&view, 3), 0);
    assert_eq!(split_point(&view, 1), 4);
}

#[test]
fn a_transcript_in_new_folders_is_created_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = Transcript::path_for(dir.path(), "agent", &uuid::Uuid::now_v7());
    let (t, loaded) = Transcript::open(&path).unwrap();
    assert!(loaded.entries.is_empty());
    t.append(&[msg("one")]).unwrap();
    drop(t);
    let (_, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(loaded.entries.len(), 1);
}

#[test]
fn a_compaction_that_keeps_nothing_still_keeps_the_pending_message_on_reload() {
    // On disk: older turns, then the run's user message, then the compaction that kept none of
    // the older turns and names the pending message as the first kept entry.
    let older: Vec<Entry> = (0..3).map(|i| msg(&format!("old {i}"))).collect();
    let pending = msg("the question being answered");
    let compaction = Entry::new(EntryBody::Compaction {
        summary: "old stuff".into(),
        first_kept: Some(pending.id),
        tokens_before: 10,
    });
    let mut on_disk = older.clone();
    on_disk.push(pending.clone());
    on_disk.push(compaction.clone());
    let texts: Vec<_> = View::from_entries(&on_disk)
        .messages()
        .into_iter()
        .map(|m| m.content.unwrap())
        .collect();
    assert_eq!(texts.len(), 2);
    assert!(texts[0].contains("old stuff"));
    assert_eq!(texts[1], "the question being answered");

    // Live: the view does not hold the pending message yet; everything older goes.
    let mut live = View::from_entries(&older);
    live.apply(&compaction);
    assert!(live.items.is_empty());
}

#[test]
fn a_written_line_is_the_entry_serialised_with_the_time_of_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    let call = ToolCall {
        id: "c1".into(),
        name: "read".into(),
        arguments: r#"{"path":"a \"b\".md"}"#.into(),
    };
    let mut stamped = msg("written before, é\n\"quoted\"");
    stamped.ts = 1_700_000_000_123;
    let entries = vec![
        Entry::new(EntryBody::Session {
            version: 1,
            key: "agent:a:main".into(),
            agent: "a".into(),
        }),
        msg("hello"),
        Entry::model_reply(
            ChatMessage::assistant(Some("calling".into()), vec![call.clone()]),
            "r",
            "scripted/a",
            true,
        ),
        Entry::new(EntryBody::ToolCallStarted {
            request_id: "r".into(),
            call_id: call.id.clone(),
            name: call.name.clone(),
        }),
        Entry::message(ChatMessage::tool("c1", "contents"), Some("r"), true),
        Entry::new(EntryBody::Compaction {
            summary: "earlier".into(),
            first_kept: Some(uuid::Uuid::now_v7()),
            tokens_before: 42,
        }),
        Entry::new(EntryBody::RunEnded {
            request_id: "r".into(),
            outcome: bus::TaskState::Failed,
            reason: "model call failed".into(),
        }),
        stamped.clone(),
    ];
    t.append(&entries).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), entries.len(), "one line per entry: {text}");
    for (line, entry) in lines.iter().zip(&entries) {
        let ts = serde_json::from_str::<serde_json::Value>(line).unwrap()["ts"]
            .as_u64()
            .unwrap();
        assert!(ts > 0, "every line is stamped: {line}");
        let expected = Entry {
            ts,
            ..entry.clone()
        };
        assert_eq!(
            *line,
            serde_json::to_string(&expected).unwrap(),
            "a line is byte for byte the entry with its stamp"
        );
    }
    let last = serde_json::from_str::<Entry>(lines[lines.len() - 1]).unwrap();
    assert_eq!(last, stamped, "an entry that has its time keeps it");
}

/// A model that answers every call with `summary` and keeps the requests it was sent.
struct Summariser {
    summary: &'static str,
    seen: std::sync::Mutex<Vec<crate::model::ChatRequest>>,
}

#[async_trait::async_trait]
impl crate::model::ChatModel for Summariser {
    async fn complete(
        &self,
        req: &crate::model::ChatRequest,
    ) -> Result<crate::model::ModelReply, crate::model::ModelError> {
        self.seen.lock().unwrap().push(req.clone());
        Ok(crate::model::ModelReply {
            text: Some(self.summary.to_string()),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".into()),
            usage: None,
            model: None,
            served_model: None,
        })
    }
}

fn summariser_deps(model: std::sync::Arc<Summariser>) -> crate::turn::TurnDeps {
    crate::turn::TurnDeps {
        model,
        model_name: "m".into(),
        model_label: "scripted/m".into(),
        tools: crate::tools::ToolSet::default(),
        limits: clawbus_core::config::Limits::default(),
        clock: std::sync::Arc::new(bus::SystemClock),
    }
}

fn reply(text: &str) -> Entry {
    Entry::message(
        ChatMessage::assistant(Some(text.into()), vec![]),
        None,
        false,
    )
}

/// q1, a call and its result, a1, then q2 a2 q3 a3: eight messages.
fn conversation() -> Vec<Entry> {
    let call = ToolCall {
        id: "c1".into(),
        name: "read".into(),
        arguments: "{}".into(),
    };
    vec![
        msg("q1"),
        Entry::message(ChatMessage::assistant(None, vec![call]), None, false),
        Entry::message(ChatMessage::tool("c1", "data"), None, false),
        reply("a1"),
        msg("q2"),
        reply("a2"),
        msg("q3"),
        reply("a3"),
    ]
}

fn texts(view: &View) -> Vec<String> {
    view.messages()
        .into_iter()
        .filter_map(|m| m.content)
        .collect()
}

#[tokio::test]
async fn a_compaction_keeping_the_last_lines_cuts_at_a_user_message_and_appends_only() {
    use super::compaction::{CompactHow, on_request};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    let entries = conversation();
    t.append(&entries).unwrap();
    let model = std::sync::Arc::new(Summariser {
        summary: "unused",
        seen: Default::default(),
    });
    let deps = summariser_deps(model.clone());
    let def = clawbus_core::config::SessionDef::default();
    let view = View::from_entries(&entries);

    // Three to keep would start at a2: the cut moves back to q2, so four stay.
    let (done, record) = on_request(&deps, &def, &view, &t, CompactHow::KeepLast(3))
        .await
        .unwrap();
    assert!(done.compacted);
    assert_eq!(done.kept, 4);
    assert_eq!(done.first_kept, Some(entries[4].id));
    assert!(done.tokens_after < done.tokens_before, "{done:?}");
    assert!(
        record.is_some() && model.seen.lock().unwrap().is_empty(),
        "no model call"
    );
    let (_, loaded) = Transcript::open(&path).unwrap();
    assert_eq!(loaded.entries.len(), 9, "every line stays; one is added");
    let reread = View::from_entries(&loaded.entries);
    assert_eq!(texts(&reread), ["q2", "a2", "q3", "a3"]);
    assert!(reread.summary.is_none(), "a cut, not a summary");

    // As many as there are, or more: nothing to cut, nothing written.
    let (same, none) = on_request(&deps, &def, &reread, &t, CompactHow::KeepLast(4))
        .await
        .unwrap();
    assert!(!same.compacted && none.is_none());
    assert_eq!(same.kept, 4);
    assert_eq!(Transcript::open(&path).unwrap().1.entries.len(), 9);
}

#[tokio::test]
async fn a_compaction_on_request_summarises_older_turns_and_a_later_view_starts_from_it() {
    use super::compaction::{CompactHow, on_request};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (t, _) = Transcript::open(&path).unwrap();
    let entries = conversation();
    t.append(&entries).unwrap();
    let model = std::sync::Arc::new(Summariser {
        summary: "q1 and q2 were answered",
        seen: Default::default(),
    });
    let deps = summariser_deps(model.clone());
    let def = clawbus_core::config::SessionDef {
        keep_recent_messages: 2,
        ..Default::default()
    };
    let view = View::from_entries(&entries);
    let (done, _) = on_request(&deps, &def, &view, &t, CompactHow::Summary)
        .await
        .unwrap();
    assert!(done.compacted);
    assert_eq!(done.kept, 2);
    assert_eq!(done.summary.as_deref(), Some("q1 and q2 were answered"));
    let asked = model.seen.lock().unwrap()[0].messages[1]
        .content
        .clone()
        .unwrap();
    assert!(asked.contains("q1") && asked.contains("a2"), "{asked}");
    assert!(
        !asked.contains("q3"),
        "the kept tail is not summarised: {asked}"
    );
    let reread = View::from_entries(&Transcript::open(&path).unwrap().1.entries);
    let seen = texts(&reread);
    assert!(seen[0].contains("q1 and q2 were answered"), "{seen:?}");
    assert_eq!(&seen[1..], ["q3", "a3"]);

    // Shorter than the messages to keep: all of it is summarised. Then nothing is left.
    let (all, _) = on_request(&deps, &def, &reread, &t, CompactHow::Summary)
        .await
        .unwrap();
    assert!(all.compacted);
    assert_eq!(all.kept, 0);
    let reread = View::from_entries(&Transcript::open(&path).unwrap().1.entries);
    assert!(reread.items.is_empty() && reread.summary.is_some());
    let (again, none) = on_request(&deps, &def, &reread, &t, CompactHow::Summary)
        .await
        .unwrap();
    assert!(!again.compacted && none.is_none());
    assert_eq!(again.reason.as_deref(), Some("Already compacted"));
    let (empty, _) = on_request(&deps, &def, &View::default(), &t, CompactHow::Summary)
        .await
        .unwrap();
    assert_eq!(
        empty.reason.as_deref(),
        Some("Nothing to compact (session too small)")
    );
}

#[test]
fn an_actor_that_stops_leaves_the_live_entry_of_the_actor_that_replaced_it() {
    use super::{LiveInfo, LiveSessions, SessionState, actor::leave_live};
    let live: LiveSessions = Default::default();
    let session_id = uuid::Uuid::now_v7();
    let entry = |actor| LiveInfo {
        state: SessionState::Processing,
        queued: 0,
        session_id,
        actor,
    };
    // Actor 1 was evicted; actor 2 opened the same session (same transcript) and published.
    live.insert("agent:a:s".into(), entry(2));
    leave_live(&live, "agent:a:s", 1);
    assert_eq!(live.get("agent:a:s").map(|l| l.actor), Some(2), "kept");
    leave_live(&live, "agent:a:s", 2);
    assert!(live.get("agent:a:s").is_none(), "its own entry goes");
}

/// A line over the log store's append limit fails its write, with the store up: it is not held
/// as if the store were away (held lines go as one append, which the store would refuse every
/// time, and the session would wait for them for ever).
#[tokio::test]
async fn a_line_over_the_shared_logs_append_limit_fails_instead_of_being_held() {
    let dir = tempfile::tempdir().unwrap();
    let log: std::sync::Arc<dyn bus::log::LogStore> =
        std::sync::Arc::new(bus::log::FilesLog::open(dir.path().join("logs")));
    let (t, _) = Transcript::open(&dir.path().join("s.jsonl")).unwrap();
    let t = t.with_shared(log, "agent.a.s".to_string());
    t.load_if_changed().await.unwrap();
    let line = |text: &str| Entry::message(ChatMessage::user(text), Some("r"), false);
    t.record(&[line("before")]).await.unwrap();
    let big = "x".repeat(bus::log::MAX_APPEND_BYTES + 1);
    assert!(t.record(&[line(&big)]).await.is_err(), "refused, not held");
    assert_eq!(t.unsent().await, 0, "nothing held");
    t.record(&[line("after")]).await.unwrap();
}
