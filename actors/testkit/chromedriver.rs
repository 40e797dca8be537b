//! A real headless Chromium driven over W3C WebDriver by the distribution's `chromedriver`.
//!
//! The driver is `$CLAWBUS_CHROMEDRIVER`, else `/usr/bin/chromedriver`, else `chromedriver` on
//! `PATH`; the browser `$CLAWBUS_CHROMIUM`, else `/usr/bin/chromium`, else `chromium` on `PATH`
//! (Debian's `chromium` and `chromium-driver`, which `.ci/run` installs). Without them,
//! [`Browser::start_or_skip`] prints `skipped: <test>: <reason>` and answers `None`, unless
//! `CI=true`: then the test fails.
//!
//! The client is a small W3C WebDriver client over `reqwest` (already a dependency of the
//! workspace), covering what the tests use: navigate, find, click, type, press keys, read text,
//! run a script, wait for a condition inside the page, alerts, screenshots, and DevTools
//! commands (media emulation).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// The key W3C WebDriver gives an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long the driver may take to listen.
const READY_WITHIN: Duration = Duration::from_secs(20);
/// How long one WebDriver command may take (a page load, a script waiting for a condition).
const COMMAND_WITHIN: Duration = Duration::from_secs(60);

/// A WebDriver error: the command, the W3C error code and message, or a transport failure.
#[derive(Debug, Clone)]
pub struct WebDriverError {
    /// The W3C error code (`no such element`, `no such alert`, `script timeout`...), or
    /// `transport` when the driver could not be reached.
    pub error: String,
    /// The driver's message.
    pub message: String,
}

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "webdriver: {}: {}", self.error, self.message)
    }
}

impl std::error::Error for WebDriverError {}

fn transport(e: impl std::fmt::Display) -> WebDriverError {
    WebDriverError {
        error: "transport".into(),
        message: e.to_string(),
    }
}

/// A running `chromedriver` on a free loopback port; stopped when dropped, or when the test
/// process ends (a shell around it kills it once its stdin, held here, closes).
struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the shell kills the driver (and so the browser) and waits
        if self.child.wait().is_err() {
            tracing::warn!("chromedriver wrapper could not be waited for");
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One headless Chromium session; the browser and its driver end when dropped.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:<port>/session/<id>`.
    session: String,
    session_id: String,
    driver: Driver,
}

/// An element of the page, found by [`Browser::find`].
#[derive(Debug, Clone)]
pub struct Element {
    id: String,
}

impl Browser {
    /// Starts a driver and a headless browser with a fresh profile and a 1280×900 window.
    pub async fn start() -> Result<Self, String> {
        Self::start_sized(1280, 900).await
    }

    /// Starts a driver and a headless browser with a fresh profile and this window size.
    pub async fn start_sized(width: u32, height: u32) -> Result<Self, String> {
        let driver_bin = find_program("CLAWBUS_CHROMEDRIVER", "chromedriver")?;
        let chromium = find_program("CLAWBUS_CHROMIUM", "chromium")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let profile =
            std::env::temp_dir().join(format!("clawbus-chromium-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&profile).map_err(|e| format!("{}: {e}", profile.display()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            // The driver's process group goes with it: the browser it started too.
            .arg(r#"setsid "$@" </dev/null & p=$!; read _ || true; kill -- -$p 2>/dev/null || kill $p; wait $p"#)
            .arg("sh")
            .arg(&driver_bin)
            .arg(format!("--port={port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", driver_bin.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            let mut told = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !told && line.contains("started successfully") {
                    told = ready_tx.send(()).is_ok();
                }
            }
        });
        let driver = Driver {
            child,
            stdin,
            port,
            profile: profile.clone(),
        };
        // Blocking wait for one line: a few milliseconds, before any async work.
        if ready_rx.recv_timeout(READY_WITHIN).is_err() {
            return Err(format!(
                "{} did not start on port {port} within {READY_WITHIN:?}",
                driver_bin.display()
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(COMMAND_WITHIN)
            .no_proxy()
            .build()
            .map_err(|e| e.to_string())?;
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                    "--disable-background-networking", "--disable-sync",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
        let base = format!("http://127.0.0.1:{port}");
        let answer = command(
            &http,
            reqwest::Method::POST,
            &format!("{base}/session"),
            &caps,
        )
        .await
        .map_err(|e| format!("no browser session ({}): {e}", chromium.display()))?;
        let session_id = answer
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no session id in {answer}"))?
            .to_string();
        Ok(Self {
            http,
            session: format!("{base}/session/{session_id}"),
            session_id,
            driver,
        })
    }

    /// A browser for `test`; `None` (after printing `skipped: <test>: <reason>`) when none can
    /// be started outside CI.
    ///
    /// # Panics
    /// When none can be started and `CI=true`.
    #[allow(clippy::panic)]
    pub async fn start_or_skip(test: &str) -> Option<Self> {
        Self::start_sized_or_skip(test, 1280, 900).await
    }

    /// Like [`Browser::start_or_skip`] with this window size (a phone: 390×844).
    ///
    /// # Panics
    /// When none can be started and `CI=true`.
    #[allow(clippy::panic)]
    pub async fn start_sized_or_skip(test: &str, width: u32, height: u32) -> Option<Self> {
        match Self::start_sized(width, height).await {
            Ok(browser) => Some(browser),
            Err(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("{test}: a headless Chromium is required in CI: {reason}")
            }
            Err(reason) => {
                println!("skipped: {test}: {reason}");
                None
            }
        }
    }

    async fn cmd(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, WebDriverError> {
        command(&self.http, method, &format!("{}{path}", self.session), body).await
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) -> Result<(), WebDriverError> {
        self.cmd(reqwest::Method::POST, "/url", &json!({ "url": url }))
            .await
            .map(drop)
    }

    /// The current page's URL.
    pub async fn url(&self) -> Result<String, WebDriverError> {
        let v = self.cmd(reqwest::Method::GET, "/url", &Value::Null).await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// The first element matching the CSS `selector`, now.
    pub async fn find(&self, selector: &str) -> Result<Element, WebDriverError> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                &json!({ "using": "css selector", "value": selector }),
            )
            .await?;
        element_of(&v)
    }

    /// Every element matching the CSS `selector`, now.
    pub async fn find_all(&self, selector: &str) -> Result<Vec<Element>, WebDriverError> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/elements",
                &json!({ "using": "css selector", "value": selector }),
            )
            .await?;
        v.as_array()
            .map(|a| a.iter().map(element_of).collect())
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    /// Clicks `element`.
    pub async fn click(&self, element: &Element) -> Result<(), WebDriverError> {
        let path = format!("/element/{}/click", element.id);
        self.cmd(reqwest::Method::POST, &path, &json!({}))
            .await
            .map(drop)
    }

    /// Types `text` into `element` (after clearing it).
    pub async fn type_into(&self, element: &Element, text: &str) -> Result<(), WebDriverError> {
        let clear = format!("/element/{}/clear", element.id);
        self.cmd(reqwest::Method::POST, &clear, &json!({})).await?;
        let path = format!("/element/{}/value", element.id);
        self.cmd(reqwest::Method::POST, &path, &json!({ "text": text }))
            .await
            .map(drop)
    }

    /// The rendered text of `element`.
    pub async fn text(&self, element: &Element) -> Result<String, WebDriverError> {
        let path = format!("/element/{}/text", element.id);
        let v = self.cmd(reqwest::Method::GET, &path, &Value::Null).await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and answers its
    /// return value.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value, WebDriverError> {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            &json!({ "script": script, "args": args }),
        )
        .await
    }

    /// Runs `script` in the page; it ends by calling `arguments[arguments.length - 1](value)`.
    pub async fn execute_async(
        &self,
        script: &str,
        args: Vec<Value>,
    ) -> Result<Value, WebDriverError> {
        self.cmd(
            reqwest::Method::POST,
            "/execute/async",
            &json!({ "script": script, "args": args }),
        )
        .await
    }

    /// Waits inside the page until the JavaScript expression `condition` is truthy (checked on
    /// every change of the document and every animation frame), and answers its value; fails
    /// with `script timeout` after `within`. The expression is evaluated by the driver's script
    /// runner, so the page's Content-Security-Policy does not stop it.
    pub async fn wait_for(
        &self,
        condition: &str,
        within: Duration,
    ) -> Result<Value, WebDriverError> {
        let ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX);
        self.cmd(
            reqwest::Method::POST,
            "/timeouts",
            &json!({ "script": ms + 1000 }),
        )
        .await?;
        let script = format!(
            r#"const done = arguments[arguments.length - 1];
const check = () => {{ try {{ return ({condition}); }} catch (e) {{ return null; }} }};
let settled = false;
const finish = (v) => {{ if (!settled) {{ settled = true; obs.disconnect(); clearTimeout(timer); done(v); }} }};
const obs = new MutationObserver(() => {{ const v = check(); if (v) finish(v); }});
const timer = setTimeout(() => finish({{ __timeout: true }}), {ms});
const tick = () => {{ if (settled) return; const v = check(); if (v) finish(v); else requestAnimationFrame(tick); }};
obs.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }});
tick();"#
        );
        let v = self.execute_async(&script, Vec::new()).await?;
        if v.get("__timeout").is_some() {
            return Err(WebDriverError {
                error: "script timeout".into(),
                message: format!("`{condition}` not true within {within:?}"),
            });
        }
        Ok(v)
    }

    /// The text of the open alert, confirm or prompt dialog, if one is open.
    pub async fn alert_text(&self) -> Result<Option<String>, WebDriverError> {
        match self
            .cmd(reqwest::Method::GET, "/alert/text", &Value::Null)
            .await
        {
            Ok(v) => Ok(Some(v.as_str().unwrap_or_default().to_string())),
            Err(e) if e.error == "no such alert" => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Saves a PNG screenshot of the window to `path` (creating its folder).
    pub async fn screenshot(&self, path: &Path) -> Result<(), WebDriverError> {
        let v = self
            .cmd(reqwest::Method::GET, "/screenshot", &Value::Null)
            .await?;
        let png = decode_base64(v.as_str().unwrap_or_default())
            .ok_or_else(|| transport("screenshot is not base64"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(transport)?;
        }
        std::fs::write(path, png).map_err(transport)
    }

    /// Sets the window size in CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) -> Result<(), WebDriverError> {
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            &json!({ "width": width, "height": height }),
        )
        .await
        .map(drop)
    }

    /// Runs the Chrome DevTools Protocol command `cmd` with `params` through chromedriver's
    /// `goog/cdp/execute` (for instance `Emulation.setEmulatedMedia` to emulate
    /// `prefers-color-scheme`), and answers its result.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Result<Value, WebDriverError> {
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            &json!({ "cmd": cmd, "params": params }),
        )
        .await
    }

    /// Presses and releases each key of `keys` in turn, as a keyboard would, on whatever has
    /// the focus (W3C key codes: `\u{E004}` Tab, `\u{E007}` Enter).
    pub async fn press(&self, keys: &str) -> Result<(), WebDriverError> {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|k| {
                let k = k.to_string();
                [
                    json!({ "type": "keyDown", "value": k }),
                    json!({ "type": "keyUp", "value": k }),
                ]
            })
            .collect();
        let body = json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": actions }] });
        self.cmd(reqwest::Method::POST, "/actions", &body)
            .await
            .map(drop)
    }

    /// Ends the session and the browser now (dropping does the same, blocking).
    pub async fn quit(self) {
        let _ = self
            .cmd(reqwest::Method::DELETE, "", &Value::Null)
            .await
            .map_err(|e| tracing::debug!(error = %e, "webdriver session not deleted"));
        // Dropping now finds no session left: the blocking delete answers at once.
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends the browser cleanly (a blocking HTTP DELETE, safe inside an async runtime); the
        // driver's process group is then stopped by `Driver`'s drop.
        let request = format!(
            "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            self.session_id
        );
        let port = self.driver.port;
        let ended = std::thread::spawn(move || {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .ok()?;
            stream.write_all(request.as_bytes()).ok()?;
            let mut sink = Vec::new();
            stream.take(1 << 16).read_to_end(&mut sink).ok()
        });
        let _ = ended.join();
    }
}

async fn command(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: &Value,
) -> Result<Value, WebDriverError> {
    let mut request = http.request(method.clone(), url);
    if method != reqwest::Method::GET && method != reqwest::Method::DELETE {
        request = request.json(body);
    }
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    let mut answer: Value = response.json().await.map_err(transport)?;
    let value = answer.get_mut("value").map(Value::take).unwrap_or_default();
    if status.is_success() {
        // A new session answers `{value: {sessionId, capabilities}}`.
        return Ok(value);
    }
    Err(WebDriverError {
        error: value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_string(),
        message: value
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .take(2000)
            .collect(),
    })
}

fn element_of(v: &Value) -> Result<Element, WebDriverError> {
    v.get(ELEMENT_KEY)
        .and_then(Value::as_str)
        .map(|id| Element { id: id.to_string() })
        .ok_or_else(|| transport(format!("no element reference in {v}")))
}

fn find_program(var: &str, name: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{var}={} is not a file", p.display()))
        };
    }
    let usr = PathBuf::from("/usr/bin").join(name);
    if usr.is_file() {
        return Ok(usr);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("no {name} (apt-get install chromium chromium-driver, or set {var})")
        })
}

/// Standard base64 (the screenshot), padding optional; `None` on a bad character.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode_base64("aGVsbG8").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode_base64("aGk*"), None);
    }

    #[tokio::test]
    async fn a_page_is_driven_in_headless_chromium() {
        let Some(browser) = Browser::start_or_skip("a_page_is_driven_in_headless_chromium").await
        else {
            return;
        };
        let page = "data:text/html,<p id=p>hi</p><input id=i><button id=b>go</button>";
        browser.goto(page).await.unwrap();
        let p = browser.find("#p").await.unwrap();
        assert_eq!(browser.text(&p).await.unwrap(), "hi");
        let input = browser.find("#i").await.unwrap();
        browser.type_into(&input, "typed").await.unwrap();
        browser
            .execute(
                "document.getElementById('b').onclick = () => setTimeout(() => { document.getElementById('p').textContent = document.getElementById('i').value; }, 10);",
                Vec::new(),
            )
            .await
            .unwrap();
        browser
            .click(&browser.find("#b").await.unwrap())
            .await
            .unwrap();
        let seen = browser
            .wait_for(
                "document.getElementById('p').textContent === 'typed' && 'yes'",
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        assert_eq!(seen, json!("yes"));
        let missed = browser
            .wait_for("false", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(missed.error, "script timeout");
        assert_eq!(browser.alert_text().await.unwrap(), None);
        assert_eq!(
            browser.find("#nope").await.unwrap_err().error,
            "no such element"
        );
        let shot = std::env::temp_dir().join(format!("clawbus-shot-{}.png", std::process::id()));
        browser.screenshot(&shot).await.unwrap();
        let png = std::fs::read(&shot).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
        let _ = std::fs::remove_file(&shot);
        browser.quit().await;
    }
}
