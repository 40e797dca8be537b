//! The proxy's decisions over an in-memory client and a real loopback server: the head bounds,
//! the allowlist, and the address guard for names resolving to non-public addresses (through
//! the system's resolver for `localhost`, and through fixed answers otherwise).

use super::head::{self, HeadError, MAX_HEAD_BYTES};
use super::*;
use clawbus_core::config::{NetworkMode, Set};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NET: Duration = Duration::from_secs(10);

fn policy(domains: &[&str], dns: FakeDns) -> Policy {
    let def = SandboxDef {
        network: Set {
            value: NetworkMode::Allow,
            origin: None,
        },
        allow_domains: Set {
            value: domains.iter().map(|d| d.to_string()).collect(),
            origin: None,
        },
        ..SandboxDef::default()
    };
    Policy {
        def: Some(Arc::new(def)),
        resolver: Resolver::Fake(Arc::new(dns)),
        agent: "tester".into(),
        exempt: Vec::new(),
    }
}

/// A server on loopback that answers one request with `hello` and hands back what it read.
async fn server() -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await
            .unwrap();
        got
    });
    (addr, task)
}

/// Sends `request` through the proxy under `policy`; the whole answer.
async fn ask(policy: &Policy, request: &str) -> String {
    let (mut client, proxy_side) = tokio::io::duplex(64 * 1024);
    let policy = policy.clone();
    let serving = tokio::spawn(async move { handle(proxy_side, &policy).await });
    client.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(NET, client.read_to_end(&mut answer))
        .await
        .expect("the proxy answers")
        .unwrap();
    // The server closed; the client closing its side ends the tunnel both ways.
    drop(client);
    tokio::time::timeout(NET, serving).await.unwrap().unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn a_plain_request_goes_on_in_origin_form_without_proxy_headers() {
    let head = b"GET http://Example.Test:8080/a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\nAccept: */*";
    let r = head::parse(head, b"body".to_vec()).unwrap();
    assert!(!r.tunnel);
    assert_eq!((r.host.as_str(), r.port), ("example.test", 8080));
    let sent = String::from_utf8(r.forward).unwrap();
    assert_eq!(
        sent,
        "GET /a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\nbody"
    );
    let c = head::parse(b"CONNECT example.test:443 HTTP/1.1\r\nHost: x", Vec::new()).unwrap();
    assert!(c.tunnel && c.host == "example.test" && c.port == 443);
}

#[test]
fn bad_and_oversized_heads_are_refused() {
    for bad in [
        &b"GET /relative HTTP/1.1"[..],
        b"GET ftp://x/ HTTP/1.1",
        b"CONNECT example.test HTTP/1.1",
        b"GET http://user:pw@example.test/ HTTP/1.1",
        b"GET http://exa mple.test/ HTTP/1.1",
        b"GET http://example.test/ HTTP/2",
        b"GET http://example.test/ HTTP/1.1\r\nno colon",
    ] {
        assert!(
            matches!(head::parse(bad, Vec::new()), Err(HeadError::Malformed(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let many: String = (0..=head::MAX_HEADERS)
        .map(|i| format!("\r\nX-{i}: y"))
        .collect();
    let head = format!("GET http://example.test/ HTTP/1.1{many}");
    assert_eq!(
        head::parse(head.as_bytes(), Vec::new()),
        Err(HeadError::TooLarge)
    );
}

#[tokio::test]
async fn a_head_past_the_bound_gets_431_without_reading_on() {
    let p = policy(&["example.test"], FakeDns::default());
    let long = format!(
        "GET http://example.test/ HTTP/1.1\r\nX: {}",
        "a".repeat(MAX_HEAD_BYTES)
    );
    let answer = ask(&p, &long).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

#[tokio::test]
async fn an_allowed_name_reaches_its_server_by_get_and_by_connect() {
    let (addr, seen) = server().await;
    let dns = FakeDns {
        pinned: vec![("example.test".into(), addr)],
        ..FakeDns::default()
    };
    let p = policy(&["example.test"], dns);
    let answer = ask(
        &p,
        "GET http://example.test/x HTTP/1.1\r\nHost: example.test\r\n\r\n",
    )
    .await;
    assert!(answer.ends_with("\r\n\r\nhello"), "{answer}");
    let seen = String::from_utf8(seen.await.unwrap()).unwrap();
    assert!(seen.starts_with("GET /x HTTP/1.1\r\n"), "{seen}");

    let (addr, _seen) = server().await;
    let dns = FakeDns {
        pinned: vec![("sub.example.test".into(), addr)],
        ..FakeDns::default()
    };
    let p = policy(&["*.example.test"], dns);
    let answer = ask(
        &p,
        "CONNECT sub.example.test:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
        "{answer}"
    );
}

#[tokio::test]
async fn names_off_the_list_are_refused() {
    let (addr, _seen) = server().await;
    let dns = FakeDns {
        pinned: vec![("other.test".into(), addr), ("example.test".into(), addr)],
        ..FakeDns::default()
    };
    let p = policy(&["*.example.test"], dns);
    for request in [
        "GET http://other.test/ HTTP/1.1\r\n\r\n",
        "CONNECT other.test:443 HTTP/1.1\r\n\r\n",
        // `*.example.test` is below it, not the name itself.
        "CONNECT example.test:443 HTTP/1.1\r\n\r\n",
        "CONNECT example.test.evil.test:443 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n",
    ] {
        let answer = ask(&p, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 403 ") && answer.contains("not in sandbox.allow_domains"),
            "{request}: {answer}"
        );
    }
}

#[tokio::test]
async fn allowed_names_that_resolve_to_non_public_addresses_are_refused() {
    let dns = FakeDns {
        answers: vec![
            ("intranet.test".into(), "10.0.0.1".parse().unwrap()),
            ("metadata.test".into(), "169.254.169.254".parse().unwrap()),
            ("loop.test".into(), "127.0.0.1".parse().unwrap()),
        ],
        ..FakeDns::default()
    };
    let p = policy(
        &["intranet.test", "metadata.test", "loop.test", "localhost"],
        dns,
    );
    for (host, range) in [
        ("intranet.test", "a private address"),
        ("metadata.test", "a link-local (cloud metadata) address"),
        ("loop.test", "a loopback address"),
        // The system's resolver (/etc/hosts): a real name for a loopback address.
        ("localhost", "a loopback address"),
    ] {
        let answer = ask(&p, &format!("CONNECT {host}:80 HTTP/1.1\r\n\r\n")).await;
        assert!(
            answer.starts_with("HTTP/1.1 403 ") && answer.contains(range),
            "{host}: {answer}"
        );
    }
}

#[tokio::test]
async fn the_proxy_holds_at_most_its_connection_bound() {
    let p = policy(&["example.test"], FakeDns::default());
    let run = start(p).unwrap();
    let mut idle = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        idle.push(tokio::net::UnixStream::connect(run.socket()).await.unwrap());
    }
    let mut extra = tokio::net::UnixStream::connect(run.socket()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(NET, extra.read_to_string(&mut answer))
        .await
        .expect("the connection past the bound is answered at once")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    let socket = run.socket();
    drop(run);
    assert!(!socket.exists(), "the socket goes with the run");
}
