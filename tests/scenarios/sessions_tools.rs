//! The session tools: an agent lists its sessions, reads one's history and sends into one;
//! another agent's session is refused.

use crate::support::{
    Project, announcements, eventually, get_json, last_user, post_task, tool_results,
};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

/// The model: `list`, `history <key>`, `send <key>` call the session tools once and answer
/// with the tool result; anything else is answered `re: <text>`.
async fn server() -> ScriptedServer {
    ScriptedServer::with_responder(|req| {
        let user = last_user(req);
        // The session keeps earlier turns: answer a tool result only right after it.
        let last_is_tool = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        if last_is_tool {
            return Turn::text(tool_results(req).last().cloned().unwrap_or_default());
        }
        let mut words = user.splitn(2, ' ');
        match (words.next(), words.next()) {
            (Some("list"), None) => Turn::tool_call("sessions_list", json!({})),
            (Some("history"), Some(key)) => {
                Turn::tool_call("sessions_history", json!({ "session": key, "limit": 10 }))
            }
            (Some("send"), Some(key)) => Turn::tool_call(
                "sessions_send",
                json!({ "session": key, "text": "ping from ops" }),
            ),
            _ => Turn::text(format!("re: {user}")),
        }
    })
    .await
}

/// Agent `a` may use the session tools; `b` is a peer with sessions of its own.
fn project(server: &ScriptedServer) -> Project {
    let p = Project::new();
    p.with_mock_and(&server.base_url(), "")
        .write(
            "agents.d/a.toml",
            "[tools]\nallow = [\"sessions_list\", \"sessions_history\", \"sessions_send\"]\n",
        )
        .write("agents.d/b.toml", "");
    p
}

/// Posts `text` to `agent` in named session `session` and waits for the answer text.
async fn ask(daemon: &clawbus::daemon::Daemon, agent: &str, session: &str, text: &str) -> String {
    let (status, done) = post_task(
        daemon,
        agent,
        json!({ "text": text, "session": session, "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["state"], "succeeded", "{done}");
    done["result"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[actix_rt::test]
async fn an_agent_lists_its_sessions_and_reads_their_history_but_not_a_peers() {
    let server = server().await;
    let project = project(&server);
    let daemon = project.start().await;
    assert_eq!(
        ask(&daemon, "a", "desk", "hello desk").await,
        "re: hello desk"
    );
    assert_eq!(ask(&daemon, "b", "other", "hello b").await, "re: hello b");

    let listed = ask(&daemon, "a", "ops", "list").await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let keys: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"agent:a:api:direct:desk"), "{listed}");
    assert!(keys.iter().all(|k| k.starts_with("agent:a:")), "{listed}");
    let desk = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "agent:a:api:direct:desk")
        .unwrap();
    assert_eq!(desk["turns"], 1, "{desk}");
    assert!(desk["last_activity_ms"].as_u64().unwrap() > 0, "{desk}");
    assert!(desk["state"].is_string(), "{desk}");

    let history = ask(&daemon, "a", "ops", "history agent:a:api:direct:desk").await;
    assert_eq!(
        history.lines().collect::<Vec<_>>(),
        ["user: hello desk", "assistant: re: hello desk"],
        "{history}"
    );

    let refused = ask(&daemon, "a", "ops", "history agent:b:api:direct:other").await;
    assert!(refused.contains("policy_denied"), "{refused}");
    assert!(refused.contains("belongs to agent \\\"b\\\""), "{refused}");
    assert!(!refused.contains("hello b"), "{refused}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn send_runs_a_turn_in_the_named_session_and_refuses_a_peers() {
    let server = server().await;
    let project = project(&server);
    let daemon = project.start().await;
    ask(&daemon, "a", "desk", "hello desk").await;
    ask(&daemon, "b", "other", "hello b").await;

    let sent = ask(&daemon, "a", "ops", "send agent:a:api:direct:desk").await;
    let sent: Value = serde_json::from_str(&sent).unwrap();
    let task_id = sent["task_id"].as_str().unwrap().to_string();
    let mut task = Value::Null;
    eventually("the sent message ran", async || {
        task = get_json(&daemon, &format!("/v1/tasks/{task_id}")).await;
        task["state"] == "succeeded"
    })
    .await;
    assert_eq!(task["result"]["text"], "re: ping from ops", "{task}");
    assert_eq!(task["session"], "agent:a:api:direct:desk", "{task}");
    let desk = get_json(&daemon, "/v1/sessions/agent:a:api:direct:desk").await;
    assert_eq!(desk["session"]["turns"], 2, "{desk}");
    // The sender hears how the turn it started ended, once.
    let told = async || announcements(&daemon, "agent:a:api:direct:ops").await;
    eventually("the sender's session was told", async || {
        told().await.len() == 1
    })
    .await;
    let notice = &told().await[0];
    assert!(
        notice.contains(&task_id) && notice.contains("(succeeded): re: ping from ops"),
        "{notice}"
    );

    let refused = ask(&daemon, "a", "ops", "send agent:b:api:direct:other").await;
    assert!(refused.contains("policy_denied"), "{refused}");
    let other = get_json(&daemon, "/v1/sessions/agent:b:api:direct:other").await;
    assert_eq!(
        other["session"]["turns"], 1,
        "b's session ran nothing: {other}"
    );
    assert_eq!(told().await.len(), 1, "told exactly once");
    daemon.shutdown().await;
}
