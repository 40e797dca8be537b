//! Gateway auth, idempotency headers and task lookup.

use crate::support::{NET, Project, in_fresh_system};
use clawbus::daemon::{Daemon, StartOptions};
use clawbus::gateway::token;
use serde_json::json;

#[actix_rt::test]
async fn missing_or_wrong_token_is_refused_with_401() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/agents/echo/tasks", daemon.url());
    let none = http
        .post(&url)
        .json(&json!({ "text": "x" }))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    let wrong = http
        .post(&url)
        .bearer_auth("not-the-token")
        .json(&json!({ "text": "x" }))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let list = http
        .get(format!("{}/v1/agents", daemon.url()))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 401, "every /v1 route needs the token");
    let health = http
        .get(format!("{}/healthz", daemon.url()))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn token_file_is_private_and_stable_across_restarts() {
    use std::os::unix::fs::PermissionsExt;
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    // The first life runs in its own actix System, which is gone (and the state folder released)
    // when it returns, like a process that ended.
    let config = project.load();
    let first = in_fresh_system(move || async move {
        let daemon = Daemon::start(config, StartOptions::free_port())
            .await
            .unwrap();
        let token = daemon.token().to_string();
        daemon.shutdown().await;
        token
    })
    .await;
    let path = token::token_path(&project.state_dir());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token file is readable by its owner only");
    assert_eq!(token::read(&path).unwrap(), first);
    assert_eq!(first.len(), 64);

    // A second daemon on the same state folder keeps the token, and takes it.
    let second = project.start().await;
    assert_eq!(second.token(), first, "the token survives a restart");
    let listed = reqwest::Client::new()
        .get(format!("{}/v1/agents", second.url()))
        .bearer_auth(&first)
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200, "the old token opens the new daemon");
    second.shutdown().await;
    assert_eq!(
        token::read(&path).unwrap(),
        first,
        "the file was not rewritten"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[actix_rt::test]
async fn idempotency_key_header_is_the_request_id_and_tasks_can_be_fetched() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let http = reqwest::Client::new();
    let post = || {
        http.post(format!("{}/v1/agents/echo/tasks", daemon.url()))
            .bearer_auth(daemon.token())
            .header("Idempotency-Key", "key-1")
            .json(&json!({ "text": "hello", "wait": true }))
            .timeout(NET)
            .send()
    };
    let a: serde_json::Value = post().await.unwrap().json().await.unwrap();
    let b: serde_json::Value = post().await.unwrap().json().await.unwrap();
    assert_eq!(a["request_id"], "key-1");
    assert_eq!(
        a["result"]["text"], "echo: hello",
        "the default scripted model echoes"
    );
    assert_eq!(b["duplicate"], true);
    let got = crate::support::get_json(
        &daemon,
        &format!("/v1/tasks/{}", a["task_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(got["state"], "succeeded");
    assert_eq!(got["result"]["text"], "echo: hello");
    let (status, body) = crate::support::post_task(&daemon, "nobody", json!({ "text": "x" })).await;
    assert_eq!(status, 404, "{body}");
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn non_loopback_bind_is_refused_without_allow_public() {
    let project = Project::new();
    project
        .write("clawbus.toml", "[gateway]\nbind = \"0.0.0.0\"\n")
        .write("agents.d/echo.toml", "");
    let err = clawbus::daemon::Daemon::start(project.load(), Default::default())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("--allow-public"), "{err}");
}

#[actix_rt::test]
async fn a_token_of_another_length_or_case_is_refused_everywhere() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let http = reqwest::Client::new();
    let token = daemon.token().to_string();
    let attempts = [
        token[..token.len() - 1].to_string(),
        format!("{token}0"),
        token.to_uppercase(),
        String::new(),
    ];
    for path in ["/v1/agents", "/v1/approvals", "/v1/sessions", "/metrics"] {
        for attempt in &attempts {
            let r = http
                .get(format!("{}{path}", daemon.url()))
                .header("authorization", format!("Bearer {attempt}"))
                .timeout(NET)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 401, "{path} with {attempt:?}");
        }
    }
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn an_error_answer_never_shows_the_state_dir() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let daemon = project.start().await;
    let (status, body) = crate::support::post_task(
        &daemon,
        "echo",
        json!({ "text": "hi", "session": "s", "wait": true }),
    )
    .await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("succeeded")),
        "{body}"
    );
    // A transcript that cannot be read: a folder where the file was.
    let dir = project.state_dir().join("sessions/echo");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let r = reqwest::Client::new()
        .get(format!(
            "{}/v1/sessions/agent:echo:api:direct:s",
            daemon.url()
        ))
        .bearer_auth(daemon.token())
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let text = r.text().await.unwrap();
    let state = project.state_dir().canonicalize().unwrap();
    assert!(!text.contains(&*state.to_string_lossy()), "{text}");
    assert!(!text.contains(&*project.path().to_string_lossy()), "{text}");
    assert!(
        text.contains("agent:echo:api:direct:s"),
        "names the session: {text}"
    );
    daemon.shutdown().await;
}

#[actix_rt::test]
async fn a_second_daemon_on_the_same_state_dir_is_refused_clearly() {
    let project = Project::new();
    project.write("agents.d/echo.toml", "");
    let first = project.start().await;
    let err =
        clawbus::daemon::Daemon::start(project.load(), clawbus::daemon::StartOptions::free_port())
            .await
            .err()
            .expect("the state dir is held by the first daemon");
    let text = err.to_string();
    assert!(
        text.contains("in use by another clawbus process") && text.contains(".clawbus"),
        "{text}"
    );
    first.shutdown().await;
}
