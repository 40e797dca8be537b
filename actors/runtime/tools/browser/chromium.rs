//! One running Chromium of one agent: started with its own profile folder, every request it
//! makes held by the protocol's request interception until the address guard allows it, its
//! connections made by a guarded proxy that pins each name to the address it checked, its tabs
//! (popups included), page loads bounded by the load timeout, and downloads capped, staged
//! outside the workspace and moved in once finished (`super::downloads`).
//!
//! The guard has two layers:
//! - request interception (`Fetch.enable` on the browser target, so every tab, frame, worker,
//!   script, XHR, `fetch()` and every redirect hop is paused at the request stage): only
//!   `http(s)` (plus `data:`, `blob:` and `about:`, which never reach the network); the host is
//!   resolved and every address checked by the same [`classify`](crate::tools::web::guard)
//!   `web_fetch` uses; anything else fails with `BlockedByClient` and is recorded, so the model
//!   learns what was refused and why;
//! - the connection: Chromium never resolves a name itself. Its http and https go through a
//!   proxy of its own on loopback (the sandbox's filtering proxy, `crate::tools::sandbox::proxy`,
//!   with no domain list), which resolves the name once, checks every address, and connects to
//!   the address it checked. A name that answered a public address to the first layer and a
//!   private one a moment later (DNS rebinding, a time-of-check/time-of-use race) is refused
//!   there. Why a proxy: `--host-resolver-rules` is fixed for the whole process at start, so it
//!   cannot pin names learnt later; fulfilling every request from the daemon
//!   (`Fetch.fulfillRequest`) would hold whole bodies in memory, pass them base64 through the
//!   pipe and lose streaming; a proxy keeps Chromium's own networking and only decides where
//!   each connection goes. The proxy's port is reachable by local users, but it only connects
//!   where anyone on the host may connect directly (public addresses).
//!
//! WebSockets, which request interception does not see, are sent to a dead proxy (see
//! `cdp::launch`).

use super::cdp::{self, Cdp, CdpError};
use super::downloads::{Delivered, Folders};
use super::state::{State, Tab, Work};
use crate::tools::sandbox::proxy::{self, Resolver, TcpProxy};
use clawbus_core::config::BrowserDef;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a browser may take to answer its first command.
const START_WITHIN: Duration = Duration::from_secs(30);
/// Requests and downloads waiting for the guard; past it a request stays paused (never let
/// through) and is logged.
const WORK_QUEUE: usize = 2048;

/// Why a browser call failed, as the tool reports it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BrowserError {
    /// The browser could not be started.
    #[error("the browser could not start: {0}")]
    Start(String),
    /// A protocol command failed.
    #[error(transparent)]
    Cdp(#[from] CdpError),
    /// No tab of that id.
    #[error("no tab {0:?}; call action \"tabs\" to list the open tabs")]
    NoTab(String),
    /// The tab limit is reached.
    #[error("{0} tabs are open, the most allowed; close one first")]
    TooManyTabs(usize),
    /// The guard refused the URL.
    #[error("refused to open {url}: {why}")]
    Refused { url: String, why: String },
    /// The navigation failed.
    #[error("loading {url} failed: {why}")]
    Navigation { url: String, why: String },
    /// The page did not finish loading in time.
    #[error("{what} did not finish loading within {after:?}; loading was stopped")]
    TimedOut { what: String, after: Duration },
}

impl BrowserError {
    /// The `type` of the error output.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Start(_) => "unavailable",
            Self::Cdp(CdpError::TimedOut { .. }) | Self::TimedOut { .. } => "timed_out",
            Self::Cdp(_) => "browser",
            Self::NoTab(_) => "not_found",
            Self::TooManyTabs(_) => "limit_exceeded",
            Self::Refused { .. } => "url_refused",
            Self::Navigation { .. } => "network",
        }
    }
}

/// One agent's running Chromium.
pub(crate) struct Browser {
    pub(crate) cdp: Arc<Cdp>,
    pub(crate) state: Arc<Mutex<State>>,
    child: Mutex<Option<tokio::process::Child>>,
    /// Chromium's pid (also its process group).
    pub(crate) pid: u32,
    pub(crate) def: BrowserDef,
    /// Where WebSockets are sent: a loopback socket that never accepts (see `cdp::launch`).
    _sink: std::net::TcpListener,
    /// The proxy every http(s) connection goes through (stops when dropped).
    _proxy: TcpProxy,
    /// How names are resolved for the guard's checks.
    check: Resolver,
    /// Where its downloads are staged and delivered.
    downloads: Folders,
}

/// Locks `state`; a poisoned lock (a panic elsewhere) still holds usable data.
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a browser's names are resolved: for the check of each intercepted request, and by the
/// proxy its connections go through. Tests swap in fixed answers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Net {
    /// Resolves names for the check of each intercepted request.
    pub check: Resolver,
    /// Resolves names for the proxy, which connects to the address it checked.
    pub connect: Resolver,
    /// More Chromium arguments (tests only).
    pub args: Vec<String>,
}

/// `(host, port)` of each origin (`http://127.0.0.1:43123`) the proxy lets through unchecked.
fn exempt(origins: &[String]) -> Vec<(String, u16)> {
    origins
        .iter()
        .filter_map(|o| {
            let u = url::Url::parse(o).ok()?;
            let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']');
            Some((host.to_ascii_lowercase(), u.port_or_known_default()?))
        })
        .collect()
}

/// Whether the guard lets `url` through: `Err(why)` when not.
pub(crate) async fn check_url(url: &str, allow: &[String], dns: &Resolver) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a valid URL: {e}"))?;
    match parsed.scheme() {
        "data" | "blob" | "about" => return Ok(()),
        "http" | "https" => {}
        other => {
            return Err(format!(
                "scheme {other:?} is not allowed (only http and https)"
            ));
        }
    }
    if let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) {
        let origin = format!("{}://{host}:{port}", parsed.scheme());
        if allow.contains(&origin) {
            return Ok(());
        }
    }
    let Some(host) = parsed.host_str() else {
        return Err("the URL has no host".into());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default().unwrap_or(80);
    dns.resolve(host, port, false)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl Browser {
    /// Starts `exe` with `profile` as its profile folder; downloads are written into
    /// `downloads.staging` and moved into `downloads.workspace` once finished.
    pub(crate) async fn start(
        exe: &Path,
        profile: &Path,
        downloads: Folders,
        def: BrowserDef,
        net: Net,
    ) -> Result<Self, BrowserError> {
        let err =
            |what: &str, e: &dyn std::fmt::Display| BrowserError::Start(format!("{what}: {e}"));
        std::fs::create_dir_all(profile).map_err(|e| err(&profile.display().to_string(), &e))?;
        downloads
            .prepare()
            .map_err(|e| err("the downloads folders could not be made", &e))?;
        let state = Arc::new(Mutex::new(State::default()));
        let (work_tx, work_rx) = mpsc::channel(WORK_QUEUE);
        let cap = def.max_download_bytes;
        let events = state.clone();
        let on_event = Arc::new(move |ev: cdp::Event| {
            let work = lock(&events).apply(ev, cap);
            if let Some(w) = work
                && work_tx.try_send(w).is_err()
            {
                tracing::warn!("The browser's guard queue is full; a request stays paused.");
            }
        });
        let sink = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| err("no loopback socket for the WebSocket sink", &e))?;
        let sink_port = sink
            .local_addr()
            .map_err(|e| err("no loopback socket for the WebSocket sink", &e))?
            .port();
        let guarded = proxy::start_tcp(proxy::Policy {
            def: None,
            resolver: net.connect.clone(),
            agent: format!("{} (browser)", profile.display()),
            exempt: exempt(&def.test_allow_origins),
        })
        .map_err(|e| err("no loopback port for the browser's proxy", &e))?;
        let ports = cdp::Ports {
            proxy: guarded.addr.port(),
            sink: sink_port,
        };
        let launched = cdp::launch(exe, profile, ports, &net.args, on_event)
            .map_err(|e| err(&format!("cannot run {}", exe.display()), &e))?;
        let pid = launched.child.id().unwrap_or(0);
        let browser = Self {
            cdp: launched.cdp.clone(),
            state,
            child: Mutex::new(Some(launched.child)),
            pid,
            def,
            _sink: sink,
            _proxy: guarded,
            check: net.check.clone(),
            downloads: downloads.clone(),
        };
        tokio::spawn(work_loop(
            work_rx,
            launched.cdp.clone(),
            (browser.def.test_allow_origins.clone(), net.check),
            downloads.clone(),
            browser.state.clone(),
            (browser.def.max_tabs, cap),
        ));
        let ready = async {
            let cdp = &browser.cdp;
            cdp.call_within(None, "Browser.getVersion", json!({}), START_WITHIN)
                .await?;
            // Pages opened by pages (popups) are announced, to become tabs.
            cdp.call(
                None,
                "Target.setDiscoverTargets",
                json!({ "discover": true }),
            )
            .await?;
            cdp.call(
                None,
                "Fetch.enable",
                json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] }),
            )
            .await?;
            let behavior = if cap == 0 { "deny" } else { "allowAndName" };
            cdp.call(
                None,
                "Browser.setDownloadBehavior",
                json!({ "behavior": behavior, "downloadPath": downloads.staging, "eventsEnabled": true }),
            )
            .await?;
            Ok::<_, CdpError>(())
        };
        if let Err(e) = ready.await {
            let tail = launched
                .stderr
                .lock()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .unwrap_or_default();
            browser.kill();
            return Err(BrowserError::Start(format!(
                "{e}{}",
                if tail.trim().is_empty() {
                    String::new()
                } else {
                    format!("; its last output: {}", tail.trim())
                }
            )));
        }
        tracing::info!(pid, profile = %profile.display(), "Browser started.");
        Ok(browser)
    }

    /// Opens a blank tab and attaches to it; answers its id.
    pub(crate) async fn open_tab(&self) -> Result<String, BrowserError> {
        let open = lock(&self.state).tabs.len();
        if open >= self.def.max_tabs {
            return Err(BrowserError::TooManyTabs(open));
        }
        let created = self
            .cdp
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let target = created["targetId"].as_str().unwrap_or_default().to_string();
        attach(&self.cdp, &self.state, &target, self.def.max_tabs).await
    }

    /// The session and target of tab `id`.
    pub(crate) fn tab(&self, id: &str) -> Result<(String, String), BrowserError> {
        let mut st = lock(&self.state);
        let tab = st
            .tab(id)
            .ok_or_else(|| BrowserError::NoTab(id.to_string()))?;
        Ok((tab.session.clone(), tab.target.clone()))
    }

    /// Closes tab `id`.
    pub(crate) async fn close_tab(&self, id: &str) -> Result<(), BrowserError> {
        let (_, target) = self.tab(id)?;
        self.cdp
            .call(None, "Target.closeTarget", json!({ "targetId": target }))
            .await?;
        lock(&self.state).tabs.retain(|t| t.id != id);
        Ok(())
    }

    /// Loads `url` in tab `id` and waits for its load event, within the load timeout.
    pub(crate) async fn navigate(&self, id: &str, url: &str) -> Result<(), BrowserError> {
        if let Err(why) = check_url(url, &self.def.test_allow_origins, &self.check).await {
            return Err(BrowserError::Refused {
                url: url.to_string(),
                why,
            });
        }
        let (session, _) = self.tab(id)?;
        let mut loads = self.loads(id)?;
        let before = *loads.borrow_and_update();
        let refusals = lock(&self.state).refusals;
        let limit = self.def.load_timeout;
        let load = async {
            let r = self
                .cdp
                .call_within(
                    Some(&session),
                    "Page.navigate",
                    json!({ "url": url }),
                    limit,
                )
                .await?;
            if let Some(text) = r["errorText"].as_str() {
                let why = match lock(&self.state).refusal_since(refusals) {
                    Some((hop, reason)) => {
                        format!("{text} (the address guard refused {hop}: {reason})")
                    }
                    None => text.to_string(),
                };
                return Err(BrowserError::Navigation {
                    url: url.to_string(),
                    why,
                });
            }
            if r.get("loaderId").is_none() {
                return Ok(()); // the same document (a fragment): no load follows
            }
            let _changed = loads.wait_for(|n| *n > before).await;
            Ok(())
        };
        self.bounded(&session, url, load).await
    }

    /// After an action: lets the page react, then waits for a load it started, if any.
    pub(crate) async fn settle(&self, id: &str) -> Result<(), BrowserError> {
        let (session, _) = self.tab(id)?;
        let mut loads = self.loads(id)?;
        let before = *loads.borrow_and_update();
        let frame = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 100)))";
        // Fails when the action navigated away (the context is gone): that is fine.
        let _settled = self
            .cdp
            .call_within(
                Some(&session),
                "Runtime.evaluate",
                json!({ "expression": frame, "awaitPromise": true }),
                Duration::from_secs(2),
            )
            .await;
        let loading = lock(&self.state).tab(id).is_some_and(|t| t.loading);
        if !loading {
            return Ok(());
        }
        let wait = async {
            let _changed = loads.wait_for(|n| *n > before).await;
            Ok(())
        };
        self.bounded(&session, "the page", wait).await
    }

    /// Waits for the current load of tab `id` to finish (at once when it is not loading).
    pub(crate) async fn wait_load(&self, id: &str, limit: Duration) -> Result<(), BrowserError> {
        let (session, _) = self.tab(id)?;
        let mut loads = self.loads(id)?;
        let before = *loads.borrow_and_update();
        if !lock(&self.state).tab(id).is_some_and(|t| t.loading) {
            return Ok(());
        }
        let wait = async {
            let _changed = loads.wait_for(|n| *n > before).await;
            Ok(())
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => {
                self.cdp
                    .notify(Some(&session), "Page.stopLoading", json!({}))
                    .await;
                Err(BrowserError::TimedOut {
                    what: "the page".into(),
                    after: limit,
                })
            }
        }
    }

    async fn bounded(
        &self,
        session: &str,
        what: &str,
        work: impl std::future::Future<Output = Result<(), BrowserError>>,
    ) -> Result<(), BrowserError> {
        let limit = self.def.load_timeout;
        match tokio::time::timeout(limit, work).await {
            Ok(r) => r,
            Err(_) => {
                self.cdp
                    .notify(Some(session), "Page.stopLoading", json!({}))
                    .await;
                Err(BrowserError::TimedOut {
                    what: what.to_string(),
                    after: limit,
                })
            }
        }
    }

    fn loads(&self, id: &str) -> Result<tokio::sync::watch::Receiver<u64>, BrowserError> {
        let mut st = lock(&self.state);
        let tab = st
            .tab(id)
            .ok_or_else(|| BrowserError::NoTab(id.to_string()))?;
        Ok(tab.loads.subscribe())
    }

    /// Asks the browser to close, waits up to `grace` for it to exit, then kills its process
    /// group (whatever it left behind goes too).
    pub(crate) async fn stop(&self, grace: Duration) {
        self.cdp.notify(None, "Browser.close", json!({})).await;
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        if let Some(mut child) = child {
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                tracing::warn!(
                    pid = self.pid,
                    "The browser did not close in time; killing it."
                );
            }
            self.kill_group();
            let _reaped = child.wait().await;
            self.group_gone(grace).await;
        }
        self.downloads.clear_staging();
        tracing::info!(pid = self.pid, "Browser stopped.");
    }

    /// Kills the browser's process group now.
    pub(crate) fn kill(&self) {
        self.kill_group();
        if let Ok(mut c) = self.child.lock()
            && let Some(child) = c.as_mut()
        {
            let _killed = child.start_kill();
        }
    }

    /// Waits up to `grace` until no process of the browser's group is left: a SIGKILL to the
    /// group is delivered to each member on its own time, so "stopped" waits for the last one.
    async fn group_gone(&self, grace: Duration) {
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return;
        };
        let gone = async {
            while rustix::process::test_kill_process_group(pid).is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        if tokio::time::timeout(grace, gone).await.is_err() {
            tracing::warn!(
                pid = self.pid,
                "Some of the browser's processes outlived the kill."
            );
        }
    }

    fn kill_group(&self) {
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return;
        };
        match rustix::process::kill_process_group(pid, rustix::process::Signal::KILL) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(e) => {
                tracing::warn!(pid = self.pid, error = %e, "Killing the browser's processes failed.")
            }
        }
    }
}

/// Attaches to page `target` and makes it a tab (its id answered), unless `max_tabs` are open:
/// then the target is closed. Used for the tabs the tool opens and for popups.
async fn attach(
    cdp: &Cdp,
    state: &Mutex<State>,
    target: &str,
    max_tabs: usize,
) -> Result<String, BrowserError> {
    let attached = cdp
        .call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
        )
        .await?;
    let session = attached["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let id = {
        let mut st = lock(state);
        let open = st.tabs.len();
        if open >= max_tabs {
            None
        } else {
            st.next_tab += 1;
            let id = format!("t{}", st.next_tab);
            st.tabs
                .push(Tab::new(id.clone(), target.to_string(), session.clone()));
            Some((id, open))
        }
    };
    let Some((id, _)) = id else {
        let open = lock(state).tabs.len();
        cdp.notify(None, "Target.closeTarget", json!({ "targetId": target }))
            .await;
        return Err(BrowserError::TooManyTabs(open));
    };
    let s = Some(session.as_str());
    for (method, params) in [
        ("Page.enable", json!({})),
        ("Runtime.enable", json!({})),
        ("Log.enable", json!({})),
        (
            "Network.enable",
            json!({ "maxTotalBufferSize": 2_000_000, "maxResourceBufferSize": 1_000_000 }),
        ),
    ] {
        cdp.call(s, method, params).await?;
    }
    Ok(id)
}

/// Makes popup `target` (opened by the page of target `opener`) a tab, or closes it when
/// `max_tabs` are open, telling the opener's errors either way.
async fn popup(
    cdp: Arc<Cdp>,
    state: Arc<Mutex<State>>,
    target: String,
    opener: String,
    max_tabs: usize,
) {
    let note = match attach(&cdp, &state, &target, max_tabs).await {
        Ok(id) => {
            tracing::info!(tab = %id, "A page opened a popup; it is a tab now.");
            return;
        }
        Err(BrowserError::TooManyTabs(n)) => {
            format!("a popup was closed: {n} tabs are open, the most allowed (max_tabs)")
        }
        Err(e) => format!("a popup could not be attached: {e}"),
    };
    tracing::info!(reason = %note, "A popup was not made a tab.");
    lock(&state).note_error(&opener, &note);
}

/// Decides every paused request and handles downloads; ends when the browser is gone.
async fn work_loop(
    mut rx: mpsc::Receiver<Work>,
    cdp: Arc<Cdp>,
    guard: (Vec<String>, Resolver),
    downloads: Folders,
    state: Arc<Mutex<State>>,
    (max_tabs, cap): (usize, u64),
) {
    let guard = Arc::new(guard);
    while let Some(work) = rx.recv().await {
        match work {
            Work::Paused {
                request,
                url,
                session,
            } => {
                let (cdp, guard, state) = (cdp.clone(), guard.clone(), state.clone());
                tokio::spawn(async move {
                    let s = session.as_deref();
                    match check_url(&url, &guard.0, &guard.1).await {
                        Ok(()) => {
                            cdp.notify(s, "Fetch.continueRequest", json!({ "requestId": request }))
                                .await;
                        }
                        Err(why) => {
                            tracing::info!(url = %url, reason = %why, "The browser's request was refused by the address guard.");
                            lock(&state).refuse(&url, why);
                            cdp.notify(
                                s,
                                "Fetch.failRequest",
                                json!({ "requestId": request, "errorReason": "BlockedByClient" }),
                            )
                            .await;
                        }
                    }
                });
            }
            Work::CancelDownload { guid } => {
                tracing::info!(guid = %guid, "A download over the cap was cancelled.");
                cdp.notify(None, "Browser.cancelDownload", json!({ "guid": guid }))
                    .await;
            }
            Work::Discard { guid } => {
                downloads.discard(&guid);
                lock(&state).settle(&guid, |_| {});
            }
            Work::Finished { guid } => deliver(&downloads, &guid, &state, cap),
            Work::Popup { target, opener } => {
                tokio::spawn(popup(cdp.clone(), state.clone(), target, opener, max_tabs));
            }
        }
    }
}

/// Moves finished download `guid` into the workspace and records where it went.
fn deliver(downloads: &Folders, guid: &str, state: &Mutex<State>, cap: u64) {
    let suggested = lock(state)
        .downloads
        .get(guid)
        .map(|d| d.name.clone())
        .unwrap_or_default();
    let delivered = downloads.deliver(guid, &suggested, cap);
    if let Err(e) = &delivered {
        tracing::warn!(guid, error = %e, "A finished download could not be moved into the workspace.");
        downloads.discard(guid);
    }
    lock(state).settle(guid, |d| match delivered {
        Ok(Delivered::As(name)) => d.name = name,
        Ok(Delivered::OverCap(len)) => {
            d.bytes = len;
            d.refused = true;
        }
        Err(e) => d.state = format!("failed ({e})"),
    });
}

/// The resident memory of every process in group `pgid`, in bytes (Linux `/proc`).
pub fn group_rss(pgid: u32) -> u64 {
    let page = 4096u64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // Fields after the command (which may hold spaces) start after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let pgrp = rest
            .split_whitespace()
            .nth(2)
            .and_then(|f| f.parse::<u32>().ok());
        if pgrp != Some(pgid) {
            continue;
        }
        if let Ok(statm) = std::fs::read_to_string(path.join("statm"))
            && let Some(rss) = statm
                .split_whitespace()
                .nth(1)
                .and_then(|f| f.parse::<u64>().ok())
        {
            total += rss * page;
        }
    }
    total
}

/// Reads a value the page computed (`Runtime.evaluate` with `returnByValue`).
pub(crate) async fn evaluate(
    cdp: &Cdp,
    session: &str,
    expression: &str,
    limit: Duration,
) -> Result<Value, BrowserError> {
    let r = cdp
        .call_within(
            Some(session),
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            limit,
        )
        .await?;
    if let Some(ex) = r.get("exceptionDetails") {
        let text = ex["exception"]["description"]
            .as_str()
            .or(ex["text"].as_str())
            .unwrap_or("the script failed");
        return Err(BrowserError::Cdp(CdpError::Protocol {
            method: "Runtime.evaluate".into(),
            message: text.chars().take(300).collect(),
        }));
    }
    Ok(r["result"]["value"].clone())
}
