//! The actions the first tests leave out: the tab limit, `select`, `hover`, `press`, `scroll`,
//! `status`, and popups becoming tabs within the limit.

use super::{NET, def, kind, ref_of, rig};
use clawbus_core::config::BrowserDef;
use clawbus_core::ids::AgentId;
use clawbus_testkit::{FixtureSite, chromium_or_skip};
use serde_json::{Value, json};

#[tokio::test]
async fn the_open_past_max_tabs_is_a_clear_error_until_a_tab_is_closed() {
    let Some(exe) =
        chromium_or_skip("the_open_past_max_tabs_is_a_clear_error_until_a_tab_is_closed")
    else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(BrowserDef {
        max_tabs: 2,
        ..def(exe, &site)
    });
    for _ in 0..2 {
        r.ok(json!({ "action": "open", "url": site.url("/form") }))
            .await;
    }
    let third = r
        .call(json!({ "action": "open", "url": site.url("/js") }))
        .await;
    assert_eq!(kind(&third), "limit_exceeded", "{}", third.text);
    assert!(
        third
            .text
            .contains("2 tabs are open, the most allowed; close one first"),
        "{}",
        third.text
    );
    r.ok(json!({ "action": "close", "tab": "t1" })).await;
    let opened = r
        .ok(json!({ "action": "open", "url": site.url("/js") }))
        .await;
    assert!(opened.starts_with("tab t3: loaded"), "{opened}");
    let tabs = r.ok(json!({ "action": "tabs" })).await;
    assert!(
        !tabs.contains("t1:") && tabs.contains("t2:") && tabs.contains("t3:"),
        "{tabs}"
    );
    r.pool.stop_all().await;
}

#[tokio::test]
async fn select_hover_press_and_scroll_act_on_refs() {
    let Some(exe) = chromium_or_skip("select_hover_press_and_scroll_act_on_refs") else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    let snap = r
        .ok(json!({ "action": "open", "url": site.url("/actions") }))
        .await;
    // Each action's effect is written into the page by its own event handler; wait for it in
    // the page (no sleeps), then read it.
    let cases = [
        (
            ref_of(&snap, "Colour"),
            "select",
            Some("Green"),
            "chose green",
        ),
        (ref_of(&snap, "Hover me"), "hover", None, "hovered"),
        (ref_of(&snap, "Keys"), "press", Some("k"), "key k"),
        (ref_of(&snap, "Far below"), "scroll", None, "scrolled far"),
    ];
    for (target, act, text, effect) in cases {
        let mut args = json!({ "action": "act", "ref": target, "kind": act });
        if let Some(t) = text {
            args["text"] = Value::from(t);
        }
        let after = r.ok(args).await;
        assert!(
            after.starts_with(&format!("tab t1: {act} on {target} done")),
            "{after}"
        );
        r.ok(json!({ "action": "wait", "for": "text", "value": effect }))
            .await;
        let shown = r.ok(json!({ "action": "text", "selector": "#out" })).await;
        assert!(shown.contains(effect), "{act}: {shown}");
    }
    // A select refuses an option it does not have, naming it.
    let colour = ref_of(&snap, "Colour");
    let none = r
        .call(json!({ "action": "act", "ref": colour, "kind": "select", "text": "Blue" }))
        .await;
    assert_eq!(kind(&none), "invalid_arguments", "{}", none.text);
    assert!(
        none.text.contains("no option \\\"Blue\\\""),
        "{}",
        none.text
    );
    r.pool.stop_all().await;
}

#[tokio::test]
async fn status_reports_the_running_browser_its_tabs_and_memory() {
    let Some(exe) = chromium_or_skip("status_reports_the_running_browser_its_tabs_and_memory")
    else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(def(exe, &site));
    let before = r.ok(json!({ "action": "status" })).await;
    assert!(before.starts_with("not running"), "{before}");
    r.ok(json!({ "action": "open", "url": site.url("/form") }))
        .await;
    r.ok(json!({ "action": "open", "url": site.url("/actions") }))
        .await;
    let status = r.ok(json!({ "action": "status" })).await;
    let pid = r.pool.pid(&AgentId::parse("a").unwrap()).await.unwrap();
    assert!(
        status.starts_with(&format!("running: pid {pid}, 2 tab(s), ")),
        "{status}"
    );
    let mib: u64 = status
        .rsplit_once(", ")
        .and_then(|(_, m)| m.strip_suffix(" MiB resident"))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("memory in {status}"));
    assert!(mib > 0, "{status}");
    // What `clawbus browser status` reads: pid, tabs with titles and URLs, memory.
    let file = r.state.path().join("browser/a/status.json");
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["pid"], pid, "{written}");
    assert!(written["rss_bytes"].as_u64().unwrap() > 0, "{written}");
    let tabs: Vec<(String, String)> = written["tabs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().into(),
                t["title"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        tabs,
        [
            ("t1".into(), "Form".into()),
            ("t2".into(), "Actions".into())
        ],
        "{written}"
    );
    assert_eq!(written["tabs"][1]["url"], site.url("/actions"));
    r.pool.stop_all().await;
}

/// The tab ids `tabs` lists.
fn ids(tabs: &str) -> Vec<&str> {
    tabs.lines()
        .filter_map(|l| l.split_once(": ").map(|(id, _)| id))
        .filter(|id| {
            id.len() > 1 && id.starts_with('t') && id[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .collect()
}

/// Calls `tabs` until `done` holds of its answer (each call waits on the browser).
async fn tabs_until(r: &super::Rig, done: impl Fn(&str) -> bool) -> String {
    let until = async {
        loop {
            let tabs = r.ok(json!({ "action": "tabs" })).await;
            if done(&tabs) {
                return tabs;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(NET, until)
        .await
        .expect("the tabs reach the expected state")
}

#[tokio::test]
async fn popups_become_tabs_within_max_tabs() {
    let Some(exe) = chromium_or_skip("popups_become_tabs_within_max_tabs") else {
        return;
    };
    let site = FixtureSite::start().await;
    let r = rig(BrowserDef {
        max_tabs: 2,
        ..def(exe, &site)
    });
    let snap = r
        .ok(json!({ "action": "open", "url": site.url("/popup") }))
        .await;
    let pop = ref_of(&snap, "button \"Pop\"");
    r.ok(json!({ "action": "act", "tab": "t1", "ref": pop, "kind": "click" }))
        .await;
    let tabs = tabs_until(&r, |t| t.contains("t2:")).await;
    assert!(
        tabs.contains(&site.url("/js")),
        "window.open is tab t2: {tabs}"
    );
    // The popup is a tab like any other.
    r.ok(json!({ "action": "wait", "tab": "t2", "for": "text", "value": "Rendered by script" }))
        .await;
    // A third would pass max_tabs: it is closed, and the opener's errors say why.
    let link = ref_of(&snap, "link \"New tab\"");
    r.ok(json!({ "action": "act", "tab": "t1", "ref": link, "kind": "click" }))
        .await;
    let until = async {
        loop {
            let errors = r.ok(json!({ "action": "errors", "tab": "t1" })).await;
            if errors.contains("a popup was closed") {
                return errors;
            }
            tokio::task::yield_now().await;
        }
    };
    let errors = tokio::time::timeout(NET, until)
        .await
        .expect("the refused popup is reported");
    assert!(errors.contains("(max_tabs)"), "{errors}");
    let tabs = r.ok(json!({ "action": "tabs" })).await;
    assert_eq!(ids(&tabs), ["t1", "t2"], "still two tabs: {tabs}");
    // Closing the popup makes room: the link opens a tab now.
    r.ok(json!({ "action": "close", "tab": "t2" })).await;
    r.ok(json!({ "action": "act", "tab": "t1", "ref": link, "kind": "click" }))
        .await;
    let tabs = tabs_until(&r, |t| t.contains(&site.url("/form"))).await;
    assert_eq!(ids(&tabs), ["t1", "t3"], "{tabs}");
    r.pool.stop_all().await;
}
