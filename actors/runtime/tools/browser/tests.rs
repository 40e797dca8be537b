//! The `browser` tool against a real headless Chromium and fixture pages on loopback (allowed
//! through `[browser] test_allow_origins`, by origin: another port of 127.0.0.1 stays refused).
//! Skipped with a printed reason when no Chromium is found, failed instead under `CI=true`.

mod actions;
mod rebinding;

use super::{BrowserTool, Browsers};
use crate::tools::{Tool, ToolContext, ToolOutput};
use clawbus_core::config::BrowserDef;
use clawbus_core::ids::{AgentId, Channel, SessionKey};
use clawbus_testkit::{FixtureSite, Tripwire, chromium_or_skip, processes_naming};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A safety net on every wait: a regression fails instead of hanging.
const NET: Duration = Duration::from_secs(60);

struct Rig {
    tool: BrowserTool,
    pool: Browsers,
    state: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

fn def(exe: PathBuf, site: &FixtureSite) -> BrowserDef {
    BrowserDef {
        executable: Some(exe),
        test_allow_origins: vec![site.origin()],
        load_timeout: Duration::from_secs(10),
        ..BrowserDef::default()
    }
}

fn rig(def: BrowserDef) -> Rig {
    rig_net(def, super::chromium::Net::default())
}

/// A rig whose browsers resolve names and start as `net` says.
fn rig_net(def: BrowserDef, net: super::chromium::Net) -> Rig {
    let state = tempfile::tempdir().unwrap();
    let pool = Browsers::with_net(def.clone(), state.path(), net);
    Rig {
        tool: BrowserTool::new(&def, Some(pool.clone())),
        pool,
        state,
        workspace: tempfile::tempdir().unwrap(),
    }
}

fn ctx(workspace: &Path, agent: &str) -> ToolContext {
    ToolContext {
        workspace: workspace.canonicalize().unwrap(),
        agent: AgentId::parse(agent).unwrap(),
        session: SessionKey::main(&AgentId::parse(agent).unwrap()),
        channel: Channel::Api,
        run: None,
    }
}

impl Rig {
    async fn call_as(&self, agent: &str, args: Value) -> ToolOutput {
        tokio::time::timeout(
            NET,
            self.tool.call(&ctx(self.workspace.path(), agent), args),
        )
        .await
        .expect("the call finishes")
    }

    async fn call(&self, args: Value) -> ToolOutput {
        self.call_as("a", args).await
    }

    async fn ok(&self, args: Value) -> String {
        let out = self.call(args.clone()).await;
        assert!(!out.is_error, "{args} must succeed: {}", out.text);
        out.text
    }
}

fn kind(out: &ToolOutput) -> String {
    assert!(out.is_error, "an error was expected: {}", out.text);
    let v: Value = serde_json::from_str(&out.text).unwrap();
    v["error"]["type"].as_str().unwrap().to_string()
}

/// The ref of the first line holding `needle`.
pub(crate) fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle) && l.contains("[ref="))
        .unwrap_or_else(|| panic!("no ref for {needle:?} in:\n{snapshot}"));
    let at = line.find("[ref=").unwrap() + 5;
    line[at..].split(']').next().unwrap().to_string()
}

#[tokio::test]
async fn a_script_rendered_page_is_empty_to_web_fetch_and_readable_to_the_browser() {
    let Some(exe) = chromium_or_skip(
        "a_script_rendered_page_is_empty_to_web_fetch_and_readable_to_the_browser",
    ) else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    let fetch = crate::tools::WebFetchTool::new(&clawbus_core::config::WebDef {
        allow_private_hosts: vec!["127.0.0.1".into()],
        ..Default::default()
    });
    let fetched = fetch
        .call(
            &ctx(r.workspace.path(), "a"),
            json!({ "url": site.url("/js") }),
        )
        .await;
    assert!(
        !fetched.text.contains("Rendered by script"),
        "web_fetch runs no script: {}",
        fetched.text
    );
    let opened = r
        .ok(json!({ "action": "open", "url": site.url("/js") }))
        .await;
    assert!(
        opened.starts_with("tab t1: loaded\n<<<EXTERNAL_UNTRUSTED_CONTENT"),
        "wrapped as untrusted: {opened}"
    );
    // The script writes its text after a timer: wait for it in the page, then read it.
    r.ok(json!({ "action": "wait", "for": "text", "value": "Rendered by script" }))
        .await;
    let snap = r.ok(json!({ "action": "snapshot", "tab": "t1" })).await;
    assert!(
        snap.contains("heading \"Rendered by script 4711\""),
        "{snap}"
    );
    assert!(snap.contains("button \"Press me\" [ref=e"), "{snap}");
    let text = r.ok(json!({ "action": "text" })).await;
    assert!(text.contains("Rendered by script 4711"), "{text}");
    r.pool.stop_all().await;
}

#[tokio::test]
async fn a_form_is_filled_by_ref_and_a_stale_ref_is_refused_with_a_clear_error() {
    let Some(exe) =
        chromium_or_skip("a_form_is_filled_by_ref_and_a_stale_ref_is_refused_with_a_clear_error")
    else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    let snap = r
        .ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    let field = ref_of(&snap, "textbox \"Query\"");
    let after = r.ok(json!({ "action": "act", "ref": field, "kind": "type", "text": "hello <b>", "submit": true })).await;
    assert!(
        after.contains("You sent: hello <b>"),
        "act answers the next page's snapshot: {after}"
    );
    let stale = r
        .call(json!({ "action": "act", "ref": field, "kind": "click" }))
        .await;
    assert_eq!(kind(&stale), "stale_ref", "{}", stale.text);
    assert!(
        stale.text.contains("snapshot"),
        "the error says to snapshot again: {}",
        stale.text
    );
    let unknown = r
        .call(json!({ "action": "act", "ref": "e999", "kind": "click" }))
        .await;
    assert_eq!(kind(&unknown), "stale_ref");
    r.pool.stop_all().await;
}

#[tokio::test]
async fn a_page_that_never_loads_times_out_cleanly() {
    let Some(exe) = chromium_or_skip("a_page_that_never_loads_times_out_cleanly") else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(BrowserDef {
        load_timeout: Duration::from_secs(2),
        ..def(exe, &site)
    });
    let out = r
        .call(json!({ "action": "open", "url": site.url("/hang") }))
        .await;
    assert_eq!(kind(&out), "timed_out", "{}", out.text);
    // The browser still answers.
    let snap = r
        .ok(json!({ "action": "navigate", "tab": "t1", "url": site.url("/form") }))
        .await;
    assert!(snap.contains("Say something"), "{snap}");
    r.pool.stop_all().await;
}

#[tokio::test]
async fn a_hostile_page_cannot_reach_loopback_private_or_metadata_addresses() {
    let Some(exe) =
        chromium_or_skip("a_hostile_page_cannot_reach_loopback_private_or_metadata_addresses")
    else {
        return;
    };
    let site = FixtureSite::start().await;
    let trip = Tripwire::start().await;
    let r = rig(def(exe, &site));
    let to = trip.addr.to_string();
    r.ok(json!({ "action": "open", "url": site.url(&format!("/hostile?to={to}")) }))
        .await;
    // The page's fetch() calls run after load: wait until each has been refused.
    for needle in [
        format!("{to}/from-fetch"),
        "10.0.0.1".into(),
        "169.254.169.254".into(),
        format!("{to}/from-iframe"),
    ] {
        let until = async {
            loop {
                let reqs = r
                    .ok(json!({ "action": "requests", "filter": needle }))
                    .await;
                if reqs.contains("refused (") {
                    return reqs;
                }
                r.ok(json!({ "action": "wait", "for": "load" })).await;
                tokio::task::yield_now().await;
            }
        };
        let reqs = tokio::time::timeout(NET, until)
            .await
            .expect("the request is refused");
        assert!(reqs.contains("refused (host"), "{reqs}");
    }
    // A redirect to the other port, and a direct navigation to each address.
    let redirected = r.call(json!({ "action": "navigate", "url": site.url(&format!("/redirect?to=http://{to}/from-redirect")) })).await;
    assert_eq!(kind(&redirected), "network", "{}", redirected.text);
    assert!(
        redirected
            .text
            .contains("the address guard refused http://"),
        "{}",
        redirected.text
    );
    assert!(redirected.text.contains("loopback"), "{}", redirected.text);
    for url in [
        format!("http://{to}/direct"),
        "http://10.0.0.1/".into(),
        "http://169.254.169.254/latest/".into(),
        "file:///etc/passwd".into(),
    ] {
        let out = r.call(json!({ "action": "navigate", "url": url })).await;
        assert_eq!(kind(&out), "url_refused", "{url}: {}", out.text);
    }
    assert_eq!(
        trip.seen(),
        Vec::<String>::new(),
        "nothing reached the other port"
    );
    r.pool.stop_all().await;
}

#[tokio::test]
async fn a_screenshot_is_a_png_in_the_workspace_and_a_download_over_the_cap_is_refused() {
    let Some(exe) = chromium_or_skip(
        "a_screenshot_is_a_png_in_the_workspace_and_a_download_over_the_cap_is_refused",
    ) else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(BrowserDef {
        max_download_bytes: 50_000,
        ..def(exe, &site)
    });
    r.ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    let out = r.call(json!({ "action": "screenshot" })).await;
    assert!(!out.is_error, "{}", out.text);
    let shot = out.text.clone();
    let rel = shot
        .strip_prefix("saved ")
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let png = std::fs::read(r.workspace.path().join(rel)).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG: {shot}");
    assert!(png.len() > 1000, "{shot}");
    // The same PNG goes as an image part to models that accept images.
    assert_eq!(out.images, [crate::model::ImagePart::png(&png)], "{shot}");

    // Under the cap: saved into the workspace; over it: cancelled and nothing kept.
    let downloads = r.workspace.path().join("downloads");
    let mut settled = {
        let b = r.pool.running(&AgentId::parse("a").unwrap()).await.unwrap();
        super::chromium::lock(&b.state).settled.subscribe()
    };
    for (n, (bytes, kept)) in [(20_000, true), (5_000_000, false)].into_iter().enumerate() {
        let n = n as u64 + 1;
        let _nav = r.call(json!({ "action": "navigate", "url": site.url(&format!("/download?bytes={bytes}")) })).await;
        tokio::time::timeout(NET, settled.wait_for(|s| *s >= n))
            .await
            .expect("the download settles")
            .unwrap();
        let b = r.pool.running(&AgentId::parse("a").unwrap()).await.unwrap();
        let all = super::chromium::lock(&b.state).downloads.clone();
        assert_eq!(all.len() as u64, n, "one download a navigation: {all:?}");
        let files: Vec<u64> = std::fs::read_dir(&downloads)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .collect()
            })
            .unwrap_or_default();
        if kept {
            assert!(
                files.contains(&20_000),
                "the small download is kept: {files:?}"
            );
        } else {
            assert!(
                files.iter().all(|n| *n <= 50_000),
                "nothing over the cap stays: {files:?}"
            );
            let reqs = r.ok(json!({ "action": "requests" })).await;
            assert!(
                reqs.contains("download refused (over max_download_bytes)"),
                "{reqs}"
            );
        }
    }
    r.pool.stop_all().await;
}

#[tokio::test]
async fn two_agents_cookies_stay_apart() {
    let Some(exe) = chromium_or_skip("two_agents_cookies_stay_apart") else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    r.call_as(
        "a",
        json!({ "action": "open", "url": site.url("/set-cookie?v=alpha") }),
    )
    .await;
    let a = r
        .call_as(
            "a",
            json!({ "action": "navigate", "url": site.url("/cookie") }),
        )
        .await;
    let b = r
        .call_as("b", json!({ "action": "open", "url": site.url("/cookie") }))
        .await;
    assert!(a.text.contains("cookie=[who=alpha]"), "{}", a.text);
    assert!(
        b.text.contains("cookie=[]"),
        "agent b sees no cookie of a: {}",
        b.text
    );
    assert_eq!(site.cookies_seen(), ["who=alpha", ""]);
    let (pa, pb) = (
        r.pool.pid(&AgentId::parse("a").unwrap()).await,
        r.pool.pid(&AgentId::parse("b").unwrap()).await,
    );
    assert_ne!(pa, pb, "one browser per agent");
    assert!(
        r.state.path().join("browser/a/profile").is_dir()
            && r.state.path().join("browser/b/profile").is_dir()
    );
    r.pool.stop_all().await;
}

#[tokio::test]
async fn the_browser_is_gone_after_the_idle_timeout_with_no_orphan_process() {
    let Some(exe) =
        chromium_or_skip("the_browser_is_gone_after_the_idle_timeout_with_no_orphan_process")
    else {
        return;
    };
    let site = FixtureSite::start().await;
    // An hour: only the tokio clock, moved by the test, can make it pass.
    let idle = Duration::from_secs(3600);
    let r = rig(BrowserDef {
        idle_timeout: idle,
        ..def(exe, &site)
    });
    r.ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    let agent = AgentId::parse("a").unwrap();
    let status = r.ok(json!({ "action": "status" })).await;
    assert!(status.starts_with("running: pid"), "{status}");
    let profile = r.state.path().join("browser/a/profile");
    assert!(!processes_naming(&profile).is_empty(), "the browser runs");
    let mut stopped = r.pool.stopped(&agent).await.expect("a browser runs");
    // Just short of the timeout (counted from the end of the last call): still running.
    tokio::time::pause();
    tokio::time::advance(idle - Duration::from_secs(5)).await;
    tokio::time::resume();
    assert!(!*stopped.borrow_and_update(), "not idle long enough yet");
    assert!(r.pool.pid(&agent).await.is_some());
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(6)).await;
    tokio::time::resume();
    tokio::time::timeout(NET, stopped.wait_for(|s| *s))
        .await
        .expect("stopped when idle")
        .unwrap();
    assert_eq!(
        processes_naming(&profile),
        Vec::<u32>::new(),
        "no Chromium process is left"
    );
    assert!(!r.state.path().join("browser/a/status.json").exists());
    let again = r.ok(json!({ "action": "status" })).await;
    assert!(again.starts_with("not running"), "{again}");
}

#[tokio::test]
async fn without_chromium_the_tool_is_not_offered_and_says_why() {
    let tool = BrowserTool::new(
        &BrowserDef {
            executable: Some("/nonexistent/chromium".into()),
            ..Default::default()
        },
        Some(Browsers::new(BrowserDef::default(), Path::new("/tmp"))),
    );
    let why = tool.available().unwrap_err();
    assert!(
        why.contains("no Chromium at /nonexistent/chromium"),
        "{why}"
    );
}

/// Figures, not assertions: `cargo test -p clawbus-runtime --lib browser_figures -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a figure: run by hand"]
#[allow(clippy::disallowed_methods, reason = "a figure measures wall time")]
async fn browser_figures() {
    let Some(exe) = chromium_or_skip("browser_figures") else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1000.0;
    let t = std::time::Instant::now();
    r.ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    println!(
        "figure: cold start to first snapshot (open /form): {:.0} ms",
        ms(t)
    );
    let t = std::time::Instant::now();
    r.ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    println!("figure: warm, new tab to first snapshot: {:.0} ms", ms(t));
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (mut nav, mut snap, mut click) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        let t = std::time::Instant::now();
        let s = r
            .ok(json!({ "action": "navigate", "url": site.url("/form") }))
            .await;
        nav.push(ms(t));
        let t = std::time::Instant::now();
        r.ok(json!({ "action": "snapshot" })).await;
        snap.push(ms(t));
        let link = ref_of(&s, "link \"elsewhere\"");
        let t = std::time::Instant::now();
        r.ok(json!({ "action": "act", "ref": link, "kind": "click" }))
            .await;
        click.push(ms(t));
    }
    println!(
        "figure: median of 15 (ms): navigate {:.1}, snapshot {:.1}, click (navigating) {:.1}",
        median(nav),
        median(snap),
        median(click)
    );
    for _ in 0..3 {
        r.ok(json!({ "action": "open", "url": site.url("/js") }))
            .await;
    }
    let pid = r.pool.pid(&AgentId::parse("a").unwrap()).await.unwrap();
    println!(
        "figure: RSS of one browser with 5 tabs (all its processes): {} MiB",
        super::group_rss(pid) / (1 << 20)
    );
    r.pool.stop_all().await;
}
