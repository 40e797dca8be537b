//! For the `browser` tool's tests: the Chromium to run ([`chromium_or_skip`]), a site of
//! fixture pages on loopback ([`FixtureSite`]), and a server that only records who reached it
//! ([`Tripwire`]).
//!
//! The binary is `$CLAWBUS_CHROMIUM`, else `/usr/bin/chromium` (what `.ci/run` installs from
//! Debian's packages), else `chromium`, `chromium-browser` or `google-chrome` on `PATH`.

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The Chromium binary, or `None` after printing `skipped: <test>: <reason>`.
///
/// # Panics
/// When none is found and `CI=true`.
#[allow(clippy::panic)]
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    match find_chromium() {
        Ok(p) => Some(p),
        Err(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: Chromium is required in CI: {reason}")
        }
        Err(reason) => {
            println!("skipped: {test}: {reason}");
            None
        }
    }
}

fn find_chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CLAWBUS_CHROMIUM") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("$CLAWBUS_CHROMIUM={} is not a file", p.display()))
        };
    }
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.is_file() {
        return Ok(fixed);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            if dir.join(name).is_file() {
                return Ok(dir.join(name));
            }
        }
    }
    Err("no Chromium found (set $CLAWBUS_CHROMIUM or install chromium)".into())
}

/// A server on `127.0.0.1:<port>` that answers everything with 200 and records each path:
/// the place a hostile page tries to reach.
pub struct Tripwire {
    /// Its address.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Tripwire {
    /// Starts one.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let s = seen.clone();
        let app = Router::new().fallback(move |req: Request| {
            let s = s.clone();
            async move {
                if let Ok(mut v) = s.lock() {
                    v.push(req.uri().to_string());
                }
                "secret from loopback"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, seen }
    }

    /// Every path that reached it.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// The fixture pages, on `127.0.0.1:<port>`:
/// - `/js`: its text is written by a script (`Rendered by script 4711`);
/// - `/form`: a GET form (textbox "Query", button "Send") to `/result`, which shows
///   `You sent: <q>`;
/// - `/hang`: never answers;
/// - `/hostile?to=<host:port>`: an iframe, `fetch()`es and an image aimed at `to`,
///   `10.0.0.1` and `169.254.169.254`, and a WebSocket to `to`;
/// - `/redirect?to=<url>`: a 302 to `to`;
/// - `/download?bytes=<n>`: `n` bytes as an attachment;
/// - `/set-cookie?v=<v>`: sets cookie `who=<v>`; `/cookie`: shows `document.cookie`;
/// - `/actions`: a select "Colour" (`chose <value>`), a button "Hover me" (`hovered`), a
///   textbox "Keys" (`key <key>`), and a button "Far below" 3000px down (`scrolled far`);
/// - `/popup`: a button "Pop" that `window.open`s `/js`, and a link "New tab" to `/form` with
///   `target=_blank`.
pub struct FixtureSite {
    /// Its address.
    pub addr: SocketAddr,
    cookies: Arc<Mutex<Vec<String>>>,
}

const JS_PAGE: &str = r#"<!DOCTYPE html><html><head><title>Script page</title></head><body>
<div id="app"></div>
<script>setTimeout(() => { document.getElementById('app').innerHTML = '<h1>Rendered by script 4711</h1><button>Press me</button>'; }, 10);</script>
</body></html>"#;

const FORM_PAGE: &str = r#"<!DOCTYPE html><html><head><title>Form</title></head><body>
<h1>Say something</h1>
<form action="/result" method="get"><input name="q" aria-label="Query"><button type="submit">Send</button></form>
<a href="/js">elsewhere</a>
</body></html>"#;

const ACTIONS_PAGE: &str = r#"<!DOCTYPE html><html><head><title>Actions</title></head><body>
<h1>Actions</h1>
<select aria-label="Colour" onchange="say('chose ' + this.value)"><option value="red">Red</option><option value="green">Green</option></select>
<button onmouseover="say('hovered')">Hover me</button>
<input aria-label="Keys" onkeydown="say('key ' + event.key)">
<p id="out"></p>
<div style="height: 3000px"></div>
<button>Far below</button>
<script>
function say(t) { document.getElementById('out').textContent = t; }
window.addEventListener('scroll', () => { if (window.scrollY > 1000) say('scrolled far'); });
</script>
</body></html>"#;

const POPUP_PAGE: &str = r#"<!DOCTYPE html><html><head><title>Popups</title></head><body>
<button onclick="window.open('/js')">Pop</button>
<a href="/form" target="_blank">New tab</a>
</body></html>"#;

type Params = Query<HashMap<String, String>>;

impl FixtureSite {
    /// Starts one.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    #[allow(clippy::expect_used)]
    pub async fn start() -> Self {
        let cookies: Arc<Mutex<Vec<String>>> = Arc::default();
        let app = Router::new()
            .route("/js", get(|| async { Html(JS_PAGE) }))
            .route("/form", get(|| async { Html(FORM_PAGE) }))
            .route("/result", get(result))
            .route("/hang", get(std::future::pending::<&'static str>))
            .route("/hostile", get(hostile))
            .route("/redirect", get(redirect))
            .route("/download", get(download))
            .route("/set-cookie", get(set_cookie))
            .route("/cookie", get(cookie))
            .route("/actions", get(|| async { Html(ACTIONS_PAGE) }))
            .route("/popup", get(|| async { Html(POPUP_PAGE) }))
            .with_state(cookies.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, cookies }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The origin, as `[browser] test_allow_origins` takes it.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `Cookie` header of every request to `/cookie`, in order ("" when none).
    pub fn cookies_seen(&self) -> Vec<String> {
        self.cookies.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn result(Query(q): Params) -> Html<String> {
    let sent = escape(q.get("q").map(String::as_str).unwrap_or_default());
    Html(format!(
        "<!DOCTYPE html><html><head><title>Result</title></head><body><p>You sent: {sent}</p></body></html>"
    ))
}

async fn hostile(Query(q): Params) -> Html<String> {
    let to = escape(q.get("to").map(String::as_str).unwrap_or_default());
    Html(format!(
        r#"<!DOCTYPE html><html><head><title>Hostile</title></head><body><h1>Hostile page</h1>
<iframe src="http://{to}/from-iframe"></iframe>
<img src="http://{to}/from-img">
<script>
fetch("http://{to}/from-fetch").catch(() => {{}});
try {{ new WebSocket("ws://{to}/from-websocket"); }} catch (e) {{}}
fetch("http://10.0.0.1/private").catch(() => {{}});
fetch("http://169.254.169.254/latest/meta-data/").catch(() => {{}});
</script></body></html>"#
    ))
}

async fn redirect(Query(q): Params) -> Response {
    let to = q.get("to").cloned().unwrap_or_default();
    (axum::http::StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

async fn download(Query(q): Params) -> Response {
    let n: usize = q.get("bytes").and_then(|b| b.parse().ok()).unwrap_or(1000);
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"data.bin\"".to_string(),
            ),
            (header::CONTENT_LENGTH, n.to_string()),
        ],
        vec![b'x'; n],
    )
        .into_response()
}

async fn set_cookie(Query(q): Params) -> Response {
    let v = q.get("v").cloned().unwrap_or_default();
    (
        [(header::SET_COOKIE, format!("who={v}; Path=/"))],
        Html(format!("<!DOCTYPE html><html><head><title>Cookie set</title></head><body><p>set {}</p></body></html>", escape(&v))),
    )
        .into_response()
}

async fn cookie(
    State(seen): State<Arc<Mutex<Vec<String>>>>,
    headers: HeaderMap,
) -> Html<&'static str> {
    let c = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if let Ok(mut s) = seen.lock() {
        s.push(c);
    }
    Html(
        r#"<!DOCTYPE html><html><head><title>Cookie</title></head><body><p id="c"></p><script>document.getElementById('c').textContent = 'cookie=[' + document.cookie + ']';</script></body></html>"#,
    )
}

/// Every process whose command line names `dir` (a browser's profile folder): what a test checks
/// to prove no browser outlived its stop.
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}
