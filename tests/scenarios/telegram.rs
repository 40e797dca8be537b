//! The Telegram channel against a real `clawbus up` child and a fake Bot API speaking the real
//! formats: updates become tasks in per-chat sessions and replies are sent (split past 4,096
//! UTF-16 units, never `NO_REPLY`), other chats are ignored, an update runs once, the offset
//! survives a restart, `deny_tools` holds for Telegram runs, and an approval is answered from
//! the chat that asked — not from another one — with `/approve` or `/deny`; a turn that
//! `sessions_send` starts in a chat's session is answered in that chat.

use super::system::{Child, spawn_up, stop};
use crate::support::{
    Project, eventually, get_json, get_text, last_user, offered_tools, post_task, run_cmd,
    succeeded, tool_results,
};
use clawbus::testkit::{FakeBotApi, ScriptedServer, Turn};
use serde_json::{Value, json};

const TOKEN: &str = "123456:TEST-token";
const CHAT: i64 = 42;
const GROUP: i64 = -1001;
const OTHER: i64 = 43;
const STRANGER: i64 = 7;

fn telegram(fake: &FakeBotApi, extra: &str) -> String {
    format!(
        "[channels.telegram]\ntoken_env = \"TEST_TG_TOKEN\"\nbase_url = \"{}\"\nallow_chats = [{CHAT}, {GROUP}, {OTHER}]\nagent = \"assistant\"\npoll_timeout = \"1s\"\n{extra}\n[delivery]\nbackoff = \"20ms\"\nmax_attempts = 4\n",
        fake.base_url()
    )
}

fn project(server: &ScriptedServer, channel: &str, agent: &str) -> Project {
    let p = Project::new();
    p.with_mock_and(&server.base_url(), channel)
        .write("agents.d/assistant.toml", agent);
    p
}

async fn up(p: &Project) -> Child {
    let mut cmd = p.clawbus();
    cmd.args(["up", "--port", "0"]).env("TEST_TG_TOKEN", TOKEN);
    spawn_up(p, cmd).await
}

fn sent_to(fake: &FakeBotApi, chat: i64) -> Vec<String> {
    fake.sent()
        .into_iter()
        .filter(|m| m.chat_id == chat)
        .map(|m| m.text)
        .collect()
}

async fn reply_arrives(fake: &FakeBotApi, chat: i64, text: &str) {
    eventually(&format!("chat {chat} got {text:?}"), async || {
        sent_to(fake, chat).iter().any(|t| t == text)
    })
    .await;
}

fn long_answer() -> String {
    (0..6)
        .map(|i| format!("Paragraph {i}: {}", "lorem ipsum ".repeat(100)))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[actix_rt::test]
async fn updates_become_tasks_per_chat_and_replies_are_sent_split_and_never_no_reply() {
    let fake = FakeBotApi::start(TOKEN, 1000).await.unwrap();
    let server = ScriptedServer::with_responder(|req| match last_user(req).as_str() {
        "long please" => Turn::text(long_answer()),
        "be quiet" => Turn::text("NO_REPLY"),
        other => Turn::text(format!("re: {other}")),
    })
    .await;
    let p = project(&server, &telegram(&fake, ""), "");
    let child = up(&p).await;

    let first = fake.push_message(CHAT, "private", "hello");
    reply_arrives(&fake, CHAT, "re: hello").await;
    let tasks = get_json(&child, "/v1/tasks?agent=assistant").await;
    let task = &tasks["tasks"][0];
    assert_eq!(task["request_id"], format!("telegram:{first}"), "{tasks}");
    assert_eq!(task["session"], "agent:assistant:telegram:direct:42");

    // A stranger's message is dropped at ingress: the next one from a known chat is answered,
    // and the stranger's never reached the model nor got an answer.
    fake.push_message(STRANGER, "private", "let me in");
    fake.push_message(GROUP, "supergroup", "hi group");
    reply_arrives(&fake, GROUP, "re: hi group").await;
    assert!(sent_to(&fake, STRANGER).is_empty());
    assert!(
        server
            .requests()
            .iter()
            .all(|r| last_user(r) != "let me in"),
        "nothing from an unknown chat is enqueued"
    );
    let tasks = get_json(&child, "/v1/tasks?agent=assistant").await;
    let sessions: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["session"].as_str())
        .collect();
    assert_eq!(
        sessions,
        [
            "agent:assistant:telegram:direct:42",
            "agent:assistant:telegram:group:-1001"
        ],
        "one session per chat, with its chat type"
    );

    // NO_REPLY is not sent; the long answer comes as several messages within the limit.
    fake.push_message(CHAT, "private", "be quiet");
    fake.push_message(CHAT, "private", "long please");
    let expected = long_answer();
    eventually("the long answer arrived in full", async || {
        sent_to(&fake, CHAT)
            .iter()
            .skip(1)
            .map(String::len)
            .sum::<usize>()
            + 10
            >= expected.len()
    })
    .await;
    let texts = sent_to(&fake, CHAT);
    assert!(!texts.iter().any(|t| t.contains("NO_REPLY")), "{texts:?}");
    let parts = &texts[1..];
    assert!(
        parts.len() >= 2,
        "split into several messages: {}",
        parts.len()
    );
    assert!(parts.iter().all(|t| t.encode_utf16().count() <= 4096));
    assert!(
        parts.iter().all(|t| t.starts_with("Paragraph")),
        "cut at paragraph breaks"
    );
    assert_eq!(
        parts.join(" ").split_whitespace().collect::<Vec<_>>(),
        expected.split_whitespace().collect::<Vec<_>>(),
        "nothing lost"
    );
    stop(child).await;
}

#[actix_rt::test]
async fn the_offset_survives_a_restart_and_a_redelivered_update_runs_once() {
    let fake = FakeBotApi::start(TOKEN, 500).await.unwrap();
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let p = project(&server, &telegram(&fake, ""), "");
    let child = up(&p).await;
    let id = fake.push_message(CHAT, "private", "one");
    reply_arrives(&fake, CHAT, "re: one").await;
    eventually("the poller confirmed the update", async || {
        fake.offsets().last() == Some(&Some(id + 1))
    })
    .await;
    stop(child).await;

    // Restart: the first poll starts after what was taken; nothing runs again.
    let polls_before = fake.offsets().len();
    let child = up(&p).await;
    eventually("the restarted daemon polled", async || {
        fake.offsets().len() > polls_before
    })
    .await;
    assert_eq!(
        fake.offsets()[polls_before],
        Some(id + 1),
        "offset from sled"
    );
    stop(child).await;

    // The confirmation lost (the offset gone) and Telegram sending the update again: it is
    // answered from the store, not run again, and not replied to twice.
    {
        let db = sled::open(p.state_dir().join("db")).unwrap();
        db.open_tree("telegram").unwrap().remove("offset").unwrap();
        db.flush().unwrap();
    }
    fake.push_again(id, CHAT, "one");
    let child = up(&p).await;
    let next = fake.push_message(CHAT, "private", "two");
    reply_arrives(&fake, CHAT, "re: two").await;
    assert_eq!(server.request_count(), 2, "update {id} ran once");
    assert_eq!(sent_to(&fake, CHAT), ["re: one", "re: two"]);
    assert!(next > id);
    stop(child).await;
}

#[actix_rt::test]
async fn deny_tools_of_the_channel_holds_for_telegram_runs_and_its_sessions() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|req| match last_user(req).as_str() {
        "relay" if tool_results(req).is_empty() => Turn::tool_call(
            "sessions_send",
            serde_json::json!({ "session": "agent:assistant:telegram:direct:42", "text": "relayed hi" }),
        ),
        _ => Turn::text("ok"),
    })
    .await;
    let agent = "[exec]\nsecurity = \"allowlist\"\nallow = [\"ls\"]\n[tools]\nallow = [\"sessions_send\"]\n";
    let p = project(
        &server,
        &telegram(&fake, "deny_tools = [\"exec\"]\n"),
        agent,
    );
    let child = up(&p).await;
    fake.push_message(CHAT, "private", "run something");
    reply_arrives(&fake, CHAT, "ok").await;
    let (status, _) = post_task(
        &child,
        "assistant",
        json!({ "text": "relay", "wait": true }),
    )
    .await;
    assert_eq!(status, 200);
    eventually("the relayed turn ran in the chat's session", async || {
        server
            .requests()
            .iter()
            .any(|r| last_user(r) == "relayed hi")
    })
    .await;
    let requests = server.requests();
    let tools_of =
        |text: &str| offered_tools(requests.iter().find(|r| last_user(r) == text).unwrap());
    let exec = "exec".to_string();
    assert!(
        tools_of("relay").contains(&exec),
        "an API run is offered exec"
    );
    assert!(
        !tools_of("run something").contains(&exec),
        "exec is not offered to a Telegram run"
    );
    assert!(
        !tools_of("relayed hi").contains(&exec),
        "nor to a run in a Telegram chat's session that another channel started"
    );
    stop(child).await;
}

#[actix_rt::test]
async fn an_approval_is_answered_from_the_chat_that_asked_and_not_from_another() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call(
                "exec",
                serde_json::json!({ "command": "touch approved.txt" }),
            )
        } else {
            Turn::text(format!(
                "done: {}",
                tool_results(req)[0].lines().next().unwrap_or("")
            ))
        }
    })
    .await;
    let agent = "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n";
    let p = project(&server, &telegram(&fake, ""), agent);
    let child = up(&p).await;
    fake.push_message(CHAT, "private", "make the file");
    eventually("the chat was asked", async || {
        sent_to(&fake, CHAT).iter().any(|t| t.contains("/approve "))
    })
    .await;
    let ask = sent_to(&fake, CHAT).remove(0);
    assert!(ask.contains("touch approved.txt"), "{ask}");
    let id = ask
        .split_whitespace()
        .skip_while(|w| *w != "/approve")
        .nth(1)
        .unwrap()
        .to_string();

    // Another allowlisted chat answers first: ignored. Then the chat that asked allows it.
    fake.push_message(OTHER, "private", &format!("/approve {id}"));
    fake.push_message(CHAT, "private", &format!("/approve {id}"));
    reply_arrives(&fake, CHAT, &format!("Approval {id}: allowed.")).await;
    eventually("the task finished", async || {
        sent_to(&fake, CHAT)
            .iter()
            .any(|t| t.starts_with("done: exit code: 0"))
    })
    .await;
    assert!(
        sent_to(&fake, OTHER).is_empty(),
        "the other chat got nothing"
    );
    assert!(
        p.state_dir()
            .join("workspaces/assistant/approved.txt")
            .exists()
    );
    let approval = get_json(&child, &format!("/v1/approvals/{id}")).await;
    assert_eq!(approval["state"], "allowed", "{approval}");
    assert_eq!(server.request_count(), 2, "the answers were not tasks");
    stop(child).await;
}

#[actix_rt::test]
async fn a_deny_from_the_chat_that_asked_refuses_the_command() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|req| {
        if tool_results(req).is_empty() {
            Turn::tool_call("exec", serde_json::json!({ "command": "touch denied.txt" }))
        } else {
            Turn::text(format!("after: {}", tool_results(req)[0]))
        }
    })
    .await;
    let agent = "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n";
    let p = project(&server, &telegram(&fake, ""), agent);
    let child = up(&p).await;
    fake.push_message(GROUP, "group", "make the file");
    eventually("the group was asked", async || {
        sent_to(&fake, GROUP).iter().any(|t| t.contains("/deny "))
    })
    .await;
    let ask = sent_to(&fake, GROUP).remove(0);
    let id = ask
        .split_whitespace()
        .skip_while(|w| *w != "/deny")
        .nth(1)
        .unwrap()
        .to_string();
    // In a group the command may name the bot.
    fake.push_message(GROUP, "group", &format!("/deny@clawbus_bot {id}"));
    reply_arrives(&fake, GROUP, &format!("Approval {id}: denied.")).await;
    eventually("the task finished", async || {
        sent_to(&fake, GROUP)
            .iter()
            .any(|t| t.starts_with("after: "))
    })
    .await;
    let after = sent_to(&fake, GROUP)
        .into_iter()
        .find(|t| t.starts_with("after: "))
        .unwrap();
    assert!(after.to_lowercase().contains("denied"), "{after}");
    assert!(
        !p.state_dir()
            .join("workspaces/assistant/denied.txt")
            .exists(),
        "the command never ran"
    );
    let approval = get_json(&child, &format!("/v1/approvals/{id}")).await;
    assert_eq!(approval["state"], "denied", "{approval}");
    assert_eq!(server.request_count(), 2, "the answer was not a task");
    stop(child).await;
}

#[actix_rt::test]
async fn a_turn_sent_into_a_chats_session_is_answered_in_that_chat() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|req| {
        let last_is_tool = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        if last_is_tool {
            return Turn::text("sent");
        }
        let user = last_user(req);
        match user.strip_prefix("send ") {
            Some(key) => Turn::tool_call(
                "sessions_send",
                serde_json::json!({ "session": key, "text": "time for the standup" }),
            ),
            None => Turn::text(format!("re: {user}")),
        }
    })
    .await;
    let p = project(
        &server,
        &telegram(&fake, ""),
        "[tools]\nallow = [\"sessions_send\"]\n",
    );
    let child = up(&p).await;
    fake.push_message(CHAT, "private", "hello");
    reply_arrives(&fake, CHAT, "re: hello").await;

    // Another session of the agent (a script's) sends into the chat's session.
    let body = json!({
        "text": format!("send agent:assistant:telegram:direct:{CHAT}"),
        "session": "desk",
    });
    let (status, _) = post_task(&child, "assistant", body).await;
    assert!((200..300).contains(&status), "{status}");
    reply_arrives(&fake, CHAT, "re: time for the standup").await;
    assert_eq!(
        sent_to(&fake, CHAT),
        ["re: hello", "re: time for the standup"],
        "the script's own answer (\"sent\") stays with the script"
    );
    stop(child).await;
}

#[actix_rt::test]
async fn a_cron_announcement_reaches_the_chat_through_the_delivery_actor_after_a_429() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|_| Turn::text("the daily report")).await;
    let p = project(&server, &telegram(&fake, ""), "");
    let child = up(&p).await;
    let cli = |args: &[&str]| {
        let mut cmd = p.clawbus();
        cmd.args(args).args(["--url", &child.url]);
        cmd
    };
    let out = run_cmd(cli(&[
        "cron",
        "add",
        "--agent",
        "assistant",
        "--every",
        "1h",
        "--message",
        "report",
        "--announce",
        "telegram:42",
    ]))
    .await;
    succeeded(&out);
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Telegram's flood control answers the first send: 429 with parameters.retry_after.
    fake.fail_sends(1, 429, Some(1));
    let out = run_cmd(cli(&["cron", "run", job["id"].as_str().unwrap()])).await;
    succeeded(&out);
    let fired: Value = serde_json::from_slice(&out.stdout).unwrap();
    reply_arrives(&fake, CHAT, "the daily report").await;
    let task_id = fired["task_id"].as_str().unwrap();
    eventually("the delivery is on the cron task's events", async || {
        let events = get_text(&child, &format!("/v1/tasks/{task_id}/events")).await;
        events.contains("event: delivered") && events.contains("\"attempts\":2")
    })
    .await;
    assert_eq!(sent_to(&fake, CHAT), ["the daily report"], "sent once");
    stop(child).await;
}

#[actix_rt::test]
async fn up_refuses_to_start_without_the_bot_token_and_never_prints_it() {
    let fake = FakeBotApi::start(TOKEN, 1).await.unwrap();
    let server = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    let p = project(&server, &telegram(&fake, ""), "");
    let mut cmd = p.clawbus();
    cmd.args(["up", "--port", "0"]).env_remove("TEST_TG_TOKEN");
    let out = run_cmd(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("channels.telegram.token_env") && stderr.contains("TEST_TG_TOKEN"),
        "{stderr}"
    );
    assert!(fake.offsets().is_empty(), "nothing polled");
}
