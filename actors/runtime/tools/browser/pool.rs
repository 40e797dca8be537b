//! The browsers of the daemon: one per agent, started on its first call, stopped after
//! `idle_timeout` without a call, when it dies, or with the daemon ([`Browsers::stop_all`]).
//!
//! Each agent's profile is `<state>/browser/<agent>/profile`, so cookies and storage never
//! cross agents (separate processes, separate folders). While a browser runs, its pid and tabs
//! are written to `<state>/browser/<agent>/status.json` for `clawbus browser status`.

use super::chromium::{Browser, BrowserError, Net, group_rss, lock};
use clawbus_core::config::BrowserDef;
use clawbus_core::ids::AgentId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a stopping browser may take to close before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The file a running browser's status is written to, in its agent's folder.
pub const STATUS_FILE: &str = "status.json";

/// One agent's browser and what its idle timer watches.
pub(crate) struct Entry {
    pub(crate) browser: Arc<Browser>,
    activity: Notify,
    inflight: AtomicUsize,
    /// When the last call ended (the tokio clock, so a paused clock drives the idle timer).
    last: std::sync::Mutex<tokio::time::Instant>,
    stopped: tokio::sync::watch::Sender<bool>,
}

/// The tokio clock's now: the idle timer sleeps on it, and tests pause and advance it.
#[allow(
    clippy::disallowed_methods,
    reason = "the idle timer is a tokio timer; its deadline must be on the same clock, which tests pause and advance"
)]
fn now() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// Holds a browser in use: the idle timer does not fire while one lives, and restarts when
/// it is dropped.
pub(crate) struct InUse(Arc<Entry>);

impl Drop for InUse {
    fn drop(&mut self) {
        if let Ok(mut last) = self.0.last.lock() {
            *last = now();
        }
        self.0.inflight.fetch_sub(1, Ordering::SeqCst);
        self.0.activity.notify_one();
    }
}

impl std::ops::Deref for InUse {
    type Target = Browser;
    fn deref(&self) -> &Browser {
        &self.0.browser
    }
}

/// The running browsers, by agent. Cheap to clone.
#[derive(Clone)]
pub struct Browsers {
    inner: Arc<Inner>,
}

struct Inner {
    def: BrowserDef,
    net: Net,
    root: PathBuf,
    running: tokio::sync::Mutex<HashMap<AgentId, Arc<Entry>>>,
}

impl std::fmt::Debug for Browsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browsers")
            .field("root", &self.inner.root)
            .finish()
    }
}

impl Browsers {
    /// No browser yet; each agent's starts on first use, under `<state_dir>/browser/`.
    pub fn new(def: BrowserDef, state_dir: &Path) -> Self {
        Self {
            inner: Arc::new(Inner {
                def,
                net: Net::default(),
                root: state_dir.join("browser"),
                running: Default::default(),
            }),
        }
    }

    /// Tests only: the browsers resolve names through `net` and run with its arguments.
    #[cfg(test)]
    pub(crate) fn with_net(def: BrowserDef, state_dir: &Path, net: Net) -> Self {
        Self {
            inner: Arc::new(Inner {
                def,
                net,
                root: state_dir.join("browser"),
                running: Default::default(),
            }),
        }
    }

    /// The folder of `agent`'s profile and status.
    pub(crate) fn agent_dir(&self, agent: &AgentId) -> PathBuf {
        self.inner.root.join(agent.as_str())
    }

    /// `agent`'s browser if it runs (its idle timer held while the answer lives).
    pub(crate) async fn running(&self, agent: &AgentId) -> Option<InUse> {
        let map = self.inner.running.lock().await;
        let e = map
            .get(agent)
            .filter(|e| !e.browser.cdp.is_closed())?
            .clone();
        e.inflight.fetch_add(1, Ordering::SeqCst);
        Some(InUse(e))
    }

    /// `agent`'s browser, started with `exe` if it does not run.
    pub(crate) async fn get(
        &self,
        agent: &AgentId,
        exe: &Path,
        workspace: &Path,
    ) -> Result<InUse, BrowserError> {
        let mut map = self.inner.running.lock().await;
        if let Some(e) = map.get(agent).filter(|e| !e.browser.cdp.is_closed()) {
            e.inflight.fetch_add(1, Ordering::SeqCst);
            return Ok(InUse(e.clone()));
        }
        let dir = self.agent_dir(agent);
        let browser = Browser::start(
            exe,
            &dir.join("profile"),
            super::downloads::Folders::new(&dir, workspace),
            self.inner.def.clone(),
            self.inner.net.clone(),
        )
        .await?;
        let entry = Arc::new(Entry {
            browser: Arc::new(browser),
            activity: Notify::new(),
            inflight: AtomicUsize::new(1),
            last: std::sync::Mutex::new(now()),
            stopped: tokio::sync::watch::channel(false).0,
        });
        map.insert(agent.clone(), entry.clone());
        tokio::spawn(idle(self.clone(), agent.clone(), entry.clone()));
        Ok(InUse(entry))
    }

    /// Stops `agent`'s browser; answers whether one ran.
    pub(crate) async fn stop(&self, agent: &AgentId) -> bool {
        let entry = self.inner.running.lock().await.remove(agent);
        match entry {
            Some(e) => {
                self.finish(agent, &e).await;
                true
            }
            None => false,
        }
    }

    async fn finish(&self, agent: &AgentId, e: &Entry) {
        e.browser.stop(STOP_GRACE).await;
        remove_status(&self.agent_dir(agent));
        let _told = e.stopped.send(true);
    }

    /// Stops every browser (the daemon is stopping).
    pub async fn stop_all(&self) {
        let all: Vec<(AgentId, Arc<Entry>)> = self.inner.running.lock().await.drain().collect();
        for (agent, e) in all {
            self.finish(&agent, &e).await;
        }
    }

    /// A watch that turns `true` once `agent`'s running browser has stopped and its processes
    /// are gone; `None` when none runs.
    pub async fn stopped(&self, agent: &AgentId) -> Option<tokio::sync::watch::Receiver<bool>> {
        let map = self.inner.running.lock().await;
        map.get(agent).map(|e| e.stopped.subscribe())
    }

    /// The pid (its process group) of `agent`'s running browser.
    pub async fn pid(&self, agent: &AgentId) -> Option<u32> {
        self.inner
            .running
            .lock()
            .await
            .get(agent)
            .map(|e| e.browser.pid)
    }

    /// Writes `agent`'s status file: pid, memory and tabs.
    pub(crate) async fn write_status(&self, agent: &AgentId, b: &Browser) {
        let tabs: Vec<serde_json::Value> = {
            let st = lock(&b.state);
            st.tabs
                .iter()
                .map(|t| serde_json::json!({ "id": t.id, "target": t.target }))
                .collect()
        };
        let mut described = Vec::new();
        for t in tabs {
            let id = t["id"].as_str().unwrap_or_default();
            let (url, title) = super::page::location(b, id).await.unwrap_or_default();
            described.push(serde_json::json!({ "id": id, "url": url, "title": title }));
        }
        let status =
            serde_json::json!({ "pid": b.pid, "tabs": described, "rss_bytes": group_rss(b.pid) });
        let path = self.agent_dir(agent).join(STATUS_FILE);
        if let Err(e) = std::fs::write(&path, status.to_string()) {
            tracing::warn!(path = %path.display(), error = %e, "The browser status file could not be written.");
        }
    }
}

fn remove_status(dir: &Path) {
    match std::fs::remove_file(dir.join(STATUS_FILE)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "The browser status file could not be removed.")
        }
    }
}

/// Stops `entry` once `idle_timeout` has passed since the last call ended with none in
/// flight, or when its browser dies. The deadline is counted from when the last call ended
/// (not from when this task noticed it), on the tokio clock.
async fn idle(pool: Browsers, agent: AgentId, entry: Arc<Entry>) {
    let limit = pool.inner.def.idle_timeout;
    loop {
        let last = entry.last.lock().map(|l| *l).unwrap_or_else(|_| now());
        // While a call is in flight only its end (or the browser's death) can wake this.
        let busy = entry.inflight.load(Ordering::SeqCst) > 0;
        tokio::select! {
            () = tokio::time::sleep_until(last + limit), if !busy => {
                if entry.inflight.load(Ordering::SeqCst) == 0 {
                    tracing::info!(agent = %agent, idle_s = limit.as_secs(), "Browser idle; stopping it.");
                    break;
                }
            }
            () = entry.activity.notified() => {}
            () = entry.browser.cdp.closed() => {
                tracing::warn!(agent = %agent, pid = entry.browser.pid, "Browser exited.");
                break;
            }
        }
    }
    let mut map = pool.inner.running.lock().await;
    if map.get(&agent).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
        map.remove(&agent);
        drop(map);
        pool.finish(&agent, &entry).await;
    }
}
