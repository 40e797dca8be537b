//! `network = "allow"` on a real bubblewrap, through `exec`: curl inside reaches exactly the
//! allowed name through the daemon's proxy, and nothing else leaves. The forwarder inside is this
//! test binary (`Forwarder::test_binary`); "example.test" reaches a loopback server through the
//! tests' fixed DNS answers, which the config cannot reach.

use super::sandboxed::{set, tight, usable};
use super::*;
use crate::tools::sandbox::proxy::{FakeDns, Resolver};
use crate::tools::sandbox::{Forwarder, Sandbox};
use clawbus_core::config::{NetworkMode, SandboxDef};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Whether curl is there to be the client inside; prints why not.
fn curl() -> bool {
    if Path::new("/usr/bin/curl").is_file() {
        return true;
    }
    println!("skipped: curl is not installed (/usr/bin/curl)");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must install curl"
    );
    false
}

/// A loopback HTTP server answering every request with `hello from <port>`.
async fn server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 1024];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!("hello from {}", addr.port());
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _written = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

fn allow(domains: &[&str]) -> SandboxDef {
    SandboxDef {
        network: set(NetworkMode::Allow),
        allow_domains: set(domains.iter().map(|d| d.to_string()).collect()),
        memory_mb: set(256),
        max_processes: set(64),
        timeout: set(Duration::from_secs(20)),
        ..tight()
    }
}

impl Fx {
    fn allowed(&self, def: SandboxDef, dns: FakeDns) -> ExecTool {
        let exec = ExecDef {
            security: ExecSecurity::Full,
            shell: true,
            ..ExecDef::default()
        };
        let sandbox = Sandbox::new(def)
            .with_forwarder(Forwarder::test_binary())
            .with_resolver(Resolver::Fake(Arc::new(dns)));
        self.tool(exec, &[]).with_sandbox(sandbox)
    }
}

#[tokio::test]
async fn allow_reaches_exactly_the_allowed_name_through_the_proxy() {
    if !usable() || !curl() {
        return;
    }
    let f = fx();
    let addr = server().await;
    let dns = FakeDns {
        pinned: vec![("example.test".into(), addr)],
        ..FakeDns::default()
    };
    let tool = f.allowed(allow(&["example.test"]), dns);
    let port = addr.port();
    let get = format!("curl -sS -m 10 http://example.test:{port}/");
    let out = f.exec(&tool, &get, None).await;
    assert!(
        !out.is_error && out.text.contains(&format!("hello from {port}")),
        "a plain GET through the proxy: {}",
        out.text
    );
    let tunnel = format!("curl -sS -m 10 --proxytunnel http://example.test:{port}/");
    let out = f.exec(&tool, &tunnel, None).await;
    assert!(
        out.text.contains(&format!("hello from {port}")),
        "a CONNECT tunnel (as https uses): {}",
        out.text
    );
    let env = f.exec(&tool, "env", None).await;
    for name in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
    ] {
        assert!(
            env.text
                .contains(&format!("\n{name}=http://127.0.0.1:3128\n")),
            "{name}: {}",
            env.text
        );
    }
}

#[tokio::test]
async fn allow_refuses_other_names_and_non_public_addresses_and_direct_connections() {
    if !usable() || !curl() {
        return;
    }
    let f = fx();
    let addr = server().await;
    let dns = FakeDns {
        pinned: vec![("other.test".into(), addr)],
        answers: vec![
            ("intranet.test".into(), "10.0.0.1".parse().unwrap()),
            ("metadata.test".into(), "169.254.169.254".parse().unwrap()),
            ("loop.test".into(), "127.0.0.1".parse().unwrap()),
        ],
    };
    let def = allow(&["intranet.test", "metadata.test", "loop.test", "localhost"]);
    let tool = f.allowed(def, dns);
    let port = addr.port();
    for (url, refusal) in [
        (
            format!("http://other.test:{port}/"),
            "not in sandbox.allow_domains".to_string(),
        ),
        (
            "http://intranet.test/".into(),
            "10.0.0.1, a private address".into(),
        ),
        (
            "https://metadata.test/".into(),
            "169.254.169.254, a link-local (cloud metadata)".into(),
        ),
        (
            "http://loop.test/".into(),
            "127.0.0.1, a loopback address".into(),
        ),
        // The system's resolver: a real name for a loopback address.
        (
            format!("http://localhost:{port}/"),
            "a loopback address".into(),
        ),
    ] {
        // -v shows the proxy's refusal for a CONNECT too (curl prints no body of a failed tunnel).
        let cmd = format!("curl -sS -v -m 10 {url} 2>&1");
        let out = f.exec(&tool, &cmd, None).await;
        let text = out.text.replace("\\\"", "\"");
        assert!(
            text.contains("403") && !text.contains(&format!("hello from {port}")),
            "{url} must be refused: {}",
            out.text
        );
        if url.starts_with("http://") {
            assert!(text.contains(&refusal), "{url}: {refusal}: {}", out.text);
        }
    }
    let direct = format!(
        "curl -sS -m 5 --noproxy '*' http://127.0.0.1:{port}/ || echo direct-failed; \
         bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null || echo tcp-failed"
    );
    let out = f.exec(&tool, &direct, None).await;
    assert!(
        out.text.contains("direct-failed") && out.text.contains("tcp-failed"),
        "no network but the proxy: {}",
        out.text
    );
}
