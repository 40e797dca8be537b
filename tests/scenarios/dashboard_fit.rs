//! The dashboard in a headless Chromium emulating a phone (390 px wide): light and dark follow the system setting
//! (emulated through DevTools' `Emulation.setEmulatedMedia`), the views are reached with Tab and
//! opened with Enter, and no view scrolls sideways at 390 px, a task page with a long tool-call
//! argument included (shown cut). Without a browser the test says it was skipped; with
//! `CI=true` it fails.

use super::dashboard::{coder, log_in, until, up};
use crate::support::post_task;
use clawbus::testkit::{Browser, ScriptedServer, Turn};
use serde_json::json;

/// The page's background colour once the system asks for `scheme`.
async fn background_in(browser: &Browser, scheme: &str) -> String {
    browser
        .cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        )
        .await
        .unwrap();
    until(
        browser,
        &format!("matchMedia('(prefers-color-scheme: {scheme})').matches"),
    )
    .await;
    let bg = browser
        .execute(
            "return getComputedStyle(document.body).backgroundColor",
            Vec::new(),
        )
        .await
        .unwrap();
    bg.as_str().unwrap_or_default().to_string()
}

/// A condition that holds (with `ready`'s value) once the page is no wider than the window and
/// `ready` holds.
fn fits(ready: &str) -> String {
    format!("document.documentElement.scrollWidth <= innerWidth && ({ready})")
}

#[actix_rt::test]
async fn the_dashboard_follows_the_system_colours_is_keyboard_reachable_and_fits_a_phone() {
    let test = "the_dashboard_follows_the_system_colours_is_keyboard_reachable_and_fits_a_phone";
    // One unbroken word of 600 characters: the widest thing a phone can be sent.
    let long = "x".repeat(600);
    let server = ScriptedServer::start(vec![
        Turn::tool_call("exec", json!({ "command": format!("echo {long}") })),
        Turn::text("done"),
    ])
    .await;
    let project = coder(&server, "[exec]\nallow = [\"date\"]\n");
    let child = up(&project).await;
    let (status, done) =
        post_task(&child, "coder", json!({ "text": "say it", "wait": true })).await;
    assert_eq!(status, 200, "{done}");
    let id = done["task_id"].as_str().unwrap().to_string();
    let Some(browser) = Browser::start_or_skip(test).await else {
        return child.stop().await;
    };
    // A phone's screen (a headless window is at least 500 px wide: the device is emulated).
    browser
        .cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": true }),
        )
        .await
        .unwrap();
    log_in(&browser, &child).await;
    until(&browser, "document.querySelector('tr[data-agent=coder]')").await;

    // The system's setting decides, both ways.
    assert_eq!(background_in(&browser, "dark").await, "rgb(17, 19, 22)");
    assert_eq!(background_in(&browser, "light").await, "rgb(247, 247, 248)");

    // The keyboard: from a fresh load, Tab walks into the nav links in order, Enter opens one.
    browser
        .execute("location.reload()", Vec::new())
        .await
        .unwrap();
    until(
        &browser,
        "!document.getElementById('top').hidden && document.querySelector('tr[data-agent=coder]') && document.activeElement === document.body",
    )
    .await;
    let mut reached = Vec::new();
    for _ in 0..12 {
        browser.press("\u{e004}").await.unwrap();
        let href = browser
            .execute(
                "const a = document.activeElement; return a && a.closest('#nav') ? a.getAttribute('href') : null",
                Vec::new(),
            )
            .await
            .unwrap();
        if let Some(h) = href.as_str() {
            reached.push(h.to_string());
            if h == "#/cron" {
                break;
            }
        }
    }
    assert_eq!(
        reached,
        ["#/overview", "#/tasks", "#/sessions", "#/cron"],
        "Tab reaches the nav links in order"
    );
    browser.press("\u{e007}").await.unwrap();
    until(
        &browser,
        "location.hash === '#/cron' && document.querySelector('#view h1') && document.querySelector('#view h1').textContent === 'Cron'",
    )
    .await;

    // A phone's width: every view fits, the task page with the long argument shown cut.
    let width = browser
        .execute("return innerWidth", Vec::new())
        .await
        .unwrap();
    assert_eq!(width, 390, "a phone's width");
    for (hash, ready) in [
        (
            "overview",
            "document.querySelector('.lane[data-lane=main]')",
        ),
        ("tasks", "document.querySelector('#task-rows tr')"),
        ("sessions", "document.querySelector('tr[data-session]')"),
        ("approvals", "document.getElementById('approvals')"),
        ("cron", "document.getElementById('cron-jobs')"),
        ("chat", "document.getElementById('chat-text')"),
    ] {
        browser
            .goto(&format!("{}/ui/#/{hash}", child.url))
            .await
            .unwrap();
        until(&browser, &fits(ready)).await;
    }
    browser
        .goto(&format!("{}/ui/#/task/{id}", child.url))
        .await
        .unwrap();
    let args = until(
        &browser,
        &fits("document.querySelector('#task-tools pre') && document.querySelector('#task-events li[data-type=tool_start] code.args') && document.querySelector('#task-events li[data-type=tool_start] code.args').textContent"),
    )
    .await;
    let args = args.as_str().unwrap();
    assert!(
        args.starts_with(r#"{"command":"echo xxx"#) && args.contains("… (") && args.len() < 300,
        "the arguments, cut: {args}"
    );
    browser.quit().await;
    child.stop().await;
}
