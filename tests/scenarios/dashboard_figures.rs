//! The dashboard's figures, measured in a real headless Chromium against a `clawbus up` child:
//! page weight, first paint, first live event, and the gateway's RSS and CPU while the dashboard
//! shows a task streaming over a thousand events. Measured, never asserted (wall clock); run with
//! `cargo test --test main scenarios::dashboard_figures -- --ignored --nocapture`.

use super::dashboard::{coder, event_rows, until, up};
use crate::support::{last_user, post_task};
use clawbus::testkit::{Browser, Gate, ScriptedServer, Turn};
use serde_json::json;

/// `utime + stime` of process `pid`, in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A field of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The figures: page weight, first paint, first live event, and the gateway's RSS and CPU while
/// the dashboard shows a task streaming 1,000 events. Measured, not asserted (wall clock):
/// `cargo test --test main scenarios::dashboard_figures -- --ignored --nocapture`.
#[actix_rt::test]
#[ignore = "a figure: run it on its own with --ignored --nocapture"]
#[allow(clippy::disallowed_methods, reason = "a figure measures wall time")]
async fn dashboard_figures() {
    let gate = Gate::new();
    // Deltas queued faster than they are published are merged: far more chunks than events.
    let chunks: Vec<String> = (0..6_000).map(|i| format!("{i} ")).collect();
    let many = Turn::Text { chunks };
    let held = gate.clone();
    let server = ScriptedServer::with_responder(move |req| match last_user(req).as_str() {
        "stream" => Turn::gated(&held, many.clone()),
        _ => Turn::text("ok"),
    })
    .await;
    let project = coder(&server, "");
    let child = up(&project).await;
    let pid = child.child.id();
    let Some(browser) = Browser::start_or_skip("dashboard_figures").await else {
        return child.stop().await;
    };
    // Cold load of the login page: its weight and first paint.
    browser.goto(&format!("{}/ui/", child.url)).await.unwrap();
    until(&browser, "!document.getElementById('login').hidden").await;
    let input = browser.find("#token").await.unwrap();
    browser.type_into(&input, &child.token).await.unwrap();
    browser
        .click(&browser.find("#login button[type=submit]").await.unwrap())
        .await
        .unwrap();
    until(&browser, "document.querySelector('tr[data-agent=coder]')").await;
    let load = until(
        &browser,
        "(() => { const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'); \
           const files = performance.getEntriesByType('resource').filter(r => r.name.includes('/ui/')); \
           const nav = performance.getEntriesByType('navigation')[0]; \
           return p && { fcp: p.startTime, body: nav.decodedBodySize + files.reduce((a, r) => a + r.decodedBodySize, 0), \
             wire: nav.transferSize + files.reduce((a, r) => a + r.transferSize, 0), files: files.length + 1 }; })()",
    )
    .await;
    // A second load, the browser warm (the files revalidated: `no-cache`).
    browser
        .goto(&format!("{}/ui/#/overview", child.url))
        .await
        .unwrap();
    browser
        .execute("location.reload()", Vec::new())
        .await
        .unwrap();
    let warm = until(
        &browser,
        "(() => { const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'); \
           return p && document.querySelector('tr[data-agent=coder]') && p.startTime; })()",
    )
    .await;
    // The first live event: from posting (in the page) to the task's row in the live list.
    browser
        .goto(&format!("{}/ui/#/tasks", child.url))
        .await
        .unwrap();
    until(&browser, "document.getElementById('task-rows') && document.getElementById('live').dataset.state === 'live'").await;
    let first_event = browser
        .execute_async(
            "const done = arguments[arguments.length - 1]; const t0 = performance.now(); \
             fetch('/v1/agents/coder/tasks', { method: 'POST', headers: { Authorization: 'Bearer ' + sessionStorage.getItem('clawbus.token'), 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'hello' }) }) \
               .then(r => r.json()).then(t => { const seen = () => document.querySelector(`#task-rows tr[data-task=\"${t.task_id}\"]`); \
                 if (seen()) return done(performance.now() - t0); \
                 new MutationObserver((_, o) => { if (seen()) { o.disconnect(); done(performance.now() - t0); } }).observe(document.body, { subtree: true, childList: true }); });",
            Vec::new(),
        )
        .await
        .unwrap();
    // 1,000 events streaming into an open task page.
    let (_, posted) = post_task(&child, "coder", json!({ "text": "stream" })).await;
    let id = posted["task_id"].as_str().unwrap().to_string();
    browser
        .goto(&format!("{}/ui/#/task/{id}", child.url))
        .await
        .unwrap();
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=model_call]')",
    )
    .await;
    let (rss_before, ticks_before) = (status_kib(pid, "VmRSS"), cpu_ticks(pid));
    let started = std::time::Instant::now();
    gate.open();
    until(
        &browser,
        "document.querySelector('#task-events li[data-type=terminal]')",
    )
    .await;
    let took = started.elapsed();
    let (rss_after, hwm, ticks_after) = (
        status_kib(pid, "VmRSS"),
        status_kib(pid, "VmHWM"),
        cpu_ticks(pid),
    );
    let rows = event_rows(&browser).await.len();
    // USER_HZ: 100 on Linux.
    let hz = 100.0;
    let cpu_s = (ticks_after - ticks_before) as f64 / hz;
    println!(
        "figure: page weight {} bytes decoded ({} on the wire, {} files); first contentful paint {:.0} ms cold, {:.0} ms warm; \
         first live event {:.0} ms after the post; {rows} events shown in {:.0} ms; gateway RSS {rss_before} KiB → \
         {rss_after} KiB (peak {hwm} KiB), CPU {cpu_s:.2} s ({:.0} % of one core)",
        load["body"],
        load["wire"],
        load["files"],
        load["fcp"].as_f64().unwrap_or_default(),
        warm.as_f64().unwrap_or_default(),
        first_event.as_f64().unwrap_or_default(),
        took.as_secs_f64() * 1000.0,
        100.0 * cpu_s / took.as_secs_f64().max(0.001)
    );
    browser.quit().await;
    child.stop().await;
}
