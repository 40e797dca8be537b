use super::extract::article_page;
use super::fake::{Fake, redirect, reply};
use crate::tools::web::extract::{Kind, render};
use crate::tools::web::fetch::{FetchError, FetchLimits, fetch};
use crate::tools::web::guard::GuardError;
use crate::untrusted::END_MARKER;
use axum::body::Body;
use futures::StreamExt;
use std::time::Duration;

fn limits(allow: &[&str]) -> FetchLimits {
    FetchLimits {
        allow_private_hosts: allow.iter().map(|s| s.to_string()).collect(),
        timeout: Duration::from_secs(20),
        max_bytes: 2_000_000,
    }
}

async fn page_server() -> Fake {
    Fake::start("127.0.0.1", |seen, _| match seen.path.as_str() {
        "/article" => reply(200, "text/html; charset=utf-8", article_page()),
        "/plain" => reply(200, "text/plain", "just text\nline two"),
        "/json" => reply(200, "application/json", r#"{"answer": 42}"#),
        "/png" => reply(200, "image/png", vec![0x89u8, b'P', b'N', b'G', 0, 0]),
        "/pdf" => reply(200, "application/pdf", "%PDF-1.7"),
        "/octet" => reply(200, "application/octet-stream", "abc"),
        "/untyped-binary" => axum::response::Response::new(Body::from(vec![1u8, 0, 2, 0])),
        _ => reply(404, "text/plain", "not here"),
    })
    .await
}

#[tokio::test]
async fn a_loopback_page_is_refused_by_default_and_fetched_when_allowed() {
    let server = page_server().await;
    let err = fetch(&server.url("/plain"), &limits(&[]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "url_refused", "{err}");
    assert!(err.to_string().contains("loopback"), "{err}");
    assert_eq!(server.hits(), 0, "a refused URL is never connected to");

    let page = fetch(&server.url("/plain"), &limits(&["127.0.0.1"]))
        .await
        .unwrap();
    assert_eq!(page.kind, Kind::Text);
    assert_eq!(page.body, b"just text\nline two");
    let seen = &server.requests()[0];
    assert!(
        seen.header("user-agent").unwrap().contains("Chrome/"),
        "a browser User-Agent is sent: {:?}",
        seen.header("user-agent")
    );
}

#[tokio::test]
async fn an_article_is_reduced_to_readable_text_with_title_and_url() {
    let server = page_server().await;
    let page = fetch(&server.url("/article"), &limits(&["127.0.0.1"]))
        .await
        .unwrap();
    let out = render(&page, 2_000_000, 100_000);
    let url = server.url("/article");
    assert!(
        out.starts_with(&format!(
            "<<<EXTERNAL_UNTRUSTED_CONTENT source=\"{url}\">>>\nTitle: The Quiet Harbour"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("URL: {url}\n")), "{out}");
    assert!(out.contains("Paragraph 3. The fishing boats"), "{out}");
    for gone in ["SCRIPTMARKER", "NAVMARKER", "SIDEBARMARKER", "FOOTERMARKER"] {
        assert!(!out.contains(gone), "{gone} must be removed: {out}");
    }
    assert!(out.ends_with(END_MARKER), "{out}");
}

#[tokio::test]
async fn text_and_json_pass_through_and_binary_is_refused() {
    let server = page_server().await;
    let l = limits(&["127.0.0.1"]);
    let json = fetch(&server.url("/json"), &l).await.unwrap();
    assert!(render(&json, 1000, 1000).contains("{\"answer\": 42}"));
    for path in ["/png", "/pdf", "/octet", "/untyped-binary"] {
        let err = fetch(&server.url(path), &l).await.unwrap_err();
        assert!(
            matches!(err, FetchError::Binary { .. }),
            "{path}: expected Binary, got {err}"
        );
        assert_eq!(err.kind(), "unsupported_content");
        assert!(err.to_string().contains("not text or HTML"), "{err}");
    }
    let err = fetch(&server.url("/missing"), &l).await.unwrap_err();
    assert!(
        matches!(err, FetchError::Status { status: 404, .. }),
        "{err}"
    );
}

/// Redirects from an allowed host: to the metadata address, to other spellings of loopback, to a
/// different loopback address that really serves.
#[tokio::test]
async fn a_redirect_from_an_allowed_host_to_a_forbidden_address_is_refused() {
    // A second server on 127.0.0.2 (a loopback address that is NOT on the allow list).
    let other = Fake::start("127.0.0.2", |_, _| {
        reply(200, "text/plain", "INTERNAL SECRET PAGE")
    })
    .await;
    let other_port = other.addr.port();
    let server = Fake::start("127.0.0.1", move |seen, own| {
        let port = own.port();
        match seen.path.as_str() {
            "/to-metadata" => redirect(302, "http://169.254.169.254/latest/meta-data/"),
            "/to-mapped" => redirect(301, "http://[::ffff:169.254.169.254]/latest/"),
            "/to-other-loopback" => redirect(302, &format!("http://127.0.0.2:{other_port}/")),
            "/to-localhost" => redirect(307, &format!("http://localhost:{port}/plain")),
            "/to-decimal" => redirect(308, &format!("http://2130706434:{other_port}/")),
            "/to-file" => redirect(302, "file:///etc/passwd"),
            "/plain" => reply(200, "text/plain", "allowed page"),
            _ => reply(404, "text/plain", "no"),
        }
    })
    .await;
    let l = limits(&["127.0.0.1"]);
    for (path, expect) in [
        ("/to-metadata", "169.254.169.254"),
        ("/to-mapped", "::ffff:169.254.169.254"),
        ("/to-other-loopback", "127.0.0.2"),
        ("/to-localhost", "localhost"),
        ("/to-decimal", "127.0.0.2"),
        ("/to-file", "file"),
    ] {
        let err = fetch(&server.url(path), &l).await.unwrap_err();
        assert_eq!(err.kind(), "url_refused", "{path}: {err}");
        assert!(err.to_string().contains(expect), "{path}: {err}");
        match &err {
            FetchError::Refused { cause, .. } => assert!(
                matches!(cause, GuardError::Forbidden { .. } | GuardError::Scheme(_)),
                "{path}: {cause:?}"
            ),
            other => panic!("{path}: expected Refused, got {other:?}"),
        }
    }
    assert_eq!(
        other.hits(),
        0,
        "the non-allowed loopback server is never contacted"
    );
    let plain_hits = server
        .requests()
        .iter()
        .filter(|s| s.path == "/plain")
        .count();
    assert_eq!(plain_hits, 0, "localhost is not the allowed host 127.0.0.1");
}

#[tokio::test]
async fn redirects_are_followed_up_to_five_hops() {
    let server = Fake::start("127.0.0.1", |seen, _| {
        let n: usize = seen.path.trim_start_matches("/hop/").parse().unwrap_or(0);
        if n == 0 {
            reply(200, "text/plain", "arrived")
        } else {
            redirect(302, &format!("/hop/{}", n - 1))
        }
    })
    .await;
    let l = limits(&["127.0.0.1"]);
    let page = fetch(&server.url("/hop/5"), &l).await.unwrap();
    assert_eq!(page.redirects, 5);
    assert_eq!(page.body, b"arrived");
    assert_eq!(page.url.path(), "/hop/0", "the final URL is reported");
    let before = server.hits();
    let err = fetch(&server.url("/hop/6"), &l).await.unwrap_err();
    assert!(matches!(err, FetchError::TooManyRedirects { .. }), "{err}");
    assert_eq!(
        server.hits() - before,
        6,
        "the sixth redirect is not followed"
    );
}

#[tokio::test]
async fn the_size_cap_stops_reading_an_endless_body() {
    let server = Fake::start("127.0.0.1", |_, _| {
        let chunk = bytes::Bytes::from(vec![b'a'; 16 * 1024]);
        let endless = futures::stream::repeat(chunk).map(Ok::<_, std::convert::Infallible>);
        reply(200, "text/plain", Body::from_stream(endless))
    })
    .await;
    let mut l = limits(&["127.0.0.1"]);
    l.max_bytes = 100_000;
    let page = fetch(&server.url("/endless"), &l).await.unwrap();
    assert_eq!(page.body.len(), 100_000);
    assert!(page.cut);
    let out = render(&page, l.max_bytes, 50);
    assert!(
        out.contains("[body truncated: only the first 100000 bytes were read]"),
        "{out}"
    );
    assert!(
        out.contains("[text truncated: 50 of 100000 characters shown"),
        "{out}"
    );
}

#[tokio::test]
async fn a_body_exactly_at_the_cap_is_not_reported_cut() {
    let server = Fake::start("127.0.0.1", |_, _| reply(200, "text/plain", "0123456789")).await;
    let mut l = limits(&["127.0.0.1"]);
    l.max_bytes = 10;
    let page = fetch(&server.url("/"), &l).await.unwrap();
    assert_eq!(page.body, b"0123456789");
    assert!(!page.cut);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and holds connections without ever answering.
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let mut l = limits(&["127.0.0.1"]);
    l.timeout = Duration::from_millis(300);
    let err = fetch(&format!("http://{addr}/"), &l).await.unwrap_err();
    assert!(matches!(err, FetchError::TimedOut { .. }), "{err}");
    hold.abort();
}

#[tokio::test]
async fn invalid_urls_are_reported() {
    let err = fetch("not a url", &limits(&[])).await.unwrap_err();
    assert_eq!(err.kind(), "invalid_url", "{err}");
}
