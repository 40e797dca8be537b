//! The web tools and secret redaction in whole turns: a scripted model calls `web_fetch`,
//! `web_search` and `exec`; the test checks what reached the model and what was written down.

use crate::support::{Project, post_task};
use axum::Router;
use axum::routing::get;
use clawbus::testkit::{ScriptedServer, Turn};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

const ARTICLE: &str = r#"<!DOCTYPE html><html><head><title>Harbour Report</title>
<script>var tracker = "TRACKERSCRIPT";</script></head><body>
<nav><a href="/">Home</a> <a href="/news">NAVLINKS</a></nav>
<article><h1>Harbour Report</h1>
<p>The boats came in at dawn and the harbour master counted every one of them, writing each name in the ledger as his father had done before him, and his grandfather before that.</p>
<p>By noon the tide had turned, the gulls had settled on the breakwater, and the market was selling the morning's catch to the restaurants along the quay.</p>
<p>In the evening the lamps were lit along the pier and the last boat, late as always, came round the point with its nets full and its crew singing.</p>
</article><footer>FOOTERTEXT</footer></body></html>"#;

/// Serves `/article` (HTML) and `/secret` (text holding `secret`) on 127.0.0.1.
async fn site(secret: &'static str) -> SocketAddr {
    let app = Router::new()
        .route(
            "/article",
            get(|| async { ([("content-type", "text/html; charset=utf-8")], ARTICLE) }),
        )
        .route(
            "/secret",
            get(move || async move {
                (
                    [("content-type", "text/plain")],
                    format!("config dump: api_key={secret}\n"),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The text of the tool message in the last recorded model request.
fn tool_results(server: &ScriptedServer) -> Vec<String> {
    let reqs = server.requests();
    let last = reqs.last().expect("the model was called");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn project(server: &ScriptedServer, web: &str) -> Project {
    let p = Project::new();
    p.write(
        "clawbus.toml",
        &format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"10s\"\nmax_retries = 0\n\n[defaults]\nmodel = \"mock/test-model\"\n\n{web}",
            server.base_url()
        ),
    )
    .write("agents.d/reader.toml", "description = \"Reads the web.\"\n");
    p
}

#[actix_rt::test]
async fn web_fetch_refuses_loopback_unless_the_host_is_allowed() {
    let addr = site("unused-secret-value").await;
    let url = format!("http://{addr}/article");
    for (web, allowed) in [
        ("", false),
        ("[web]\nallow_private_hosts = [\"127.0.0.1\"]\n", true),
    ] {
        let server = ScriptedServer::start(vec![
            Turn::tool_call("web_fetch", json!({ "url": url })),
            Turn::text("done"),
        ])
        .await;
        let project = project(&server, web);
        let daemon = project.start().await;
        let (status, body) = post_task(
            &daemon,
            "reader",
            json!({ "text": "read the page", "wait": true }),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["state"], "succeeded", "{body}");
        let first = &server.requests()[0];
        let names = crate::support::offered_tools(first);
        assert!(
            names.contains(&"web_fetch".to_string()),
            "web_fetch is offered: {names:?}"
        );
        let no_search_env = ["BRAVE_API_KEY", "TAVILY_API_KEY", "SEARXNG_URL"]
            .iter()
            .all(|v| std::env::var(v).is_err());
        if no_search_env {
            assert!(
                !names.contains(&"web_search".to_string()),
                "no search provider, no web_search: {names:?}"
            );
        }
        let results = tool_results(&server);
        assert_eq!(results.len(), 1);
        let result = &results[0];
        if allowed {
            assert!(
                result.starts_with(&format!(
                    "<<<EXTERNAL_UNTRUSTED_CONTENT source=\"{url}\">>>\nTitle: Harbour Report\nURL: {url}\n"
                )),
                "{result}"
            );
            assert!(result.contains("the harbour master counted"), "{result}");
            for gone in ["TRACKERSCRIPT", "NAVLINKS", "FOOTERTEXT"] {
                assert!(!result.contains(gone), "{gone} is stripped: {result}");
            }
            assert!(
                result.ends_with("<<<END_EXTERNAL_UNTRUSTED_CONTENT>>>"),
                "{result}"
            );
        } else {
            let err: Value = serde_json::from_str(result).unwrap();
            assert_eq!(err["error"]["type"], "url_refused", "{result}");
            assert!(
                err["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("loopback"),
                "{result}"
            );
        }
    }
}

/// The real binary with a planted secret in its environment and a SearXNG instance configured:
/// search, fetch and exec output reach the model redacted and wrapped, and nothing written under
/// the state folder (transcripts, journal, spilled outputs) holds the secret.
#[actix_rt::test]
async fn secrets_are_redacted_from_search_fetch_and_exec_output_end_to_end() {
    const SECRET: &str = "sk-e2e-planted-4f9c2a7b1d";
    let addr = site(SECRET).await;
    let searx = Router::new().route(
        "/search",
        get(|| async {
            (
                [("content-type", "application/json")],
                json!({
                    "query": "harbour",
                    "number_of_results": 0,
                    "results": [{ "url": "https://harbour.example/", "title": "Harbour",
                                  "content": format!("leaked {SECRET} here"), "engine": "brave" }],
                    "answers": [], "suggestions": [], "infoboxes": [], "unresponsive_engines": []
                })
                .to_string(),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let searx_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, searx).await.unwrap() });

    let server = ScriptedServer::start(vec![
        Turn::tool_call("web_search", json!({ "query": "harbour" })),
        Turn::tool_call(
            "web_fetch",
            json!({ "url": format!("http://{addr}/secret") }),
        ),
        Turn::tool_call("exec", json!({ "command": "cat key.txt" })),
        Turn::text("done"),
    ])
    .await;
    let project = project(&server, "[web]\nallow_private_hosts = [\"127.0.0.1\"]\n");
    project.write(
        "clawbus.toml",
        &std::fs::read_to_string(project.config_path())
            .unwrap()
            .replace(
                "max_retries = 0\n",
                "max_retries = 0\napi_key_env = \"MOCK_API_KEY\"\n",
            ),
    );
    project.write(
        "agents.d/reader.toml",
        "description = \"Reads the web.\"\n\n[exec]\nsecurity = \"allowlist\"\nallow = [\"cat *\"]\n",
    );
    // A workspace file holding the secret: the model never writes the secret itself.
    project.write("agents.d/reader/key.txt", &format!("token {SECRET}\n"));
    let bin = env!("CARGO_BIN_EXE_clawbus");
    let mut child = Command::new(bin)
        .current_dir(project.path())
        .args(["up", "--port", "0"])
        .env("MOCK_API_KEY", SECRET)
        .env("SEARXNG_URL", format!("http://{searx_addr}"))
        .env_remove("BRAVE_API_KEY")
        .env_remove("TAVILY_API_KEY")
        .env_remove("CLAWBUS_TOKEN")
        .env_remove("CLAWBUS_URL")
        .env_remove("CLAWBUS_MODEL")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = crate::support::first_line_async(child.stdout.take().unwrap()).await;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let mut post = Command::new(bin);
    post.current_dir(project.path())
        .args([
            "post",
            "agent.reader",
            "look it up",
            "--wait",
            "--url",
            &url,
        ])
        .env_remove("CLAWBUS_TOKEN");
    // Off the test's thread: the scripted model and the sites are served by this runtime.
    let post = crate::support::run_cmd(post).await;
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let exit = crate::support::wait_child_async(child).await;
    assert!(
        post.status.success(),
        "post: {}",
        String::from_utf8_lossy(&post.stderr)
    );
    assert!(exit.success(), "the daemon stops cleanly: {exit}");

    let names = crate::support::offered_tools(&server.requests()[0]);
    assert!(
        names.contains(&"web_search".to_string()),
        "SEARXNG_URL makes web_search available: {names:?}"
    );
    let results = tool_results(&server);
    assert_eq!(results.len(), 3, "{results:#?}");
    assert!(
        results[0].starts_with("<<<EXTERNAL_UNTRUSTED_CONTENT source=\"web_search:searxng\">>>"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("https://harbour.example/"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("leaked [REDACTED:MOCK_API_KEY] here"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("api_key=[REDACTED:MOCK_API_KEY]"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("token [REDACTED:MOCK_API_KEY]"),
        "exec output is redacted: {}",
        results[2]
    );
    for (i, req) in server.requests().iter().enumerate() {
        assert!(
            !req.to_string().contains(SECRET),
            "model request {i} holds the secret"
        );
    }
    // The workspace holds key.txt by design; everything else must be clean.
    let workspaces = project.state_dir().join("workspaces");
    for file in files(&project.state_dir()) {
        if file.starts_with(&workspaces) {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET),
            "{} holds the secret",
            file.display()
        );
    }
}

fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
