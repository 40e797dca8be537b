//! Figures, never asserted: the median time of one MCP tool call over stdio (the Python SDK's
//! server and the rmcp one written here) and over Streamable HTTP (the Python SDK's server)
//! against the built-in `read`, over 1,000 calls each through [`crate::tools::ToolSet::invoke`];
//! and the memory each connected server adds. Run with
//! `cargo test -p clawbus-runtime --lib mcp::tests::figures -- --ignored --nocapture`.

use super::http::{http_server, http_toml};
use super::rust_server::rust_toml;
use super::*;
use crate::mcp::McpServers;
use serde_json::json;

const CALLS: usize = 1000;

/// `VmRSS` of process `pid` (`self` for this one), in KiB.
fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[allow(clippy::disallowed_methods, reason = "a figure measures real time")]
async fn median(set: &ToolSet, dir: &Path, name: &str, args: Value) -> Duration {
    let mut t = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let s = std::time::Instant::now();
        let out = call(set, dir, name, args.clone()).await;
        assert!(!out.is_error, "{}", out.text);
        t.push(s.elapsed());
    }
    t.sort();
    t[CALLS / 2]
}

#[tokio::test]
#[ignore = "a figure, not a test"]
async fn figure_mcp_call_overhead() {
    let Some(py) = python() else { return };
    let http = http_server(&py).await;
    let toml = format!(
        "{}\n{}\n{}",
        mcp_toml(&py, "30s", &[]),
        rust_toml("rs", ""),
        http_toml(&http.url)
    );
    let (dir, config) = project(&toml, "[tools]\nallow = [\"group:mcp\"]\n");
    std::fs::write(dir.path().join("f.txt"), "x").unwrap();
    // One server at a time, to see what each adds to this process, after a first start and
    // stop that pays for what is set up once per process (runtime, SDK, HTTP client).
    let mut warm = config.mcp.clone();
    warm.servers.retain(|n, _| n == "t" || n == "h");
    McpServers::start(&warm).await.stop().await;
    let mut per_server = Vec::new();
    let mut servers = Vec::new();
    for name in ["t", "rs", "h"] {
        let mut one = config.mcp.clone();
        one.servers.retain(|n, _| n == name);
        let before = rss_kib("self");
        let mcp = McpServers::start(&one).await;
        let after = rss_kib("self");
        let own = mcp.pid(name).map(|p| rss_kib(&p.to_string()));
        per_server.push((name, after.saturating_sub(before), own));
        servers.push(mcp);
    }
    for (name, daemon, own) in &per_server {
        eprintln!(
            "server {name}: the client side adds {daemon} KiB RSS here; its own process {}",
            own.map_or("(not a child: HTTP)".to_string(), |k| format!(
                "{k} KiB RSS"
            ))
        );
    }
    let all = McpServers::start(&config.mcp).await;
    let set = tools(&config, &all);
    let read = median(&set, dir.path(), "read", json!({"path": "f.txt"})).await;
    let py_stdio = median(&set, dir.path(), "mcp__t__add", json!({"a": 1, "b": 2})).await;
    let rs_stdio = median(&set, dir.path(), "mcp__rs__echo", json!({"text": "x"})).await;
    let py_http = median(&set, dir.path(), "mcp__h__add", json!({"a": 1, "b": 2})).await;
    eprintln!(
        "median of {CALLS} calls: read {read:?}; stdio Python SDK {py_stdio:?} (+{:?}); stdio rmcp {rs_stdio:?} (+{:?}); Streamable HTTP Python SDK {py_http:?} (+{:?})",
        py_stdio.saturating_sub(read),
        rs_stdio.saturating_sub(read),
        py_http.saturating_sub(read)
    );
    all.stop().await;
    for mcp in servers {
        mcp.stop().await;
    }
}
