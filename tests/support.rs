//! Shared fixtures: a config folder in a tempdir, a daemon on a free port, HTTP helpers.

use clawbus::config::{self, Config, LoadOptions};
use clawbus::daemon::{Daemon, StartOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A safety net for awaits; never a synchronisation device. Generous: a debug daemon on a
/// 2-core machine that is also building can take tens of seconds for a burst of 200 turns.
pub(crate) const NET: Duration = Duration::from_secs(90);

/// How long [`eventually`] sleeps between two checks.
const POLL: Duration = Duration::from_millis(5);

/// Polls `check` until it holds, sleeping a little between checks; fails the test, naming `what`
/// (written as the condition awaited), when it still does not hold after [`NET`].
pub(crate) async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let polled = tokio::time::timeout(NET, async {
        while !check().await {
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    if polled.is_err() {
        panic!("timed out after {NET:?} waiting until {what}");
    }
}

/// Like [`eventually`], with `limit` instead of [`NET`]: for a wait whose bound is what the
/// test checks ("within 2 s of the restart").
pub(crate) async fn eventually_within(
    limit: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> bool,
) {
    let polled = tokio::time::timeout(limit, async {
        while !check().await {
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    if polled.is_err() {
        panic!("timed out after {limit:?} waiting until {what}");
    }
}

/// A throwaway project folder: `clawbus.toml`, `agents.d/`, `.clawbus/`.
pub(crate) struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
        Self { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn config_path(&self) -> PathBuf {
        self.path().join("clawbus.toml")
    }

    pub(crate) fn agents_dir(&self) -> PathBuf {
        self.path().join("agents.d")
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        self.path().join(".clawbus")
    }

    /// Writes a file relative to the project folder, creating parents.
    pub(crate) fn write(&self, rel: &str, content: &str) -> &Self {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    /// A config with one OpenAI-compatible provider `mock` at `base_url`.
    pub(crate) fn with_mock_provider(
        &self,
        base_url: &str,
        timeout: &str,
        max_retries: u32,
    ) -> &Self {
        self.write(
            "clawbus.toml",
            &format!(
                "[providers.mock]\nkind = \"openai\"\nbase_url = \"{base_url}\"\ntimeout = \"{timeout}\"\nmax_retries = {max_retries}\n\n[defaults]\nmodel = \"mock/test-model\"\n"
            ),
        )
    }

    /// A config with the `mock` provider at `base_url` (10 s timeout, no retries) plus `extra` TOML.
    pub(crate) fn with_mock_and(&self, base_url: &str, extra: &str) -> &Self {
        self.write(
            "clawbus.toml",
            &format!(
                "{extra}\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{base_url}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/m\"\n"
            ),
        )
    }

    pub(crate) fn options(&self) -> LoadOptions {
        LoadOptions::in_folder(self.path())
    }

    pub(crate) fn load(&self) -> Config {
        match config::load(&self.options()) {
            Ok(c) => c,
            Err(report) => panic!("the test config must load:\n{}", report.render()),
        }
    }

    /// Starts the daemon on a free loopback port.
    pub(crate) async fn start(&self) -> Daemon {
        let opts = StartOptions::free_port();
        Daemon::start(self.load(), opts).await.unwrap()
    }
}

/// A gateway a test talks to over HTTP: the in-process [`Daemon`] or a `clawbus up` child.
pub(crate) trait Gateway {
    /// The base URL, `http://127.0.0.1:PORT`.
    fn base_url(&self) -> String;
    /// The bearer token.
    fn bearer(&self) -> &str;
}

impl Gateway for Daemon {
    fn base_url(&self) -> String {
        self.url()
    }

    fn bearer(&self) -> &str {
        self.token()
    }
}

/// POSTs a task with the gateway's token; returns status and JSON body.
pub(crate) async fn post_task(gateway: &impl Gateway, agent: &str, body: Value) -> (u16, Value) {
    post_json(gateway, &format!("/v1/agents/{agent}/tasks"), body).await
}

/// POSTs `body` to a gateway path with the gateway's token; returns status and JSON body.
pub(crate) async fn post_json(gateway: &impl Gateway, path: &str, body: Value) -> (u16, Value) {
    send(gateway, reqwest::Method::POST, path, Some(body)).await
}

/// Sends `method` to a gateway path (with `body` as JSON, if any) with the gateway's token;
/// returns status and JSON body (`null` when there is none).
pub(crate) async fn send(
    gateway: &impl Gateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", gateway.base_url()))
        .bearer_auth(gateway.bearer())
        .timeout(NET);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// GETs a gateway path with the gateway's token.
async fn get(gateway: &impl Gateway, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{}{path}", gateway.base_url()))
        .bearer_auth(gateway.bearer())
        .timeout(NET)
        .send()
        .await
        .unwrap()
}

/// The names of the tools offered in a recorded model request.
pub(crate) fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The `messages[].role` list of a recorded model request.
pub(crate) fn roles(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `f` in its own actix System on its own thread, and drops everything it made before
/// returning: a process life that ends. The caller's runtime keeps serving meanwhile.
pub(crate) async fn in_fresh_system<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || actix_rt::System::new().block_on(f()))
            .join()
            .expect("the isolated system must not panic")
    })
    .await
    .unwrap()
}

impl Project {
    /// The real `clawbus` binary, run in the project folder with no `CLAWBUS_*` settings inherited.
    pub(crate) fn clawbus(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_clawbus"));
        cmd.current_dir(self.path())
            .env_remove("CLAWBUS_TOKEN")
            .env_remove("CLAWBUS_URL")
            .env_remove("CLAWBUS_MODEL")
            .env_remove("CLAWBUS_CONFIG")
            .env_remove("CLAWBUS_AGENTS")
            .env_remove("CLAWBUS_STATE_DIR")
            .env_remove("CLAWBUS_BUS")
            .env_remove("CLAWBUS_NODE_ID")
            .env_remove("CLAWBUS_AGENTS_HERE")
            .env("RUST_LOG", "warn");
        cmd
    }
}

/// Runs a command to completion (at most [`NET`]) off the async threads, so the test's servers
/// keep serving.
pub(crate) async fn run_cmd(cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap()
}

/// GETs a gateway path with the gateway's token and decodes the JSON answer.
pub(crate) async fn get_json(gateway: &impl Gateway, path: &str) -> Value {
    get(gateway, path).await.json().await.unwrap()
}

/// Runs `f` on its own thread and waits at most [`NET`] for its answer; `what` names it in the
/// failure. The thread is left behind when it overruns (the test fails anyway).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(NET) {
        Ok(v) => v,
        Err(_) => panic!("timed out after {NET:?} waiting for {what}"),
    }
}

/// The first line a child writes on its stdout (e.g. `listening on …`), waiting at most [`NET`].
pub(crate) fn first_line(stdout: std::process::ChildStdout) -> String {
    use std::io::BufRead;
    within("the first line on a child's stdout", move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        line
    })
}

/// Waits at most [`NET`] for a child to exit; kills it and fails the test when it does not.
pub(crate) fn wait_child(child: std::process::Child) -> std::process::ExitStatus {
    let pid = child.id();
    let mut child = child;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait().unwrap());
    });
    match rx.recv_timeout(NET) {
        Ok(status) => status,
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("child {pid} still running after {NET:?}");
        }
    }
}

/// Runs a command to completion, at most [`NET`] (see [`run_cmd`] from async tests).
pub(crate) fn output(mut cmd: std::process::Command) -> std::process::Output {
    within("a command to finish", move || cmd.output().unwrap())
}

/// [`wait_child`] off the async threads, so the test's servers keep serving.
pub(crate) async fn wait_child_async(child: std::process::Child) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || wait_child(child))
        .await
        .unwrap()
}

/// [`first_line`] off the async threads, so the test's servers keep serving.
pub(crate) async fn first_line_async(stdout: std::process::ChildStdout) -> String {
    tokio::task::spawn_blocking(move || first_line(stdout))
        .await
        .unwrap()
}

/// Reads a child's output (stdout or stderr) line by line until one equals `line`, waiting at
/// most [`NET`]; answers the reader, to keep the pipe open for what the child writes later.
pub(crate) async fn line_async<R: std::io::Read + Send + 'static>(
    from: R,
    line: &str,
) -> std::io::BufReader<R> {
    use std::io::BufRead;
    let wanted = line.to_string();
    tokio::task::spawn_blocking(move || {
        let what = format!("the line {wanted:?} from a child");
        within(&what, move || {
            let mut reader = std::io::BufReader::new(from);
            let mut got = String::new();
            loop {
                got.clear();
                let read = reader.read_line(&mut got).unwrap();
                assert!(read > 0, "the child's output ended before {wanted:?}");
                if got.trim_end() == wanted {
                    return reader;
                }
            }
        })
    })
    .await
    .unwrap()
}

/// The last user message of a recorded model request.
pub(crate) fn last_user(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The tool results of a recorded model request, in order.
pub(crate) fn tool_results(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// GETs a gateway path with the gateway's token and returns the body as text (an SSE stream
/// that ends, or `/metrics`, for example).
pub(crate) async fn get_text(gateway: &impl Gateway, path: &str) -> String {
    get(gateway, path).await.text().await.unwrap()
}

/// Asserts that a finished command exited 0 (showing its stderr when not) and returns its stdout.
pub(crate) fn succeeded(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits at most [`NET`] for a child with piped output to exit, and collects what it wrote.
pub(crate) fn wait_output(child: std::process::Child) -> std::process::Output {
    within("a child to finish", move || {
        child.wait_with_output().unwrap()
    })
}

/// The user messages of session `key` that announce how a task it started ended.
pub(crate) async fn announcements(gateway: &impl Gateway, key: &str) -> Vec<String> {
    let session = get_json(gateway, &format!("/v1/sessions/{key}")).await;
    session["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["message"]["role"] == "user")
        .filter_map(|e| e["message"]["content"].as_str())
        .filter(|t| t.starts_with("[task result]"))
        .map(str::to_string)
        .collect()
}
