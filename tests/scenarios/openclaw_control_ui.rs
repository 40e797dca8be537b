//! OpenClaw's own Control UI (the `dist/control-ui` folder of `openclaw@2026.9.6` from npm) in a
//! real headless Chromium (`clawbus::testkit::Browser`, Debian's chromium and chromedriver)
//! against a `clawbus up` child that found the npm package by itself: no `control_ui_dir`, only
//! `CLAWBUS_OPENCLAW_DIR` naming the install, as `.ci/run` makes it.
//!
//! The chat shows the question above its answer; the Skills screen lists clawbus's skills; the
//! Plugins screen opens on clawbus's empty answers, loaded and without an error.
//! Without OpenClaw or the browser the test prints `skipped: …`; with `CI=true` it fails.

use super::openclaw_cli::installed;
use super::system::{spawn_up, stop};
use crate::support::{NET, Project, last_user};
use clawbus::testkit::{Browser, ScriptedServer, Turn};
use std::time::Duration;

/// How long a screen may take to show what is asserted: the UI loads ~2 MB of scripts, and the
/// whole suite shares 2 cores (and under the 60 s a WebDriver command may take).
const SHOWN_WITHIN: Duration = Duration::from_secs(45);

/// The page's visible text contains `text` (a JavaScript expression for `Browser::wait_for`).
pub(super) fn shows(text: &str) -> String {
    format!(
        "document.body && document.body.innerText.includes({})",
        serde_json::Value::from(text)
    )
}

#[actix_rt::test]
async fn the_control_ui_found_on_the_machine_lists_agents_and_sessions_and_streams_a_chat_answer() {
    let test =
        "the_control_ui_found_on_the_machine_lists_agents_and_sessions_and_streams_a_chat_answer";
    let Some(root) = installed() else {
        return;
    };
    let server = ScriptedServer::with_responder(|req| {
        let asked = last_user(req);
        Turn::text_chunks(vec!["re: ", &asked])
    })
    .await;
    let p = Project::new();
    p.with_mock_and(&server.base_url(), "")
        .write("agents.d/echo.toml", "")
        .write(
            "skills/tidy-notes/SKILL.md",
            "---\nname: tidy-notes\ndescription: Tidies a notes file.\n---\n# Tidy\n",
        );
    let mut cmd = p.clawbus();
    cmd.env("CLAWBUS_OPENCLAW_DIR", &root)
        .args(["up", "--port", "0"]);
    let daemon = spawn_up(&p, cmd).await;
    // A session from before, started over the HTTP API.
    let http = reqwest::Client::new();
    let earlier = http
        .post(format!("{}/v1/agents/echo/tasks", daemon.url))
        .bearer_auth(&daemon.token)
        .json(&serde_json::json!({ "text": "early question", "session": "briefing", "wait": true }))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(earlier.status(), 200);
    let Some(browser) = Browser::start_or_skip(test).await else {
        stop(daemon).await;
        return;
    };
    let at = |path: &str| format!("{}/{path}#token={}", daemon.url, daemon.token);

    // Agents: the configured agent and its model.
    browser.goto(&at("agents")).await.unwrap();
    browser
        .wait_for(
            &format!("{} && {}", shows("echo"), shows("mock/m")),
            SHOWN_WITHIN,
        )
        .await
        .unwrap_or_else(|e| panic!("the Agents screen lists echo with its model: {e}"));

    // Sessions: the one started over HTTP, by its key's name, and the main session after a chat.
    browser.goto(&at("sessions")).await.unwrap();
    browser
        .wait_for(&shows("briefing"), SHOWN_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("the Sessions screen lists the earlier session: {e}"));

    // Chat in the agent's main session: the message goes out, the answer streams back.
    browser.goto(&at("chat")).await.unwrap();
    browser
        .wait_for(
            "document.querySelector(\"textarea[placeholder^='Message']\")",
            SHOWN_WITHIN,
        )
        .await
        .unwrap_or_else(|e| panic!("the chat screen has its composer: {e}"));
    let composer = browser
        .find("textarea[placeholder^='Message']")
        .await
        .unwrap();
    browser
        .type_into(&composer, "hello browser\u{e007}")
        .await
        .unwrap();
    browser
        .wait_for(&shows("re: hello browser"), SHOWN_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("the streamed answer is shown: {e}"));
    // The question stays above its answer, confirmed (clawbus's `session.message` events and
    // `chat.history`'s input receipts): the first "hello browser" on the page is the question,
    // not the tail of "re: hello browser", and nothing is left "Sending".
    let order = "document.body.innerText.indexOf('hello browser') < document.body.innerText.indexOf('re: hello browser') && !document.body.innerText.includes('Sending message')";
    browser
        .wait_for(order, SHOWN_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("the question is shown above the answer, and confirmed: {e}"));
    let asked: Vec<String> = server.requests().iter().map(last_user).collect();
    assert_eq!(asked, ["early question", "hello browser"]);

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/openclaw-control-ui");
    std::fs::create_dir_all(&dir).unwrap();
    let shot = dir.join("chat.png");
    browser.screenshot(&shot).await.unwrap();
    println!("screenshot: {}", shot.display());

    // Skills: clawbus's skill, from `skills.status` (the registry search answers empty).
    browser.goto(&at("skills")).await.unwrap();
    browser
        .wait_for(
            &format!(
                "{} && {} && !document.body.innerText.includes('unknown method')",
                shows("tidy-notes"),
                shows("Tidies a notes file.")
            ),
            SHOWN_WITHIN,
        )
        .await
        .unwrap_or_else(|e| panic!("the Skills screen lists clawbus's skill: {e}"));

    // Plugins: the screen opens on what clawbus answers (no plugins installed, an empty
    // catalog: `plugins.list`, `plugins.catalog.browse`): its catalog views, loaded, without an
    // error.
    browser.goto(&at("plugins")).await.unwrap();
    let fine = [
        "unknown method",
        "INVALID_REQUEST",
        "Error",
        "Loading ClawHub plugins",
        "Connect to browse plugins",
    ]
    .map(|t| format!("!document.body.innerText.includes('{t}')"))
    .join(" && ");
    let shown = browser
        .wait_for(
            &format!(
                "{} && {} && {fine}",
                shows("Extend your Claw with tools"),
                shows("Featured")
            ),
            SHOWN_WITHIN,
        )
        .await;
    if let Err(e) = shown {
        let text = browser
            .execute("return document.body.innerText", Vec::new())
            .await;
        panic!("the Plugins screen shows clawbus's empty answers: {e}; it shows: {text:?}");
    }
    browser.screenshot(&dir.join("plugins.png")).await.unwrap();

    browser.goto(&at("sessions")).await.unwrap();
    browser
        .wait_for(&shows("agent:echo:main"), SHOWN_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("the chat's session is listed: {e}"));
    browser.quit().await;
    stop(daemon).await;
}
