//! What one browser knows of its tabs, kept up to date from the protocol's events: load
//! state, the refs handed to the model, the requests and errors of each tab (bounded rings),
//! what the guard refused, and downloads.

use super::cdp::Event;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use tokio::sync::watch;

/// Requests remembered per tab.
const MAX_REQUESTS: usize = 300;
/// Errors remembered per tab.
const MAX_ERRORS: usize = 100;
/// Refusals remembered per browser.
const MAX_REFUSED: usize = 300;
/// The longest URL or error text kept.
const MAX_TEXT: usize = 500;

/// One request a tab made.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub id: String,
    pub method: String,
    pub url: String,
    pub kind: String,
    pub status: Option<u16>,
    pub failed: Option<String>,
}

/// The refs of one document: `e<n>` ↔ the node's backend id.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    by_node: HashMap<i64, u32>,
    by_ref: HashMap<u32, i64>,
    next: u32,
}

impl Refs {
    /// The ref of `node`, made on first sight: the same node keeps its ref across snapshots.
    pub(crate) fn of(&mut self, node: i64) -> u32 {
        if let Some(r) = self.by_node.get(&node) {
            return *r;
        }
        self.next += 1;
        self.by_node.insert(node, self.next);
        self.by_ref.insert(self.next, node);
        self.next
    }

    /// The node `e<n>` names, if this document handed it out.
    pub(crate) fn node(&self, r: u32) -> Option<i64> {
        self.by_ref.get(&r).copied()
    }
}

/// One tab the agent opened.
#[derive(Debug)]
pub(crate) struct Tab {
    /// `t1`, `t2`, … as the model names it.
    pub id: String,
    /// The protocol's target id (also the main frame's id).
    pub target: String,
    /// The flat session attached to it.
    pub session: String,
    /// Bumped on every load event of the main frame.
    pub loads: watch::Sender<u64>,
    /// Whether the main frame is loading now.
    pub loading: bool,
    /// The refs of the current document (cleared when the main frame commits a new one).
    pub refs: Refs,
    pub requests: VecDeque<Request>,
    pub errors: VecDeque<String>,
}

impl Tab {
    pub(crate) fn new(id: String, target: String, session: String) -> Self {
        Self {
            id,
            target,
            session,
            loads: watch::channel(0).0,
            loading: false,
            refs: Refs::default(),
            requests: VecDeque::new(),
            errors: VecDeque::new(),
        }
    }
}

/// A download in progress or done.
#[derive(Debug, Clone)]
pub(crate) struct Download {
    pub url: String,
    pub name: String,
    /// The browser's word: `inProgress`, `completed`, `canceled`.
    pub state: String,
    pub bytes: u64,
    /// Over the cap (or downloads are refused): cancelled.
    pub refused: bool,
    /// Renamed into the workspace, or its partial file removed: nothing more will happen.
    pub settled: bool,
}

/// Everything one browser knows, behind one lock.
#[derive(Debug)]
pub(crate) struct State {
    pub tabs: Vec<Tab>,
    pub next_tab: u32,
    /// `(url, why)` of every request the guard refused, newest last.
    pub refused: VecDeque<(String, String)>,
    /// How many refusals there have been (the ring forgets, this does not).
    pub refusals: u64,
    pub downloads: HashMap<String, Download>,
    /// How many downloads have settled (see [`State::settle`]), for whoever waits on one.
    pub settled: watch::Sender<u64>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            tabs: Vec::new(),
            next_tab: 0,
            refused: VecDeque::new(),
            refusals: 0,
            downloads: HashMap::new(),
            settled: watch::channel(0).0,
        }
    }
}

/// What an event asks of the browser beyond updating the state.
#[derive(Debug)]
pub(crate) enum Work {
    /// A request waits for the guard's decision.
    Paused {
        request: String,
        url: String,
        session: Option<String>,
    },
    /// A download is over the cap (or downloads are refused): cancel it.
    CancelDownload { guid: String },
    /// A download finished: move it to its name.
    Finished { guid: String },
    /// A download was cancelled: remove what it left.
    Discard { guid: String },
    /// A page opened another (`window.open`, `target=_blank`): make it a tab, or close it.
    Popup { target: String, opener: String },
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn push<T>(ring: &mut VecDeque<T>, item: T, cap: usize) {
    if ring.len() == cap {
        ring.pop_front();
    }
    ring.push_back(item);
}

impl State {
    /// The tab attached as `session`.
    pub(crate) fn tab_of_session(&mut self, session: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.session == session)
    }

    /// The tab showing target `target`.
    pub(crate) fn tab_of_target(&mut self, target: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.target == target)
    }

    /// Records `text` among the errors of the tab showing `target`, if one does.
    pub(crate) fn note_error(&mut self, target: &str, text: &str) {
        if let Some(t) = self.tab_of_target(target) {
            push(&mut t.errors, cut(text), MAX_ERRORS);
        }
    }

    /// The tab the model calls `id`.
    pub(crate) fn tab(&mut self, id: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.id == id)
    }

    /// Marks download `guid` settled after `change`, and tells whoever waits on `settled` the
    /// first time (a download discarded twice, once completed and once cancelled, counts once).
    pub(crate) fn settle(&mut self, guid: &str, change: impl FnOnce(&mut Download)) {
        if let Some(d) = self.downloads.get_mut(guid) {
            change(d);
            if !d.settled {
                d.settled = true;
                self.settled.send_modify(|n| *n += 1);
            }
        }
    }

    /// Records a refusal of the guard.
    pub(crate) fn refuse(&mut self, url: &str, why: String) {
        push(&mut self.refused, (cut(url), why), MAX_REFUSED);
        self.refusals += 1;
    }

    /// The newest refusal, if there were more than `since`.
    pub(crate) fn refusal_since(&self, since: u64) -> Option<&(String, String)> {
        (self.refusals > since)
            .then(|| self.refused.back())
            .flatten()
    }

    /// Applies `event`; answers the work it asks for. `max_download` is the download cap.
    pub(crate) fn apply(&mut self, event: Event, max_download: u64) -> Option<Work> {
        let p = &event.params;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        match event.method.as_str() {
            "Fetch.requestPaused" => {
                return Some(Work::Paused {
                    request: s(&p["requestId"]),
                    url: s(&p["request"]["url"]),
                    session: event.session,
                });
            }
            "Browser.downloadWillBegin" => {
                let guid = s(&p["guid"]);
                self.downloads.insert(
                    guid.clone(),
                    Download {
                        url: cut(p["url"].as_str().unwrap_or_default()),
                        name: s(&p["suggestedFilename"]),
                        state: "inProgress".into(),
                        bytes: 0,
                        refused: max_download == 0,
                        settled: false,
                    },
                );
                if max_download == 0 {
                    return Some(Work::CancelDownload { guid });
                }
            }
            "Browser.downloadProgress" => {
                let guid = s(&p["guid"]);
                let total = p["totalBytes"].as_f64().unwrap_or(0.0) as u64;
                let received = p["receivedBytes"].as_f64().unwrap_or(0.0) as u64;
                let state = s(&p["state"]);
                let d = self.downloads.get_mut(&guid)?;
                d.bytes = received;
                if state == "canceled" {
                    d.state = state;
                    return Some(Work::Discard { guid });
                }
                if d.refused || total > max_download || received > max_download {
                    let first = !d.refused;
                    d.refused = true;
                    // On a fast link the download may complete before the cancel arrives:
                    // what was saved is deleted then.
                    if state == "completed" {
                        return Some(Work::Discard { guid });
                    }
                    return first.then_some(Work::CancelDownload { guid });
                }
                d.state = state.clone();
                if state == "completed" {
                    return Some(Work::Finished { guid });
                }
            }
            "Target.targetCreated"
                if p["targetInfo"]["type"] == "page"
                    && p["targetInfo"]["openerId"]
                        .as_str()
                        .is_some_and(|o| !o.is_empty()) =>
            {
                // Only pages opened by a page carry an opener; tabs the tool opens do not.
                return Some(Work::Popup {
                    target: s(&p["targetInfo"]["targetId"]),
                    opener: s(&p["targetInfo"]["openerId"]),
                });
            }
            "Target.detachedFromTarget" => {
                // The tab closed itself (window.close()) or crashed: it is gone.
                let gone = s(&p["sessionId"]);
                self.tabs.retain(|t| t.session != gone);
                return None;
            }
            _ => {}
        }
        let session = event.session.as_deref()?;
        let tab = self.tab_of_session(session)?;
        let main = |p: &Value| p["frameId"].as_str() == Some(tab.target.as_str());
        match event.method.as_str() {
            "Page.loadEventFired" => {
                tab.loading = false;
                tab.loads.send_modify(|n| *n += 1);
            }
            "Page.frameStartedLoading" if main(p) => tab.loading = true,
            "Page.frameStoppedLoading" if main(p) => tab.loading = false,
            "Page.frameNavigated" if p["frame"]["parentId"].is_null() => {
                tab.refs = Refs::default();
            }
            "Network.requestWillBeSent" => {
                let r = Request {
                    id: s(&p["requestId"]),
                    method: s(&p["request"]["method"]),
                    url: cut(p["request"]["url"].as_str().unwrap_or_default()),
                    kind: s(&p["type"]).to_lowercase(),
                    status: None,
                    failed: None,
                };
                push(&mut tab.requests, r, MAX_REQUESTS);
            }
            "Network.responseReceived" => {
                let id = s(&p["requestId"]);
                if let Some(r) = tab.requests.iter_mut().rev().find(|r| r.id == id) {
                    r.status = p["response"]["status"].as_u64().map(|n| n as u16);
                }
            }
            "Network.loadingFailed" => {
                let id = s(&p["requestId"]);
                if let Some(r) = tab.requests.iter_mut().rev().find(|r| r.id == id) {
                    r.failed = Some(cut(p["errorText"].as_str().unwrap_or("failed")));
                }
            }
            "Runtime.exceptionThrown" => {
                let d = &p["exceptionDetails"];
                let text = d["exception"]["description"]
                    .as_str()
                    .or(d["text"].as_str())
                    .unwrap_or("exception");
                push(&mut tab.errors, cut(text), MAX_ERRORS);
            }
            "Runtime.consoleAPICalled" if p["type"] == "error" => {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| match &a["value"] {
                        Value::String(v) => v.clone(),
                        Value::Null => a["description"].as_str().unwrap_or("").to_string(),
                        v => v.to_string(),
                    })
                    .collect();
                push(
                    &mut tab.errors,
                    cut(&format!("console.error: {}", args.join(" "))),
                    MAX_ERRORS,
                );
            }
            "Log.entryAdded" if p["entry"]["level"] == "error" => {
                let text = p["entry"]["text"].as_str().unwrap_or_default();
                push(&mut tab.errors, cut(text), MAX_ERRORS);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(method: &str, params: Value) -> Event {
        Event {
            method: method.into(),
            session: None,
            params,
        }
    }

    fn progress(state: &str, received: u64, total: u64) -> Event {
        event(
            "Browser.downloadProgress",
            json!({ "guid": "g", "state": state, "receivedBytes": received, "totalBytes": total }),
        )
    }

    fn began(s: &mut State) {
        let begin = event(
            "Browser.downloadWillBegin",
            json!({ "guid": "g", "url": "http://x/big", "suggestedFilename": "big.bin" }),
        );
        assert!(s.apply(begin, 100).is_none());
    }

    #[test]
    fn a_download_over_the_cap_is_cancelled_once_then_discarded_when_cancelled() {
        let mut s = State::default();
        began(&mut s);
        assert!(matches!(
            s.apply(progress("inProgress", 10, 5_000), 100),
            Some(Work::CancelDownload { .. })
        ));
        assert!(
            s.apply(progress("inProgress", 200, 5_000), 100).is_none(),
            "cancelled once"
        );
        assert!(matches!(
            s.apply(progress("canceled", 300, 5_000), 100),
            Some(Work::Discard { .. })
        ));
    }

    #[test]
    fn a_download_over_the_cap_that_completes_before_its_cancel_is_discarded() {
        let mut s = State::default();
        began(&mut s);
        assert!(matches!(
            s.apply(progress("completed", 5_000, 5_000), 100),
            Some(Work::Discard { .. })
        ));
        let mut s = State::default();
        began(&mut s);
        let _cancel = s.apply(progress("inProgress", 200, 5_000), 100);
        assert!(
            matches!(
                s.apply(progress("completed", 5_000, 5_000), 100),
                Some(Work::Discard { .. })
            ),
            "completed after the cancel was sent: deleted, never renamed"
        );
    }

    #[test]
    fn a_settled_download_is_counted_for_waiters_and_an_unknown_one_is_not() {
        let mut s = State::default();
        let waiter = s.settled.subscribe();
        began(&mut s);
        s.settle("other", |_| {});
        assert_eq!(*waiter.borrow(), 0, "no download of that guid");
        s.settle("g", |d| d.name = "big-2.bin".into());
        assert_eq!(*waiter.borrow(), 1);
        s.settle("g", |_| {});
        assert_eq!(*waiter.borrow(), 1, "a download settles once");
        assert!(s.downloads["g"].settled);
        assert_eq!(s.downloads["g"].name, "big-2.bin");
    }
}
