//! `openclaw agent --deliver` (OpenClaw's real CLI) against a `clawbus up` child: the answer is
//! printed and also delivered, through clawbus's outbox, to the channel and target the CLI names
//! (a webhook with a `deliver_url`, on a loopback receiver); a channel that does not deliver
//! here is refused, naming it, and nothing runs.

use super::delivery::{Receiver, start};
use super::openclaw_cli::OpenClaw;
use super::system::stop;
use crate::support::last_user;
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::Value;

#[actix_rt::test]
async fn openclaw_agent_deliver_sends_the_answer_to_the_named_webhook_and_refuses_an_unknown_channel()
 {
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("re: {}", last_user(req)))).await;
    let receiver = Receiver::start(Vec::new()).await;
    let (_project, daemon) = start(&server, &receiver, 3).await;
    let Some(oc) = OpenClaw::pointed_at(&daemon) else {
        return;
    };
    let json = oc
        .json(&[
            "agent",
            "--agent",
            "ops",
            "--message",
            "ship it",
            "--deliver",
            "--channel",
            "webhook",
            "--to",
            "deploys",
            "--json",
        ])
        .await;
    assert_eq!(
        json["result"]["payloads"][0]["text"], "re: ship it",
        "{json}"
    );
    assert_eq!(
        json["deliveryStatus"]["status"], "sent",
        "the CLI reports the delivery sent: {json}"
    );
    let calls = receiver.calls();
    assert_eq!(calls.len(), 1, "the answer reached the webhook once");
    let body: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(body["hook"], "deploys");
    assert_eq!(body["text"], "re: ship it");
    assert_eq!(
        body["task_id"], json["runId"],
        "the delivery is the run's reply: {body}"
    );

    let plain = oc
        .ok(&[
            "agent",
            "--agent",
            "ops",
            "--message",
            "again",
            "--deliver",
            "--reply-channel",
            "webhook",
            "--reply-to",
            "deploys",
        ])
        .await;
    assert_eq!(
        plain.trim(),
        "re: again",
        "the answer is printed too: {plain}"
    );
    let texts: Vec<String> = receiver
        .calls()
        .iter()
        .map(|c| serde_json::from_str::<Value>(&c.2).unwrap()["text"].to_string())
        .collect();
    assert_eq!(texts, ["\"re: ship it\"", "\"re: again\""]);

    let refused = oc
        .run(&[
            "agent",
            "--agent",
            "ops",
            "--message",
            "lost",
            "--deliver",
            "--channel",
            "slack",
            "--to",
            "#reports",
        ])
        .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "refused: {stderr}");
    assert!(
        stderr.contains("\"slack\"") && stderr.contains("no delivery"),
        "the error names the channel: {stderr}"
    );
    let hookless = oc
        .run(&[
            "agent",
            "--agent",
            "ops",
            "--message",
            "lost",
            "--deliver",
            "--channel",
            "webhook",
            "--to",
            "nowhere",
        ])
        .await;
    let stderr = String::from_utf8_lossy(&hookless.stderr);
    assert_ne!(hookless.status.code(), Some(0), "refused: {stderr}");
    assert!(
        stderr.contains("\"nowhere\""),
        "the error names the hook: {stderr}"
    );
    let asked: Vec<String> = server.requests().iter().map(last_user).collect();
    assert_eq!(
        asked,
        ["ship it", "again"],
        "a refused delivery runs nothing"
    );
    assert_eq!(receiver.calls().len(), 2);
    stop(daemon).await;
}
