//! The shared transcript on a real `nats-server` (skipped without one, unless `CI=true`): lines
//! written while the server is away are held and appended, fenced and in order, once it is
//! back; refused when another holder wrote meanwhile; a line over the server's `max_payload` is
//! written and read back whole; lines held by a node killed before the server came back are
//! appended when it opens the session again, once, or refused when another holder went on.

use super::index::{SessionIndex, SessionMeta};
use super::lease::log_name;
use super::transcript::{Entry, EntryBody, Transcript};
use super::view::SessionReader;
use crate::model::ChatMessage;
use bus::log::LogStore;
use bus::nats::{Nats, NatsLog, NatsOptions};
use clawbus_testkit::NatsServer;
use std::sync::Arc;
use std::time::Duration;

/// A bound on each wait for the server's link (never a synchronisation device).
const NET: Duration = Duration::from_secs(30);

/// The server's `max_payload` (its default: the test server sets none).
const MAX_PAYLOAD: usize = 1024 * 1024;

fn msg(text: &str) -> Entry {
    Entry::message(ChatMessage::user(text), Some("r"), false)
}

/// The texts of the message entries.
fn texts(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Message { message, .. } => message.content.clone(),
            _ => None,
        })
        .collect()
}

/// A connection (a node) to `url` under `prefix`, and its transcript logs.
async fn node(url: &str, prefix: &str) -> (Nats, Arc<dyn LogStore>) {
    let mut opts = NatsOptions::new(url);
    opts.prefix = prefix.to_string();
    let nats = Nats::connect(opts).await.unwrap();
    let log: Arc<dyn LogStore> = Arc::new(NatsLog::open(&nats, "tx").await.unwrap());
    (nats, log)
}

/// A transcript in `dir` over the shared log `name` of `log`, written under lease `revision`
/// from where the log stands.
async fn transcript(
    dir: &std::path::Path,
    log: &Arc<dyn LogStore>,
    name: &str,
    revision: u64,
) -> Transcript {
    let (t, _) = Transcript::open(&dir.join(format!("{revision}.jsonl"))).unwrap();
    let t = t.with_shared(log.clone(), name.to_string());
    t.set_lease(Some(revision)).await;
    t.load_if_changed().await.unwrap();
    t
}

/// Waits (bounded) until the link of `nats` is up or down.
async fn link_is(nats: &Nats, connected: bool) {
    tokio::time::timeout(NET, async {
        while nats.link().connected != connected {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the link never became connected={connected}"));
}

/// Stops the server and waits until the node's link sees it gone.
async fn stop(server: &mut NatsServer, nats: &Nats) {
    server.stop().unwrap();
    link_is(nats, false).await;
}

#[tokio::test]
async fn lines_written_while_the_server_is_away_reach_the_log_in_order_once_it_is_back() {
    let test = "lines_written_while_the_server_is_away_reach_the_log_in_order_once_it_is_back";
    let Some(mut server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nats, log) = node(server.url(), "held").await;
    let t = transcript(dir.path(), &log, "chat.s1", 5).await;
    t.record(&[msg("one")]).await.unwrap();
    stop(&mut server, &nats).await;
    // The run goes on: its lines are held, in this node's copy already.
    t.record(&[msg("two")]).await.unwrap();
    t.record_unsynced(&[msg("three"), msg("four")])
        .await
        .unwrap();
    assert_eq!(t.unsent().await, 3);
    assert_eq!(
        texts(&t.entries().unwrap()),
        ["one", "two", "three", "four"]
    );
    server.start_again().unwrap();
    // What the run does before it lets its lease go: wait for the server, append.
    tokio::time::timeout(NET, t.send_unsent())
        .await
        .expect("held lines sent once the server is back")
        .unwrap();
    assert_eq!(t.unsent().await, 0);
    let (_, other) = node(server.url(), "held").await;
    let read: Vec<Entry> = other
        .read("chat.s1")
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.data).unwrap())
        .collect();
    assert_eq!(texts(&read), ["one", "two", "three", "four"]);
    assert!(
        read.iter().all(|e| e.lease == Some(5)),
        "every line carries the lease it was written under"
    );
    // The next line follows them, fenced on where they left the log.
    t.record(&[msg("five")]).await.unwrap();
    assert_eq!(other.read("chat.s1").await.unwrap().len(), 5);
}

#[tokio::test]
async fn held_lines_are_never_appended_after_another_holders_lines() {
    let test = "held_lines_are_never_appended_after_another_holders_lines";
    let Some(mut server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nats, log) = node(server.url(), "lost").await;
    let t = transcript(dir.path(), &log, "chat.s1", 5).await;
    t.record(&[msg("one")]).await.unwrap();
    stop(&mut server, &nats).await;
    t.record(&[msg("held")]).await.unwrap();
    server.start_again().unwrap();
    // Meanwhile the lease expired and another node took the session and wrote to it.
    let (_, log2) = node(server.url(), "lost").await;
    let t2 = transcript(dir.path(), &log2, "chat.s1", 7).await;
    t2.record(&[msg("other node")]).await.unwrap();
    let refused = tokio::time::timeout(NET, t.send_unsent())
        .await
        .expect("the held lines are tried once the server is back");
    assert!(refused.is_err(), "held lines refused: {refused:?}");
    assert_eq!(t.unsent().await, 0, "dropped, never appended later");
    let read: Vec<Entry> = log2
        .read("chat.s1")
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.data).unwrap())
        .collect();
    assert_eq!(texts(&read), ["one", "other node"]);
    // They stay in this node's copy.
    assert_eq!(texts(&t.entries().unwrap()), ["one", "held"]);
    // A stale holder that reads the log again is still refused by the lease stamp.
    t.forget();
    assert!(t.load_if_changed().await.unwrap().is_some());
    assert!(t.record(&[msg("stale")]).await.is_err());
    assert_eq!(log2.read("chat.s1").await.unwrap().len(), 2);
}

/// The entries of the shared log `name` as `log` reads it.
async fn log_entries(log: &Arc<dyn LogStore>, name: &str) -> Vec<Entry> {
    log.read(name)
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.data).unwrap())
        .collect()
}

/// A node holding lines is killed (its transcript dropped, nothing sent) before the server
/// is back: when it opens the session again, the next run's lease sends them before any of
/// its own lines, fenced and stamped as they were written, once, even when the record of them
/// outlived their append (a crash right after it).
#[tokio::test]
async fn lines_held_by_a_node_killed_before_the_server_came_back_are_appended_once_when_it_restarts()
 {
    let test = "lines_held_by_a_node_killed_before_the_server_came_back_are_appended_once_when_it_restarts";
    let Some(mut server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nats, log) = node(server.url(), "crash").await;
    let t = transcript(dir.path(), &log, "chat.s1", 5).await;
    t.record(&[msg("one")]).await.unwrap();
    stop(&mut server, &nats).await;
    t.record(&[msg("two")]).await.unwrap();
    t.record_unsynced(&[msg("three"), msg("four")])
        .await
        .unwrap();
    assert_eq!(t.unsent().await, 3);
    // Killed: nothing more is sent.
    drop(t);
    drop(nats);
    server.start_again().unwrap();
    let held = dir.path().join("5.jsonl.held");
    let record = std::fs::read(&held).expect("the held lines are recorded");
    // The next life of the node opens the session from the same state dir.
    let (_n2, log2) = node(server.url(), "crash").await;
    let reopen = || {
        Transcript::open(&dir.path().join("5.jsonl"))
            .unwrap()
            .0
            .with_shared(log2.clone(), "chat.s1".to_string())
    };
    let t = reopen();
    assert_eq!(t.unsent().await, 3, "found again");
    assert_eq!(texts(&log_entries(&log2, "chat.s1").await), ["one"]);
    t.set_lease(Some(9)).await;
    assert_eq!(t.unsent().await, 0);
    assert!(!held.exists(), "the record goes once they are in");
    let read = log_entries(&log2, "chat.s1").await;
    assert_eq!(texts(&read), ["one", "two", "three", "four"]);
    assert!(
        read.iter().all(|e| e.lease == Some(5)),
        "stamped with the lease they were written under"
    );
    // The run reads the log whole, and its lines follow them.
    let entries = t.load_if_changed().await.unwrap().expect("read again");
    assert_eq!(texts(&entries), ["one", "two", "three", "four"]);
    t.record(&[msg("five")]).await.unwrap();
    drop(t);
    // A crash right after their append, before the record went: never appended twice.
    std::fs::write(&held, record).unwrap();
    let t = reopen();
    assert_eq!(t.unsent().await, 3);
    t.set_lease(Some(11)).await;
    assert_eq!(t.unsent().await, 0);
    assert!(!held.exists());
    assert_eq!(
        texts(&log_entries(&log2, "chat.s1").await),
        ["one", "two", "three", "four", "five"]
    );
}

/// A node holding lines is killed; before it opens the session again another node took it
/// and wrote: the held lines are refused, stay in the copy, and are never tried again.
#[tokio::test]
async fn lines_held_by_a_killed_node_are_refused_at_its_restart_when_another_holder_went_on() {
    let test = "lines_held_by_a_killed_node_are_refused_at_its_restart_when_another_holder_went_on";
    let Some(mut server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (nats, log) = node(server.url(), "crashlost").await;
    let t = transcript(dir.path(), &log, "chat.s1", 5).await;
    t.record(&[msg("one")]).await.unwrap();
    stop(&mut server, &nats).await;
    t.record(&[msg("held")]).await.unwrap();
    drop(t);
    drop(nats);
    server.start_again().unwrap();
    let (_n2, log2) = node(server.url(), "crashlost").await;
    let t2 = transcript(dir.path(), &log2, "chat.s1", 7).await;
    t2.record(&[msg("other node")]).await.unwrap();
    let (_n3, log3) = node(server.url(), "crashlost").await;
    let reopen = || {
        Transcript::open(&dir.path().join("5.jsonl"))
            .unwrap()
            .0
            .with_shared(log3.clone(), "chat.s1".to_string())
    };
    let t = reopen();
    assert_eq!(t.unsent().await, 1);
    t.set_lease(Some(9)).await;
    assert_eq!(t.unsent().await, 0, "dropped, never appended later");
    assert!(!dir.path().join("5.jsonl.held").exists());
    assert_eq!(
        texts(&log_entries(&log3, "chat.s1").await),
        ["one", "other node"]
    );
    assert_eq!(texts(&t.entries().unwrap()), ["one", "held"], "in the copy");
    drop(t);
    assert_eq!(reopen().unsent().await, 0, "not found again");
}

/// The race between an earlier holder's last append and a new holder's read: the new holder
/// read the log, then the earlier holder's last line got in. The new holder's first line is
/// refused as fenced, and goes in after that line (read afresh) instead of failing the turn;
/// from then on the earlier holder is refused by its older lease, and the next run reads the
/// whole log again.
#[tokio::test]
async fn a_line_fenced_by_an_earlier_holders_last_line_goes_in_after_it() {
    let test = "a_line_fenced_by_an_earlier_holders_last_line_goes_in_after_it";
    let Some(server) = NatsServer::start_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_n1, log1) = node(server.url(), "race").await;
    let (_n2, log2) = node(server.url(), "race").await;
    let old = transcript(dir.path(), &log1, "chat.s1", 5).await;
    old.record(&[msg("one")]).await.unwrap();
    // The new holder reads the log (one line), then the earlier holder's last line lands.
    let new = transcript(dir.path(), &log2, "chat.s1", 7).await;
    old.record(&[msg("late")]).await.unwrap();
    new.record(&[msg("mine")])
        .await
        .expect("appended after the earlier holder's line, not failed");
    assert!(
        old.record(&[msg("stale")]).await.is_err(),
        "the earlier holder is refused now"
    );
    let read: Vec<Entry> = log1
        .read("chat.s1")
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.data).unwrap())
        .collect();
    assert_eq!(texts(&read), ["one", "late", "mine"]);
    let reread = new
        .load_if_changed()
        .await
        .unwrap()
        .expect("the next run reads the log again");
    assert_eq!(texts(&reread), ["one", "late", "mine"]);
}

#[tokio::test]
async fn a_line_over_the_servers_max_payload_is_written_and_read_back_whole() {
    let test = "a_line_over_the_servers_max_payload_is_written_and_read_back_whole";
    let Some(server) = NatsServer::shared_or_skip(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_, log) = node(server.url(), "big").await;
    let key = "agent:chat:api:session:big";
    let t = transcript(dir.path(), &log, &log_name("chat", key), 3).await;
    let big: String = (0..MAX_PAYLOAD + MAX_PAYLOAD / 2)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    t.record(&[msg("before")]).await.unwrap();
    t.record(&[msg(&big)]).await.unwrap();
    t.record(&[msg("after")]).await.unwrap();
    let db = sled::Config::new().temporary(true).open().unwrap();
    let (_, shared) = node(server.url(), "big").await;
    let reader = SessionReader {
        index: SessionIndex::open(&db).unwrap(),
        live: Default::default(),
        state_dir: dir.path().to_path_buf(),
        shared: Some(shared),
    };
    let meta = SessionMeta {
        key: key.to_string(),
        agent: "chat".to_string(),
        session_id: uuid::Uuid::now_v7(),
        created_ms: 0,
        updated_ms: 0,
        turns: 0,
        tokens_in: 0,
        tokens_out: 0,
        archived_ms: None,
    };
    let entries = reader.entries(&meta).await.unwrap();
    let read = texts(&entries);
    assert_eq!(read.len(), 3);
    assert_eq!(read[0], "before");
    assert!(read[1] == big, "the big line is read back whole");
    assert_eq!(read[2], "after");
}
