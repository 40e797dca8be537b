//! Inbound webhooks, against a real `clawbus up` (the secret comes from its environment):
//! a signed delivery runs, a bad or missing signature is refused with nothing enqueued, a
//! redelivered id runs once, and a replayed, an old or a future-dated delivery is refused.

use super::system::{Child, spawn_up, stop};
use crate::support::{NET, Project, eventually, get_json};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};

const SECRET: &str = "hook-secret-for-tests";

/// The Unix time in seconds (the child runs on the system clock).
#[allow(
    clippy::disallowed_methods,
    reason = "a signed delivery carries the Unix time the child checks on its system clock"
)]
pub(super) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `(timestamp, signature)` of `body` signed now.
fn sign(body: &[u8]) -> (u64, String) {
    sign_at(now_s(), body)
}

fn sign_at(timestamp: u64, body: &[u8]) -> (u64, String) {
    let sig = clawbus::gateway::webhooks::sign(SECRET.as_bytes(), timestamp, body).unwrap();
    (timestamp, sig)
}

async fn start(server: &ScriptedServer, hook: &str) -> (Project, Child) {
    let project = Project::new();
    project
        .with_mock_and(&server.base_url(), hook)
        .write("agents.d/ops.toml", "");
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"])
        .env("TEST_HOOK_SECRET", SECRET);
    let child = spawn_up(&project, cmd).await;
    (project, child)
}

async fn deliver(
    child: &Child,
    delivery: &str,
    body: &str,
    signature: Option<(u64, String)>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{}/v1/hooks/deploys", child.url))
        .header("Content-Type", "application/json")
        .header("X-Clawbus-Delivery", delivery)
        .body(body.to_string())
        .timeout(NET);
    if let Some((timestamp, sig)) = signature {
        req = req
            .header("X-Clawbus-Timestamp", timestamp.to_string())
            .header("X-Clawbus-Signature", sig);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

const HOOK: &str = "[webhooks.deploys]\nagent = \"ops\"\nsecret_env = \"TEST_HOOK_SECRET\"\n";

#[actix_rt::test]
async fn a_signed_delivery_runs_once_and_a_bad_signature_is_refused_with_nothing_enqueued() {
    let server = ScriptedServer::with_responder(|_| Turn::text("deployed")).await;
    let (_project, child) = start(&server, HOOK).await;

    // Unsigned and wrongly signed: 401, no task, no model call. No bearer token either way.
    let body = json!({ "event": "deploy", "service": "api" }).to_string();
    let (status, answer) = deliver(&child, "d-1", &body, None).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_signature");
    let forged = sign(b"another body");
    let (status, answer) = deliver(&child, "d-1", &body, Some(forged)).await;
    assert_eq!(status, 401, "{answer}");
    let tasks = get_json(&child, "/v1/tasks?agent=ops").await;
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(0), "{tasks}");
    assert_eq!(server.request_count(), 0);

    // Signed: accepted, runs in the delivery's session with the body as its text.
    let (status, answer) = deliver(&child, "d-1", &body, Some(sign(body.as_bytes()))).await;
    assert!(status == 202 || status == 200, "{status} {answer}");
    assert_eq!(answer["request_id"], "hook-deploys-d-1");
    assert_eq!(answer["agent"], "ops");
    assert_eq!(answer["session"], "agent:ops:webhook:deploys:d-1");
    let task_id = answer["task_id"].as_str().unwrap().to_string();
    eventually("the delivery's task succeeded", async || {
        get_json(&child, &format!("/v1/tasks/{task_id}")).await["state"] == "succeeded"
    })
    .await;
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0]["messages"].to_string();
    assert!(sent.contains("deploy") && sent.contains("api"), "{sent}");

    // The same delivery again: answered from the store, not run again.
    let (status, again) = deliver(&child, "d-1", &body, Some(sign(body.as_bytes()))).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["task_id"], task_id.as_str());
    assert_eq!(server.request_count(), 1, "one run for the redelivery");
    let tasks = get_json(&child, "/v1/tasks?agent=ops").await;
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(1), "{tasks}");

    // A missing delivery id is refused, also with a good signature.
    let (timestamp, signature) = sign(b"x");
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/hooks/deploys", child.url))
        .header("X-Clawbus-Timestamp", timestamp.to_string())
        .header("X-Clawbus-Signature", signature)
        .body("x")
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    stop(child).await;
}

#[actix_rt::test]
async fn a_replayed_an_old_and_a_future_dated_delivery_are_refused_and_nothing_runs_twice() {
    let server = ScriptedServer::with_responder(|_| Turn::text("deployed")).await;
    let (_project, child) = start(&server, &format!("{HOOK}tolerance = \"5m\"\n")).await;
    let body = json!({ "event": "deploy", "service": "api" }).to_string();

    // Signed 10 minutes ago or 10 minutes ahead: outside the 5-minute tolerance.
    let old = sign_at(now_s() - 600, body.as_bytes());
    let (status, answer) = deliver(&child, "old-1", &body, Some(old)).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "stale_signature", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("older than the hook's tolerance of 300 s"),
        "{answer}"
    );
    let future = sign_at(now_s() + 600, body.as_bytes());
    let (status, answer) = deliver(&child, "future-1", &body, Some(future)).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "stale_signature", "{answer}");
    // Without a timestamp: refused, even with the body's signature.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/hooks/deploys", child.url))
        .header("X-Clawbus-Delivery", "bare-1")
        .header("X-Clawbus-Signature", sign(body.as_bytes()).1)
        .body(body.clone())
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // A timestamp moved to now under an old signature does not match.
    let (_, old_sig) = sign_at(now_s() - 600, body.as_bytes());
    let (status, answer) = deliver(&child, "moved-1", &body, Some((now_s(), old_sig))).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_signature", "{answer}");

    // A captured delivery: it runs once.
    let captured = sign(body.as_bytes());
    let (status, answer) = deliver(&child, "d-1", &body, Some(captured.clone())).await;
    assert_eq!(status, 202, "{answer}");
    let task_id = answer["task_id"].as_str().unwrap().to_string();
    eventually("the delivery's task succeeded", async || {
        get_json(&child, &format!("/v1/tasks/{task_id}")).await["state"] == "succeeded"
    })
    .await;
    // Replayed inside the tolerance under a new delivery id: refused.
    let (status, answer) = deliver(&child, "d-2", &body, Some(captured.clone())).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "replayed_signature", "{answer}");
    // The same delivery id, as sent or signed anew: the duplicate, not a second run.
    let (status, again) = deliver(&child, "d-1", &body, Some(captured)).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true, "{again}");
    let (status, again) = deliver(
        &child,
        "d-1",
        &body,
        Some(sign_at(now_s() + 1, body.as_bytes())),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["task_id"], task_id.as_str());
    assert_eq!(server.request_count(), 1, "one run in all");
    let tasks = get_json(&child, "/v1/tasks?agent=ops").await;
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(1), "{tasks}");
    stop(child).await;
}

#[actix_rt::test]
async fn a_fixed_session_collects_every_delivery_and_check_places_bad_hooks() {
    let server = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    let hook = format!("{HOOK}session = \"ci\"\n");
    let (project, child) = start(&server, &hook).await;
    let body = "build 42 failed";
    let (status, answer) = deliver(&child, "d-7", body, Some(sign(body.as_bytes()))).await;
    assert!(status == 202 || status == 200, "{status} {answer}");
    assert_eq!(answer["session"], "agent:ops:webhook:deploys:ci");
    stop(child).await;

    project.write(
        "clawbus.toml",
        "[webhooks.deploys]\nagent = \"nobody\"\nsecret_env = \"not-a-name\"\ntolerance = \"soon\"\n\n[webhooks.Bad]\nsecret_env = \"X\"\n",
    );
    let out = crate::support::run_cmd({
        let mut cmd = project.clawbus();
        cmd.arg("check");
        cmd
    })
    .await;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("clawbus.toml:3:14: field \"webhooks.deploys.secret_env\""),
        "{text}"
    );
    assert!(
        !text.contains("not-a-name"),
        "the value is never echoed: {text}"
    );
    assert!(text.contains("field \"webhooks.Bad\""), "{text}");
    assert!(
        text.contains("clawbus.toml:4:13: field \"webhooks.deploys.tolerance\": invalid duration"),
        "{text}"
    );
    assert!(
        text.contains("field \"webhooks.Bad.agent\": missing"),
        "{text}"
    );
}
