//! MCP over Streamable HTTP against the official Python SDK's server (`testdata/server.py http
//! PORT`, FastMCP's `streamable-http` transport on 127.0.0.1): tools listed and called, by hand
//! and by an agent on the scripted model; a header from `headers_env` reaches the server and its
//! value shows nowhere (tool result, model request, transcript, state files, log lines).

use super::*;
use crate::mcp::McpServers;
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncBufReadExt;

/// The header sent, and the variable its value comes from: Cargo sets it for the test process,
/// so it is a secret with a value no test writes.
pub(super) const HEADER: &str = "X-Clawbus-Test";
pub(super) const VAR: &str = "CARGO_MANIFEST_DIR";

/// The Python server over HTTP; killed when dropped.
pub(super) struct HttpServer {
    _child: tokio::process::Child,
    pub(super) url: String,
}

/// Starts the server on a free loopback port and waits (bounded) until uvicorn says it listens.
pub(super) async fn http_server(py: &str) -> HttpServer {
    python_server(py, "http", "/mcp").await
}

/// The server with transport `mode` (`http`, or `sse` for the older HTTP+SSE), at `path`.
pub(super) async fn python_server(py: &str, mode: &str, path: &str) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(py)
        .arg(server_script())
        .args([mode, &port.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::time::timeout(BOUND, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("Uvicorn running on") {
                return;
            }
        }
        panic!("the HTTP server exited before it listened");
    })
    .await
    .expect("the HTTP server listens within the bound");
    // Its later lines are read so its stderr never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpServer {
        _child: child,
        url: format!("http://127.0.0.1:{port}{path}"),
    }
}

pub(super) fn http_toml(url: &str) -> String {
    format!(
        "[mcp.servers.h]\nurl = {url:?}\nheaders_env = {{ {HEADER} = {VAR:?} }}\ntimeout = \"30s\"\n"
    )
}

/// Log lines written while a test runs on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The thread whose log lines [`capture_this_thread`] keeps.
static CAPTURED_THREAD: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);

/// Installs (once) a global subscriber that keeps the DEBUG and higher lines of the thread that
/// called this last. Global with a per-event filter, so no callsite's cached interest can hide a
/// line from it (a scoped subscriber races with other tests' threads).
fn capture_this_thread() -> Captured {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    static CAPTURE: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    *CAPTURED_THREAD.lock().unwrap() = Some(std::thread::current().id());
    CAPTURE
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
                    *meta.level() <= tracing::Level::DEBUG
                        && *CAPTURED_THREAD.lock().unwrap() == Some(std::thread::current().id())
                }));
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .expect("no other global subscriber in this test binary");
            captured
        })
        .clone()
}

#[tokio::test]
async fn tools_of_an_http_server_are_listed_and_called_with_a_header_whose_value_never_shows() {
    let Some(py) = python() else { return };
    // Every line down to DEBUG (the daemon logs INFO by default) written on this thread. At
    // TRACE, rmcp logs each raw message a server sends, so a server that echoes a header (as
    // `header` does) shows it there.
    let logs = capture_this_thread();
    let server = http_server(&py).await;
    let (dir, config) = project(
        &http_toml(&server.url),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let status = mcp.status().await;
    assert_eq!(status[0].error, None, "{status:?}");
    assert!(status[0].protocol.is_some(), "{status:?}");
    let seen = lists_and_calls_add_and_header(&config, &mcp, dir.path()).await;
    mcp.stop().await;
    let value = std::env::var(VAR).unwrap();
    assert!(!seen.text.contains(&value), "{}", seen.text);
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        logged.contains("MCP server started"),
        "the logs were captured: {logged}"
    );
    assert!(
        !logged.contains(&value),
        "a header value is never logged: {logged}"
    );
}

#[actix_rt::test]
async fn an_agent_calls_a_tool_over_http_and_the_header_value_reaches_no_model_request_nor_file() {
    let Some(py) = python() else { return };
    let server = http_server(&py).await;
    an_agent_calls_add_and_header_and_the_value_shows_nowhere(&server.url).await;
}

/// An agent on the scripted model calls `add` and `header` of the server at `url` (reached with
/// [`http_toml`]'s header): the result reaches the model, the header's value no model request
/// and no file of the project (transcripts included).
pub(super) async fn an_agent_calls_add_and_header_and_the_value_shows_nowhere(url: &str) {
    use clawbus_testkit::{ScriptedServer, Turn};
    let model = ScriptedServer::start(vec![
        Turn::tool_call("mcp__h__add", json!({"a": 20, "b": 22})),
        Turn::tool_call("mcp__h__header", json!({"name": HEADER})),
        Turn::text("the sum is 42"),
    ])
    .await;
    let toml = format!(
        "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n\n{}",
        model.base_url(),
        http_toml(url)
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    run_agent(config, "add 20 and 22").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(offered(&requests[0]).contains(&"mcp__h__add".to_string()));
    let sent = serde_json::to_string(&requests).unwrap();
    assert!(
        sent.contains("sum=42"),
        "the result reached the model: {sent}"
    );
    assert!(sent.contains(&format!("[REDACTED:{VAR}]")), "{sent}");
    let value = std::env::var(VAR).unwrap();
    assert!(
        !sent.contains(&value),
        "a header value never reaches the model"
    );
    // The transcript and every other state file.
    for file in files_under(dir.path()) {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&value),
            "{} holds the header value",
            file.display()
        );
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `add` and `header` are listed and called through the agent's tools; the header reached the
/// server with the variable's value, which shows only redacted. What `header` answered.
pub(super) async fn lists_and_calls_add_and_header(
    config: &Config,
    mcp: &McpServers,
    dir: &Path,
) -> crate::tools::ToolOutput {
    for expected in ["mcp__h__add", "mcp__h__header"] {
        assert!(
            mcp.tool_names().iter().any(|n| n == expected),
            "{:?}",
            mcp.tool_names()
        );
    }
    let secrets = Arc::new(crate::secrets::Secrets::from_config(config));
    let set = tools(config, mcp).with_secrets(secrets);
    let sum = call(&set, dir, "mcp__h__add", json!({"a": 2, "b": 40})).await;
    assert!(!sum.is_error && sum.text.contains("sum=42"), "{}", sum.text);
    let seen = call(&set, dir, "mcp__h__header", json!({"name": HEADER})).await;
    assert!(
        seen.text.contains(&format!("{HEADER}: [REDACTED:{VAR}]")),
        "the header reached the server with the variable's value, redacted here: {}",
        seen.text
    );
    seen
}
