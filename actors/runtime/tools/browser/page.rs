//! What the tool does inside one tab: snapshot, act on a ref, read text, screenshot, wait.

use super::cdp::CdpError;
use super::chromium::{Browser, BrowserError, evaluate, lock};
use super::snapshot::{StaleRef, parse_ref, render};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Folder of the workspace screenshots land in.
pub(crate) const SCREENSHOTS: &str = "screenshots";

/// What a page action failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PageError {
    /// The browser failed.
    #[error(transparent)]
    Browser(#[from] BrowserError),
    /// The ref is gone.
    #[error(transparent)]
    Stale(#[from] StaleRef),
    /// The action cannot be done on that element or with those arguments.
    #[error("{0}")]
    Invalid(String),
    /// Writing a file into the workspace failed.
    #[error("saving {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<CdpError> for PageError {
    fn from(e: CdpError) -> Self {
        Self::Browser(BrowserError::Cdp(e))
    }
}

impl PageError {
    /// The `type` of the error output.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Browser(b) => b.kind(),
            Self::Stale(_) => "stale_ref",
            Self::Invalid(_) => "invalid_arguments",
            Self::Io { .. } => "io",
        }
    }
}

/// The page's URL and title.
pub(crate) async fn location(b: &Browser, tab: &str) -> Result<(String, String), PageError> {
    let (session, _) = b.tab(tab)?;
    let v = evaluate(
        &b.cdp,
        &session,
        "[location.href, document.title]",
        Duration::from_secs(10),
    )
    .await?;
    let s = |i: usize| {
        v[i].as_str()
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect::<String>()
    };
    Ok((s(0), s(1)))
}

/// The accessibility snapshot of `tab`.
pub(crate) async fn snapshot(
    b: &Browser,
    tab: &str,
    query: Option<&str>,
    max_chars: usize,
) -> Result<String, PageError> {
    let (session, _) = b.tab(tab)?;
    let r = b
        .cdp
        .call(Some(&session), "Accessibility.getFullAXTree", json!({}))
        .await?;
    let nodes = r["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut st = lock(&b.state);
    let t = st
        .tab(tab)
        .ok_or_else(|| BrowserError::NoTab(tab.to_string()))?;
    Ok(render(nodes, &mut t.refs, query, max_chars))
}

/// How to act on an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ActKind {
    Click,
    Type,
    Select,
    Press,
    Hover,
    Scroll,
}

/// The backend node `r` names in `tab`, or [`StaleRef`].
async fn node_of(b: &Browser, session: &str, tab: &str, r: &str) -> Result<i64, PageError> {
    let n = parse_ref(r).ok_or_else(|| {
        PageError::Invalid(format!(
            "{r:?} is not a ref (expected e.g. \"e12\" from a snapshot)"
        ))
    })?;
    let node = lock(&b.state).tab(tab).and_then(|t| t.refs.node(n));
    let node = node.ok_or_else(|| StaleRef(r.to_string()))?;
    // The node may have left the document since the snapshot.
    let alive = b
        .cdp
        .call(
            Some(session),
            "DOM.describeNode",
            json!({ "backendNodeId": node }),
        )
        .await;
    let connected = match alive {
        Ok(_) => {
            let resolved = b
                .cdp
                .call(
                    Some(session),
                    "DOM.resolveNode",
                    json!({ "backendNodeId": node }),
                )
                .await;
            match resolved {
                Ok(o) => {
                    let id = o["object"]["objectId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let c = b.cdp.call(Some(session), "Runtime.callFunctionOn", json!({ "objectId": id, "functionDeclaration": "function(){return this.isConnected}", "returnByValue": true })).await;
                    c.ok()
                        .and_then(|v| v["result"]["value"].as_bool())
                        .unwrap_or(false)
                }
                Err(_) => false,
            }
        }
        Err(_) => false,
    };
    if !connected {
        return Err(StaleRef(r.to_string()).into());
    }
    Ok(node)
}

async fn call_on(
    b: &Browser,
    session: &str,
    node: i64,
    function: &str,
    args: Vec<Value>,
) -> Result<Value, PageError> {
    let o = b
        .cdp
        .call(
            Some(session),
            "DOM.resolveNode",
            json!({ "backendNodeId": node }),
        )
        .await?;
    let id = o["object"]["objectId"].as_str().unwrap_or_default();
    let args: Vec<Value> = args.into_iter().map(|v| json!({ "value": v })).collect();
    let r = b.cdp.call(Some(session), "Runtime.callFunctionOn", json!({ "objectId": id, "functionDeclaration": function, "arguments": args, "returnByValue": true, "awaitPromise": true })).await?;
    Ok(r["result"]["value"].clone())
}

/// The centre of the node on screen, after scrolling it into view.
async fn centre(b: &Browser, session: &str, node: i64) -> Result<Option<(f64, f64)>, PageError> {
    let _scrolled = b
        .cdp
        .call(
            Some(session),
            "DOM.scrollIntoViewIfNeeded",
            json!({ "backendNodeId": node }),
        )
        .await;
    let q = b
        .cdp
        .call(
            Some(session),
            "DOM.getContentQuads",
            json!({ "backendNodeId": node }),
        )
        .await;
    let Ok(q) = q else { return Ok(None) };
    let Some(quad) = q["quads"][0].as_array() else {
        return Ok(None);
    };
    let p: Vec<f64> = quad.iter().filter_map(Value::as_f64).collect();
    if p.len() < 8 {
        return Ok(None);
    }
    Ok(Some((
        (p[0] + p[2] + p[4] + p[6]) / 4.0,
        (p[1] + p[3] + p[5] + p[7]) / 4.0,
    )))
}

async fn mouse(
    b: &Browser,
    session: &str,
    kind: &str,
    (x, y): (f64, f64),
) -> Result<(), PageError> {
    b.cdp
        .call(
            Some(session),
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
        )
        .await?;
    Ok(())
}

/// `(key, code, keyCode, text)` of a key name.
fn key(name: &str) -> Result<(String, String, i64, String), PageError> {
    let named =
        |k: &str, code: i64, text: &str| Ok((k.to_string(), k.to_string(), code, text.to_string()));
    match name {
        "Enter" => named("Enter", 13, "\r"),
        "Tab" => named("Tab", 9, ""),
        "Escape" => named("Escape", 27, ""),
        "Backspace" => named("Backspace", 8, ""),
        "Delete" => named("Delete", 46, ""),
        "ArrowUp" => named("ArrowUp", 38, ""),
        "ArrowDown" => named("ArrowDown", 40, ""),
        "ArrowLeft" => named("ArrowLeft", 37, ""),
        "ArrowRight" => named("ArrowRight", 39, ""),
        "PageDown" => named("PageDown", 34, ""),
        "PageUp" => named("PageUp", 33, ""),
        "Home" => named("Home", 36, ""),
        "End" => named("End", 35, ""),
        "Space" | " " => Ok((" ".into(), "Space".into(), 32, " ".into())),
        c if c.chars().count() == 1 => {
            let up = c.to_uppercase();
            let code = up.chars().next().map_or(0, |ch| ch as i64);
            Ok((c.to_string(), format!("Key{up}"), code, c.to_string()))
        }
        other => Err(PageError::Invalid(format!(
            "unknown key {other:?} (expected Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, PageUp/Down, Home, End, Space or one character)"
        ))),
    }
}

async fn press(b: &Browser, session: &str, name: &str) -> Result<(), PageError> {
    let (k, code, vk, text) = key(name)?;
    let mut down = json!({ "type": "keyDown", "key": k, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk });
    if !text.is_empty() {
        down["text"] = Value::from(text);
    }
    b.cdp
        .call(Some(session), "Input.dispatchKeyEvent", down)
        .await?;
    b.cdp
        .call(
            Some(session),
            "Input.dispatchKeyEvent",
            json!({ "type": "keyUp", "key": k, "code": code, "windowsVirtualKeyCode": vk }),
        )
        .await?;
    Ok(())
}

/// Acts on ref `r` of `tab`, then lets the page settle (and load, when the action navigated).
pub(crate) async fn act(
    b: &Browser,
    tab: &str,
    r: &str,
    kind: ActKind,
    text: Option<&str>,
    submit: bool,
) -> Result<(), PageError> {
    let (session, _) = b.tab(tab)?;
    let s = session.as_str();
    let node = node_of(b, s, tab, r).await?;
    let need_text = |what: &str| {
        text.ok_or_else(|| PageError::Invalid(format!("act kind \"{what}\" needs \"text\"")))
    };
    match kind {
        ActKind::Click | ActKind::Hover => match centre(b, s, node).await? {
            Some(at) => {
                mouse(b, s, "mouseMoved", at).await?;
                if kind == ActKind::Click {
                    mouse(b, s, "mousePressed", at).await?;
                    mouse(b, s, "mouseReleased", at).await?;
                }
            }
            None if kind == ActKind::Click => {
                call_on(b, s, node, "function(){this.click()}", vec![]).await?;
            }
            None => {
                return Err(PageError::Invalid(format!(
                    "{r} is not visible; it cannot be hovered"
                )));
            }
        },
        ActKind::Type => {
            let t = need_text("type")?;
            b.cdp
                .call(Some(s), "DOM.focus", json!({ "backendNodeId": node }))
                .await
                .map_err(|_| {
                    PageError::Invalid(format!("{r} cannot take text (it is not focusable)"))
                })?;
            call_on(b, s, node, "function(){ if ('value' in this) { this.value = ''; } else if (this.isContentEditable) { this.textContent = ''; } }", vec![]).await?;
            b.cdp
                .call(Some(s), "Input.insertText", json!({ "text": t }))
                .await?;
        }
        ActKind::Select => {
            let t = need_text("select")?;
            let f = "function(v){ if (!this.options) return 'not a select'; const o = [...this.options].find(o => o.value === v || o.textContent.trim() === v); if (!o) return 'no option ' + JSON.stringify(v); this.value = o.value; this.dispatchEvent(new Event('input', {bubbles: true})); this.dispatchEvent(new Event('change', {bubbles: true})); return ''; }";
            let why = call_on(b, s, node, f, vec![Value::from(t)]).await?;
            if let Some(why) = why.as_str().filter(|w| !w.is_empty()) {
                return Err(PageError::Invalid(format!("{r}: {why}")));
            }
        }
        ActKind::Press => {
            let t = need_text("press")?;
            let _focused = b
                .cdp
                .call(Some(s), "DOM.focus", json!({ "backendNodeId": node }))
                .await;
            press(b, s, t).await?;
        }
        ActKind::Scroll => {
            b.cdp
                .call(
                    Some(s),
                    "DOM.scrollIntoViewIfNeeded",
                    json!({ "backendNodeId": node }),
                )
                .await?;
        }
    }
    if submit {
        press(b, s, "Enter").await?;
    }
    b.settle(tab).await?;
    Ok(())
}

/// The visible text of the page or of the first element matching `selector`, at most
/// `max_chars` (cut inside the page, so no more crosses the pipe).
pub(crate) async fn text(
    b: &Browser,
    tab: &str,
    selector: Option<&str>,
    max_chars: usize,
) -> Result<String, PageError> {
    let (session, _) = b.tab(tab)?;
    let sel = serde_json::to_string(selector.unwrap_or("body")).unwrap_or_default();
    let expr = format!(
        "(() => {{ const e = document.querySelector({sel}); if (!e) return null; const t = e.innerText || e.textContent || ''; return t.length > {max_chars} ? t.slice(0, {max_chars}) + '… (cut at max_chars={max_chars})' : t; }})()"
    );
    let v = evaluate(&b.cdp, &session, &expr, Duration::from_secs(10)).await?;
    match v {
        Value::String(s) => Ok(s),
        _ => Err(PageError::Invalid(format!(
            "no element matches selector {:?}",
            selector.unwrap_or("body")
        ))),
    }
}

/// Saves a PNG of `tab` (the viewport, the whole page, or one ref) under the workspace's
/// `screenshots/`; answers its path relative to the workspace and its bytes.
pub(crate) async fn screenshot(
    b: &Browser,
    tab: &str,
    workspace: &Path,
    full_page: bool,
    r: Option<&str>,
) -> Result<(PathBuf, Vec<u8>), PageError> {
    use base64::Engine as _;
    let (session, _) = b.tab(tab)?;
    let s = session.as_str();
    let mut params = json!({ "format": "png", "captureBeyondViewport": full_page });
    if let Some(r) = r {
        let node = node_of(b, s, tab, r).await?;
        let _scrolled = b
            .cdp
            .call(
                Some(s),
                "DOM.scrollIntoViewIfNeeded",
                json!({ "backendNodeId": node }),
            )
            .await;
        let m = b
            .cdp
            .call(Some(s), "DOM.getBoxModel", json!({ "backendNodeId": node }))
            .await
            .map_err(|_| PageError::Invalid(format!("{r} has no box on screen")))?;
        let p: Vec<f64> = m["model"]["border"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .collect();
        if p.len() == 8 {
            let (x, y) = (p[0].min(p[6]), p[1].min(p[3]));
            let (w, h) = (p[2].max(p[4]) - x, p[5].max(p[7]) - y);
            params["clip"] =
                json!({ "x": x, "y": y, "width": w.max(1.0), "height": h.max(1.0), "scale": 1 });
        }
    }
    let shot = b
        .cdp
        .call_within(
            Some(s),
            "Page.captureScreenshot",
            params,
            Duration::from_secs(30),
        )
        .await?;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap_or_default())
        .map_err(|e| PageError::Invalid(format!("the browser sent an unreadable image: {e}")))?;
    let dir = workspace.join(SCREENSHOTS);
    let n = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0) + 1;
    let rel = PathBuf::from(SCREENSHOTS).join(format!("{tab}-{n}.png"));
    let path = workspace.join(&rel);
    let io = |source| PageError::Io {
        path: rel.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    std::fs::write(&path, &png).map_err(|source| PageError::Io {
        path: rel.display().to_string(),
        source,
    })?;
    Ok((rel, png))
}

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WaitFor {
    Load,
    Selector,
    Text,
}

/// Waits in the page (a mutation observer, no polling from here) until `value` appears.
pub(crate) async fn wait(
    b: &Browser,
    tab: &str,
    what: WaitFor,
    value: Option<&str>,
    limit: Duration,
) -> Result<(), PageError> {
    if what == WaitFor::Load {
        return Ok(b.wait_load(tab, limit).await?);
    }
    let value = value
        .ok_or_else(|| PageError::Invalid("wait for selector or text needs \"value\"".into()))?;
    let (session, _) = b.tab(tab)?;
    let v = serde_json::to_string(value).unwrap_or_default();
    let test = match what {
        WaitFor::Selector => format!("() => !!document.querySelector({v})"),
        _ => format!("() => (document.body && document.body.innerText || '').includes({v})"),
    };
    let ms = limit.as_millis();
    let expr = format!(
        "new Promise(res => {{ const t = {test}; if (t()) return res(true); const o = new MutationObserver(() => {{ if (t()) {{ o.disconnect(); res(true); }} }}); o.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}}); setTimeout(() => {{ o.disconnect(); res(t()); }}, {ms}); }})"
    );
    let found = evaluate(&b.cdp, &session, &expr, limit + Duration::from_secs(2)).await?;
    if found == Value::Bool(true) {
        Ok(())
    } else {
        Err(BrowserError::TimedOut {
            what: format!("{value:?}"),
            after: limit,
        }
        .into())
    }
}
