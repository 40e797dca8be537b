//! Delivery through the outbound webhook channel, against a real `clawbus up` child: a reply
//! to a hook's delivery is POSTed, signed, to its `deliver_url`; a receiver that fails is tried
//! again with backoff until it answers; one that always fails gets the failure recorded on the
//! task's events, after its terminal event; a reply still being retried when the daemon is
//! killed with `kill -9` is delivered from the outbox after the restart.

use super::system::{Child, spawn_up, stop};
use crate::support::{NET, Project, eventually, get_text};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use clawbus::gateway::webhooks::{sign, signature_matches};
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::Value;
use std::sync::{Arc, Mutex};

pub(super) const SECRET: &str = "outbound-secret-for-tests";

/// One call a receiver got: (signature header, delivery id header, body, timestamp header).
pub(super) type Call = (String, String, String, String);

/// What a receiver answers (statuses, then 200) and the calls it got.
#[derive(Default)]
struct Script {
    statuses: Vec<u16>,
    calls: Vec<Call>,
}

/// A webhook receiver on loopback answering a script of statuses (then 200).
pub(super) struct Receiver {
    url: String,
    script: Arc<Mutex<Script>>,
}

async fn receive(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let mut s = script.lock().unwrap();
    s.calls.push((
        header("x-clawbus-signature"),
        header("x-clawbus-delivery"),
        body,
        header("x-clawbus-timestamp"),
    ));
    let status = if s.statuses.is_empty() {
        200
    } else {
        s.statuses.remove(0)
    };
    StatusCode::from_u16(status).unwrap()
}

impl Receiver {
    /// Its URL.
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    pub(super) async fn start(statuses: Vec<u16>) -> Self {
        let script = Arc::new(Mutex::new(Script {
            statuses,
            calls: Vec::new(),
        }));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}/hook"),
            script,
        }
    }

    pub(super) fn calls(&self) -> Vec<Call> {
        self.script.lock().unwrap().calls.clone()
    }
}

/// A daemon with agent `ops` and webhook `deploys` delivering to `receiver`.
pub(super) async fn start(
    server: &ScriptedServer,
    receiver: &Receiver,
    attempts: u32,
) -> (Project, Child) {
    start_with(server, receiver, attempts, "20ms").await
}

/// A daemon whose retries wait `backoff` (at most 100 ms, or `backoff` when longer).
async fn start_with(
    server: &ScriptedServer,
    receiver: &Receiver,
    attempts: u32,
    backoff: &str,
) -> (Project, Child) {
    let project = Project::new();
    let hook = format!(
        "[webhooks.deploys]\nagent = \"ops\"\nsecret_env = \"TEST_HOOK_SECRET\"\ndeliver_url = \"{}\"\n\n[delivery]\nbackoff = \"{backoff}\"\nbackoff_max = \"{}\"\nmax_attempts = {attempts}\n",
        receiver.url,
        if backoff == "20ms" { "100ms" } else { backoff }
    );
    project
        .with_mock_and(&server.base_url(), &hook)
        .write("agents.d/ops.toml", "");
    let child = up_with_secret(&project).await;
    (project, child)
}

/// Starts `clawbus up` in `project` with the hooks' secret set.
async fn up_with_secret(project: &Project) -> Child {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"])
        .env("TEST_HOOK_SECRET", SECRET);
    spawn_up(project, cmd).await
}

/// Sends a signed inbound delivery; returns the task id.
pub(super) async fn deliver(child: &Child, delivery: &str, body: &str) -> String {
    #[allow(
        clippy::disallowed_methods,
        reason = "a signed delivery carries the Unix time the child checks on its system clock"
    )]
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/hooks/deploys", child.url))
        .header("X-Clawbus-Delivery", delivery)
        .header("X-Clawbus-Timestamp", now_s.to_string())
        .header(
            "X-Clawbus-Signature",
            sign(SECRET.as_bytes(), now_s, body.as_bytes()).unwrap(),
        )
        .body(body.to_string())
        .timeout(NET)
        .send()
        .await
        .unwrap();
    let answer: Value = resp.json().await.unwrap();
    answer["task_id"].as_str().unwrap().to_string()
}

/// The task's events (SSE), as text.
pub(super) async fn events(child: &Child, task_id: &str) -> String {
    get_text(child, &format!("/v1/tasks/{task_id}/events")).await
}

#[actix_rt::test]
async fn a_failing_receiver_is_retried_and_the_signed_reply_then_delivered() {
    let server = ScriptedServer::with_responder(|_| Turn::text("deployed v42")).await;
    let receiver = Receiver::start(vec![500, 503]).await;
    let (_project, child) = start(&server, &receiver, 5).await;
    let task_id = deliver(&child, "d-1", "deploy api").await;
    eventually("the task's events record the delivery", async || {
        events(&child, &task_id).await.contains("event: delivered")
    })
    .await;
    let calls = receiver.calls();
    assert_eq!(calls.len(), 3, "two failures, then the delivery");
    let (signature, delivery, body, timestamp) = &calls[2];
    assert!(
        signature_matches(SECRET.as_bytes(), timestamp, body.as_bytes(), signature).is_some(),
        "signed with the hook's secret over the timestamp and the body"
    );
    assert_eq!(delivery, &task_id, "the delivery id is the task id");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["text"], "deployed v42");
    assert_eq!(body["hook"], "deploys");
    assert_eq!(body["task_id"], task_id.as_str());
    let text = events(&child, &task_id).await;
    assert!(
        text.contains("\"target\":\"webhook:deploys\"") && text.contains("\"attempts\":3"),
        "{text}"
    );
    let terminal = text.find("event: terminal").unwrap();
    assert!(text.find("event: delivered").unwrap() > terminal);
    stop(child).await;
}

#[actix_rt::test]
async fn a_receiver_that_always_fails_gets_the_failure_recorded_on_the_task() {
    let server = ScriptedServer::with_responder(|_| Turn::text("deployed")).await;
    let receiver = Receiver::start(vec![503; 10]).await;
    let (_project, child) = start(&server, &receiver, 3).await;
    let task_id = deliver(&child, "d-2", "deploy web").await;
    eventually("the failed delivery is on the task's events", async || {
        events(&child, &task_id)
            .await
            .contains("event: delivery_failed")
    })
    .await;
    assert_eq!(receiver.calls().len(), 3, "max_attempts tries, no more");
    let text = events(&child, &task_id).await;
    assert!(
        text.contains("\"attempts\":3") && text.contains("HTTP 503"),
        "{text}"
    );
    assert!(
        text.contains("\"state\":\"succeeded\""),
        "the task itself succeeded: {text}"
    );
    let metrics = get_text(&child, "/metrics").await;
    assert!(
        metrics.contains("clawbus_deliveries_total{channel=\"webhook\",outcome=\"failed\"} 1")
            && metrics.contains("clawbus_delivery_retries_total{channel=\"webhook\"} 2"),
        "{metrics}"
    );
    stop(child).await;
}

#[actix_rt::test]
async fn a_reply_pending_when_the_daemon_is_killed_is_delivered_after_the_restart() {
    let server = ScriptedServer::with_responder(|_| Turn::text("deployed v7")).await;
    // The first try is refused; the retry is due in an hour, long after the kill.
    let receiver = Receiver::start(vec![503]).await;
    let (project, first) = start_with(&server, &receiver, 5, "1h").await;
    let task_id = deliver(&first, "d-3", "deploy db").await;
    eventually("the first try reached the receiver", async || {
        receiver.calls().len() == 1
    })
    .await;
    let mut process = first.child;
    process.kill().unwrap();
    process.wait().unwrap();

    let second = up_with_secret(&project).await;
    eventually("the restarted daemon delivers the reply", async || {
        events(&second, &task_id).await.contains("event: delivered")
    })
    .await;
    let calls = receiver.calls();
    assert_eq!(
        calls.len(),
        2,
        "the refused try, then the delivery after the restart"
    );
    let (_, delivery, body, _) = &calls[1];
    assert_eq!(
        delivery, &task_id,
        "the same delivery id, so a receiver can drop a repeat"
    );
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["text"], "deployed v7");
    assert_eq!(server.request_count(), 1, "the task did not run again");
    stop(second).await;
}
