//! The fallback to the older HTTP+SSE transport: against the official Python SDK's server
//! (`testdata/server.py sse PORT`, FastMCP's `sse` transport, which answers 405 to Streamable
//! HTTP's POST on `/sse`) its tools are listed and called, by hand and by an agent on the scripted
//! model, with a header from `headers_env` that reaches the server and whose value shows nowhere;
//! and against a server written here that answers 404 and names an endpoint on another origin,
//! which is refused.

use super::http::{VAR, http_toml, python_server};
use super::*;
use crate::mcp::McpServers;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_server_that_only_speaks_http_sse_is_reached_over_the_fallback_with_its_header() {
    let Some(py) = python() else { return };
    let server = python_server(&py, "sse", "/sse").await;
    let (dir, config) = project(
        &http_toml(&server.url),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let status = mcp.status().await;
    assert_eq!(status[0].error, None, "{status:?}");
    assert_eq!(status[0].transport.as_deref(), Some("sse"), "{status:?}");
    assert_eq!(
        status[0].version.as_deref(),
        Some("clawbus-test"),
        "{status:?}"
    );
    let seen = super::http::lists_and_calls_add_and_header(&config, &mcp, dir.path()).await;
    let value = std::env::var(VAR).unwrap();
    assert!(!seen.text.contains(&value), "{}", seen.text);
    mcp.stop().await;
}

#[actix_rt::test]
async fn an_agent_calls_a_tool_over_the_http_sse_fallback_and_the_header_value_shows_nowhere() {
    let Some(py) = python() else { return };
    let server = python_server(&py, "sse", "/sse").await;
    super::http::an_agent_calls_add_and_header_and_the_value_shows_nowhere(&server.url).await;
}

/// A server that answers every POST 404 and every GET with an event stream whose endpoint is
/// on another origin; it counts the GETs.
async fn other_origin_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let gets = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = gets.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                // The request head (the bodies here are small and come with it or are ignored).
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer: &[u8] = if head.starts_with(b"GET ") {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: endpoint\ndata: http://other.invalid:9/messages/\n\n"
                } else {
                    b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot found"
                };
                conn.write_all(answer).await.ok();
                conn.shutdown().await.ok();
            });
        }
    });
    (format!("http://127.0.0.1:{port}/sse"), gets)
}

#[tokio::test]
async fn an_http_sse_endpoint_on_another_origin_is_refused() {
    let (url, gets) = other_origin_server().await;
    let (_dir, config) = project(
        &format!("[mcp.servers.h]\nurl = {url:?}\ntimeout = \"30s\"\n"),
        "[tools]\nallow = [\"group:mcp\"]\n",
    );
    let mcp = McpServers::start(&config.mcp).await;
    let status = mcp.status().await;
    let error = status[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("http://other.invalid:9/messages/")
            && error.contains("not on the configured URL's origin (http://127.0.0.1:"),
        "the 404 led to the fallback, whose endpoint was refused: {status:?}"
    );
    // The keeper may have tried again since (after its backoff).
    assert!(gets.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert!(mcp.tool_names().is_empty(), "{:?}", mcp.tool_names());
    mcp.stop().await;
}
