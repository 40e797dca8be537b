//! The dashboard at `/ui/` in a real headless Chromium (clawbus-testkit's `Browser`, Debian's
//! chromium and chromedriver) against a `clawbus up` child: login, live task events across a
//! dropped connection, the shipped team's tree, cancel, approvals, a hostile transcript shown as
//! text. Screenshots go to `target/dashboard/`. Without a browser the tests say they were
//! skipped; with `CI=true` they fail.

use super::agents::copy_tree;
use super::system::{Child, spawn_up, task};
use crate::support::{Gateway, NET, Project, get_json, last_user, post_task, tool_results};
use clawbus::testkit::{Browser, Gate, ScriptedServer, Turn};
use serde_json::{Value, json};
use std::path::PathBuf;

/// Where the screenshots go: `target/dashboard/<name>.png` (printed).
fn screenshot_path(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("dashboard").join(format!("{name}.png"))
}

async fn screenshot(browser: &Browser, name: &str) {
    let path = screenshot_path(name);
    browser.screenshot(&path).await.unwrap();
    println!("screenshot: {}", path.display());
}

/// Waits until the JavaScript `condition` holds in the page (or fails naming it).
pub(super) async fn until(browser: &Browser, condition: &str) -> Value {
    match browser.wait_for(condition, NET).await {
        Ok(v) => v,
        Err(e) => {
            let body = browser
                .execute("return document.body.innerText", Vec::new())
                .await
                .unwrap_or_default();
            panic!(
                "{e}\n--- the page shows:\n{}",
                body.as_str().unwrap_or_default()
            );
        }
    }
}

/// Clicks the element `css` selects, as a user would; a live page may redraw it between the find
/// and the click (a stale reference), then it is found again.
pub(super) async fn click(browser: &Browser, css: &str) {
    for _ in 0..20 {
        let element = browser.find(css).await.unwrap();
        match browser.click(&element).await {
            Ok(()) => return,
            Err(e) if e.error == "stale element reference" => continue,
            Err(e) => panic!("click {css}: {e}"),
        }
    }
    panic!("click {css}: the element kept being redrawn");
}

/// A browser logged in to the dashboard of `child`, showing `hash`.
async fn logged_in(test: &str, child: &Child, hash: &str) -> Option<Browser> {
    let browser = Browser::start_or_skip(test).await?;
    log_in(&browser, child).await;
    browser
        .goto(&format!("{}/ui/#/{hash}", child.url))
        .await
        .unwrap();
    Some(browser)
}

/// Logs `browser` in to the dashboard of `child` with its token, as a person would.
pub(super) async fn log_in(browser: &Browser, child: &Child) {
    browser.goto(&format!("{}/ui/", child.url)).await.unwrap();
    until(browser, "!document.getElementById('login').hidden").await;
    let input = browser.find("#token").await.unwrap();
    browser.type_into(&input, &child.token).await.unwrap();
    let submit = browser.find("#login button[type=submit]").await.unwrap();
    browser.click(&submit).await.unwrap();
    until(browser, "!document.getElementById('top').hidden").await;
}

/// A project whose agent `coder` talks to `server`, with `agent` as its file.
pub(super) fn coder(server: &ScriptedServer, agent: &str) -> Project {
    let p = Project::new();
    p.with_mock_provider(&server.base_url(), "30s", 0)
        .write("agents.d/coder.toml", agent);
    p
}

pub(super) async fn up(project: &Project) -> Up {
    let mut cmd = project.clawbus();
    cmd.args(["up", "--port", "0"]);
    Up(Some(spawn_up(project, cmd).await))
}

/// A `clawbus up` child that is killed when dropped: a failing test leaves no daemon behind.
pub(super) struct Up(Option<Child>);

impl Up {
    /// Stops the daemon with SIGTERM and checks it exits 0.
    pub(super) async fn stop(mut self) {
        if let Some(child) = self.0.take() {
            super::system::stop(child).await;
        }
    }
}

impl std::ops::Deref for Up {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("running until stopped")
    }
}

impl Gateway for Up {
    fn base_url(&self) -> String {
        self.url.clone()
    }

    fn bearer(&self) -> &str {
        &self.token
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.child.kill();
            let _ = c.child.wait();
        }
    }
}

#[actix_rt::test]
async fn dashboard_logs_in_with_the_token_and_names_a_wrong_one() {
    let server = ScriptedServer::with_responder(|_| Turn::text("ok")).await;
    let project = coder(&server, "");
    let child = up(&project).await;
    // The files: a strict policy, no framing, small.
    let http = reqwest::Client::new();
    let page = http
        .get(format!("{}/ui/", child.url))
        .timeout(NET)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert_eq!(page.headers()["x-frame-options"], "DENY");

    let Some(browser) =
        Browser::start_or_skip("dashboard_logs_in_with_the_token_and_names_a_wrong_one").await
    else {
        return child.stop().await;
    };
    browser.goto(&format!("{}/ui/", child.url)).await.unwrap();
    until(&browser, "!document.getElementById('login').hidden").await;
    let input = browser.find("#token").await.unwrap();
    browser.type_into(&input, "not-the-token").await.unwrap();
    let submit = browser.find("#login button[type=submit]").await.unwrap();
    browser.click(&submit).await.unwrap();
    let shown = until(
        &browser,
        "!document.getElementById('login-error').hidden && document.getElementById('login-error').textContent",
    )
    .await;
    assert!(
        shown.as_str().unwrap().starts_with("Wrong token"),
        "{shown}"
    );
    assert_eq!(
        browser
            .execute("return sessionStorage.getItem('clawbus.token')", Vec::new())
            .await
            .unwrap(),
        Value::Null,
        "a refused token is not kept"
    );

    browser.type_into(&input, &child.token).await.unwrap();
    browser.click(&submit).await.unwrap();
    until(
        &browser,
        "document.querySelector('tr[data-agent=coder] .agent-state')",
    )
    .await;
    let stored = browser
        .execute(
            "return [sessionStorage.getItem('clawbus.token'), location.href]",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        stored[0],
        child.token.as_str(),
        "kept in the tab's session storage"
    );
    assert!(
        !stored[1].as_str().unwrap().contains(&child.token),
        "never in the URL: {stored}"
    );
    until(&browser, "document.querySelector('.lane[data-lane=main]')").await;
    screenshot(&browser, "overview").await;
    // A phone's width: nothing wider than the screen.
    browser.resize(390, 844).await.unwrap();
    until(
        &browser,
        "innerWidth < 500 && document.documentElement.scrollWidth <= innerWidth",
    )
    .await;
    screenshot(&browser, "overview-phone").await;
    browser.quit().await;
    child.stop().await;
}

/// The event rows of the task page: `[seq, type]` in page order.
pub(super) async fn event_rows(browser: &Browser) -> Vec<(u64, String)> {
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('#task-events li')].map(li => [Number(li.dataset.seq), li.dataset.type])",
            Vec::new(),
        )
        .await
        .unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap(), r[1].as_str().unwrap().to_string()))
        .collect()
}

/// The task's events as the API streams them: `[seq, type]`.
async fn api_events(child: &Child, id: &str) -> Vec<(u64, String)> {
    let text = reqwest::Client::new()
        .get(format!("{}/v1/tasks/{id}/events", child.url))
        .bearer_auth(&child.token)
        .timeout(NET)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["event"]["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[actix_rt::test]
async fn a_tool_task_shows_its_events_live_in_order_once_each_across_a_dropped_connection() {
    let tool_gate = Gate::new();
    let answer_gate = Gate::new();
    let server = ScriptedServer::start(vec![
        Turn::gated(
            &tool_gate,
            Turn::tool_call("exec", json!({ "command": "date" })),
        ),
        Turn::gated(&answer_gate, Turn::text_chunks(vec!["It ", "is ", "now."])),
    ])
    .await;
    let project = coder(&server, "[exec]\nallow = [\"date\"]\n");
    let child = up(&project).await;
    let (_, posted) = post_task(&child, "coder", json!({ "text": "what time is it?" })).await;
    let id = posted["task_id"].as_str().unwrap().to_string();
    let Some(browser) = logged_in(
        "a_tool_task_shows_its_events_live_in_order_once_each_across_a_dropped_connection",
        &child,
        &format!("task/{id}"),
    )
    .await
    else {
        tool_gate.open();
        answer_gate.open();
        return child.stop().await;
    };
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=model_call]')",
    )
    .await;
    // Live: the tool call shows while the page is open.
    tool_gate.open();
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=tool_end]')",
    )
    .await;
    until(
        &browser,
        "document.querySelectorAll('#task-events li[data-type=model_call]').length === 2",
    )
    .await;
    // The call's arguments are on its live event row, as text.
    let args = until(
        &browser,
        "document.querySelector('#task-events li[data-type=tool_start] code.args') && document.querySelector('#task-events li[data-type=tool_start] code.args').textContent",
    )
    .await;
    assert_eq!(args, r#"{"command":"date"}"#);
    // Drop the event connections, let the task finish meanwhile, restore them.
    click(&browser, "#live").await;
    until(
        &browser,
        "document.getElementById('live').dataset.state === 'paused'",
    )
    .await;
    answer_gate.open();
    crate::support::eventually("the task succeeded", async || {
        task(&child, &id).await["state"] == "succeeded"
    })
    .await;
    assert!(
        !event_rows(&browser)
            .await
            .iter()
            .any(|(_, t)| t == "terminal"),
        "no event arrives while the connection is down"
    );
    click(&browser, "#live").await;
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=terminal]')",
    )
    .await;
    until(
        &browser,
        "document.getElementById('task-answer').textContent === 'It is now.'",
    )
    .await;

    let shown = event_rows(&browser).await;
    let streamed = api_events(&child, &id).await;
    assert_eq!(shown, streamed, "every event once, in order");
    let types: Vec<&str> = shown.iter().map(|(_, t)| t.as_str()).collect();
    for want in [
        "queued",
        "started",
        "tool_start",
        "tool_end",
        "delta",
        "terminal",
    ] {
        assert!(types.contains(&want), "{want} in {types:?}");
    }
    // The tool call with its arguments, from the session's transcript.
    until(&browser, "document.querySelector('#task-tools pre') && document.querySelector('#task-tools').textContent.includes('\"command\":\"date\"')").await;
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn a_task_in_a_named_session_shows_its_tool_calls_from_the_routed_session() {
    let test = "a_task_in_a_named_session_shows_its_tool_calls_from_the_routed_session";
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": "date" })),
        Turn::text("It is now."),
    ])
    .await;
    let project = coder(&server, "[exec]\nallow = [\"date\"]\n");
    let child = up(&project).await;
    let (status, posted) = post_task(
        &child,
        "coder",
        json!({ "text": "what time is it?", "session": "notes", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{posted}");
    assert_eq!(
        posted["session"], "agent:coder:api:direct:notes",
        "the task records the routed session key, not the name: {posted}"
    );
    let id = posted["task_id"].as_str().unwrap().to_string();
    let Some(browser) = logged_in(test, &child, &format!("task/{id}")).await else {
        return child.stop().await;
    };
    until(&browser, "document.querySelector('#task-tools pre') && document.querySelector('#task-tools').textContent.includes('\"command\":\"date\"')").await;
    let link = until(
        &browser,
        "document.querySelector('#task-head a[href^=\"#/session/\"]') && document.querySelector('#task-head a[href^=\"#/session/\"]').textContent",
    )
    .await;
    assert_eq!(link, "agent:coder:api:direct:notes");
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn team_rust_shows_the_tree_assistant_writer_researcher() {
    let project = Project::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_tree(&root.join("agents.d"), &project.agents_dir());
    std::fs::copy(root.join("clawbus.toml"), project.config_path()).unwrap();
    let child = up(&project).await;
    let (status, done) = post_task(
        &child,
        "assistant",
        json!({ "text": "team rust", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let id = done["task_id"].as_str().unwrap().to_string();
    let Some(browser) = logged_in(
        "team_rust_shows_the_tree_assistant_writer_researcher",
        &child,
        &format!("task/{id}"),
    )
    .await
    else {
        return child.stop().await;
    };
    until(
        &browser,
        "document.querySelectorAll('#task-tree li').length === 3",
    )
    .await;
    let tree = browser
        .execute(
            "return [...document.querySelectorAll('#task-tree li')].map(li => [li.dataset.agent, Number(li.dataset.depth), li.dataset.state])",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        tree,
        json!([
            ["assistant", 0, "succeeded"],
            ["writer", 1, "succeeded"],
            ["researcher", 2, "succeeded"]
        ])
    );
    until(
        &browser,
        "document.querySelectorAll('#task-timeline rect').length === 3",
    )
    .await;
    screenshot(&browser, "task-tree").await;
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn a_slow_task_is_cancelled_from_the_page() {
    let server = ScriptedServer::with_responder(|_| Turn::hang()).await;
    let project = coder(&server, "");
    let child = up(&project).await;
    let (_, posted) = post_task(&child, "coder", json!({ "text": "take your time" })).await;
    let id = posted["task_id"].as_str().unwrap().to_string();
    let Some(browser) = logged_in(
        "a_slow_task_is_cancelled_from_the_page",
        &child,
        &format!("task/{id}"),
    )
    .await
    else {
        return child.stop().await;
    };
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=model_call]')",
    )
    .await;
    click(&browser, "#cancel").await;
    until(
        &browser,
        "document.querySelector('#task-head .s-cancelled')",
    )
    .await;
    until(
        &browser,
        "document.querySelector('#task-tree li[data-state=cancelled]')",
    )
    .await;
    assert_eq!(task(&child, &id).await["state"], "cancelled");
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn an_approval_is_answered_from_the_page_and_the_command_runs() {
    // One argument holds markup and spaces: the card must show it as one word, as text.
    let server = ScriptedServer::start(vec![
        Turn::tool_call(
            "exec",
            json!({ "command": "echo 'approved from <b>the</b> page' second" }),
        ),
        Turn::text("done"),
    ])
    .await;
    let project = coder(
        &server,
        "[exec]\nsecurity = \"ask\"\nallow = [\"ls\"]\napproval_timeout = \"60s\"\n",
    );
    let child = up(&project).await;
    let Some(browser) = logged_in(
        "an_approval_is_answered_from_the_page_and_the_command_runs",
        &child,
        "approvals",
    )
    .await
    else {
        return child.stop().await;
    };
    until(&browser, "document.getElementById('approvals')").await;
    let (_, posted) = post_task(&child, "coder", json!({ "text": "echo something" })).await;
    let id = posted["task_id"].as_str().unwrap().to_string();
    // The request arrives live: the card and the badge.
    until(&browser, "document.querySelector('.approval ol.argv li')").await;
    let card = browser
        .execute(
            "const c = document.querySelector('.approval'); return {
               argv: [...c.querySelectorAll('ol.argv > li')].map(li => li.textContent),
               agent: c.querySelector('.agent').textContent,
               task: c.querySelector('a.task-link').getAttribute('href'),
               markup: c.querySelectorAll('b, ol.argv li *:not(code)').length }",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        card,
        json!({
            "argv": ["echo", "approved from <b>the</b> page", "second"],
            "agent": "coder",
            "task": format!("#/task/{id}"),
            "markup": 0,
        }),
        "the exact argv as text, the agent and a link to the task"
    );
    until(&browser, "document.getElementById('approvals-badge').textContent === '1' && !document.getElementById('approvals-badge').hidden").await;
    // The link opens the asking task's page.
    click(&browser, ".approval a.task-link").await;
    until(
        &browser,
        &format!(
            "location.hash === '#/task/{id}' && document.querySelector('#task-head strong') && document.querySelector('#task-head strong').textContent === 'coder'"
        ),
    )
    .await;
    browser.execute("history.back()", Vec::new()).await.unwrap();
    until(&browser, "document.querySelector('.approval button.allow')").await;
    click(&browser, ".approval button.allow").await;
    crate::support::eventually("the task succeeded", async || {
        task(&child, &id).await["state"] == "succeeded"
    })
    .await;
    let ran = &tool_results(&server.requests()[1])[0];
    assert!(
        ran.contains("approved from <b>the</b> page second"),
        "the command ran: {ran}"
    );
    until(
        &browser,
        "document.getElementById('approvals-badge').hidden",
    )
    .await;
    browser.quit().await;
    child.stop().await;
}

const HOSTILE: &str = "<script>alert(1)</script> and <img src=x onerror=alert(1)>";

#[actix_rt::test]
async fn a_hostile_transcript_renders_as_text_and_runs_nothing() {
    let server =
        ScriptedServer::with_responder(|req| Turn::text(format!("echo: {}", last_user(req)))).await;
    let project = coder(&server, "");
    let child = up(&project).await;
    let (status, done) = post_task(
        &child,
        "coder",
        json!({ "text": HOSTILE, "session": "xss", "wait": true }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let sessions = get_json(&child, "/v1/sessions").await;
    let key = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .find(|k| k.ends_with(":xss"))
        .unwrap_or_else(|| panic!("the session xss: {sessions}"));
    let Some(browser) = logged_in(
        "a_hostile_transcript_renders_as_text_and_runs_nothing",
        &child,
        &format!("session/{}", key.replace(':', "%3A")),
    )
    .await
    else {
        return child.stop().await;
    };
    until(
        &browser,
        "document.querySelectorAll('#transcript li.msg').length === 2",
    )
    .await;
    let texts = browser
        .execute(
            "return [...document.querySelectorAll('#transcript .text')].map(t => t.textContent)",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(texts, json!([HOSTILE, format!("echo: {HOSTILE}")]));
    let planted = browser
        .execute(
            "return document.querySelectorAll('#transcript img, #transcript script, main img').length",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(planted, 0, "no element was made of the text");
    assert_eq!(
        browser.alert_text().await.unwrap(),
        None,
        "no dialog opened"
    );
    // The policy is on the page the browser got.
    let csp = reqwest::Client::new()
        .get(format!("{}/ui/", child.url))
        .timeout(NET)
        .send()
        .await
        .unwrap()
        .headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    screenshot(&browser, "transcript").await;
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn chat_streams_the_answer_and_cron_jobs_are_run_and_disabled_from_the_page() {
    let server = ScriptedServer::with_responder(|req| match last_user(req).as_str() {
        "hi" => Turn::text_chunks(vec!["Hello ", "from ", "coder."]),
        _ => Turn::text("ok"),
    })
    .await;
    let project = coder(&server, "");
    let child = up(&project).await;
    let (status, job) = crate::support::post_json(
        &child,
        "/v1/cron",
        json!({
            "name": "morning report",
            "agent": "coder",
            "schedule": { "kind": "cron", "expr": "0 9 * * *", "tz": "Europe/Paris" },
            "payload": { "kind": "agentTurn", "message": "report" },
        }),
    )
    .await;
    assert_eq!(status, 201, "{job}");
    let Some(browser) = logged_in(
        "chat_streams_the_answer_and_cron_jobs_are_run_and_disabled_from_the_page",
        &child,
        "chat",
    )
    .await
    else {
        return child.stop().await;
    };
    until(&browser, "document.getElementById('chat-text')").await;
    let text = browser.find("#chat-text").await.unwrap();
    browser.type_into(&text, "hi").await.unwrap();
    click(&browser, "#chat-send").await;
    until(
        &browser,
        "document.querySelector('#chat-log li.assistant .text') && document.querySelector('#chat-log li.assistant .text').textContent === 'Hello from coder.'",
    )
    .await;
    let sessions = get_json(&child, "/v1/sessions").await;
    assert!(
        sessions.to_string().contains(":dashboard"),
        "the named session: {sessions}"
    );

    browser
        .goto(&format!("{}/ui/#/cron", child.url))
        .await
        .unwrap();
    let words = until(
        &browser,
        "document.querySelector('.cron-job') && document.querySelector('.cron-job').textContent",
    )
    .await;
    assert!(
        words
            .as_str()
            .unwrap()
            .contains("every day at 09:00 · 0 9 * * * (Europe/Paris)"),
        "{words}"
    );
    click(&browser, ".cron-job button.run").await;
    crate::support::eventually("the job ran its turn", async || {
        server
            .requests()
            .iter()
            .any(|r| last_user(r).contains("report"))
    })
    .await;
    until(
        &browser,
        "document.querySelector('.cron-job button.disable')",
    )
    .await;
    click(&browser, ".cron-job button.disable").await;
    until(&browser, "document.querySelector('.cron-job .s-disabled')").await;
    let listed = get_json(&child, "/v1/cron").await;
    assert_eq!(listed["jobs"][0]["job"]["enabled"], false, "{listed}");
    browser.quit().await;
    child.stop().await;
}

#[actix_rt::test]
async fn the_flows_page_shows_a_run_of_the_shipped_flow_and_the_nodes_page_this_node() {
    let project = Project::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_tree(&root.join("agents.d"), &project.agents_dir());
    copy_tree(&root.join("flows.d"), &project.path().join("flows.d"));
    std::fs::copy(root.join("clawbus.toml"), project.config_path()).unwrap();
    let child = up(&project).await;
    let (status, run) = crate::support::post_json(
        &child,
        "/v1/flows/brief/runs",
        json!({ "inputs": { "topic": "tides" }, "wait": true }),
    )
    .await;
    assert!(status == 200 || status == 202, "{status} {run}");
    let id = run["id"].as_str().unwrap().to_string();
    let Some(browser) = logged_in(
        "the_flows_page_shows_a_run_of_the_shipped_flow_and_the_nodes_page_this_node",
        &child,
        &format!("flow/{id}"),
    )
    .await
    else {
        return child.stop().await;
    };
    until(
        &browser,
        "document.body.innerText.includes('brief') && document.querySelectorAll('tbody tr').length >= 4",
    )
    .await;
    let text = browser
        .execute("return document.body.innerText", Vec::new())
        .await
        .unwrap();
    let text = text.as_str().unwrap_or_default();
    for node in ["history", "science", "writer", "researcher"] {
        assert!(
            text.contains(node),
            "{node} missing from the run page:\n{text}"
        );
    }
    browser
        .goto(&format!("{}/ui/#/nodes", child.url))
        .await
        .unwrap();
    until(
        &browser,
        "document.querySelectorAll('#nodes tbody tr').length === 1",
    )
    .await;
    let row = browser
        .execute(
            "const r = document.querySelector('#nodes tbody tr'); return [r.cells[1].innerText, r.querySelectorAll('[data-lane]').length > 0, r.cells[3].innerText]",
            Vec::new(),
        )
        .await
        .unwrap();
    for agent in ["assistant", "researcher", "writer"] {
        assert!(row[0].as_str().unwrap().contains(agent), "{row}");
    }
    assert_eq!(row[1], json!(true), "its lanes are listed: {row}");
    assert_eq!(row[2], json!("embedded"), "{row}");
    screenshot(&browser, "nodes").await;
    browser.quit().await;
    child.stop().await;
}
