//! Figures for the web tools, printed, never asserted: `cargo bench --bench web`.
//!
//! 1. Extraction: a 1 MB article page (nav, sidebar, scripts, footer around ~3,700 paragraphs)
//!    reduced to readable text by `web_fetch`'s renderer — median and p90 over 50 runs.
//! 2. The whole `web_fetch` path for the same page served on loopback (guard, pinned client,
//!    read, extract, wrap) — median over 50 runs.
//! 3. The search cache: a cached `web_search` answer — median over 1,000 lookups.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use axum::Router;
use axum::routing::get;
use clawbus::tools::web::extract::Kind;
use clawbus::tools::web::extract::render;
use clawbus::tools::web::fetch::{FetchLimits, Fetched, fetch};
use clawbus::tools::web::search::{Provider, WebSearchTool};
use std::time::{Duration, Instant};

const RUNS: usize = 50;

fn page(target_bytes: usize) -> String {
    let mut s = String::from(
        "<!DOCTYPE html><html><head><title>The Quiet Harbour | Daily Gazette</title>\
         <script>var t = 1;</script><style>.x{color:red}</style></head><body>\
         <nav><a href='/'>Home</a> <a href='/world'>World</a></nav>\
         <aside class='sidebar'><ul><li><a href='/t/1'>Trending one</a></li></ul></aside>\
         <main><article><h1>The Quiet Harbour</h1>",
    );
    let mut i = 0;
    while s.len() < target_bytes - 400 {
        s.push_str(&format!(
            "<p>Paragraph {i}. The fishing boats came in at dawn, and the harbour master counted \
             them one by one, writing each name in the <a href='/ledger/{i}'>ledger</a> as his \
             father had done before him.</p>"
        ));
        i += 1;
    }
    s.push_str(
        "</article></main><footer>© 2024 Daily Gazette</footer><script>x()</script></body></html>",
    );
    s
}

fn stats(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    (d[d.len() / 2], d[d.len() * 9 / 10])
}

fn main() {
    let html = page(1_000_000);
    let fetched = Fetched {
        url: "https://gazette.example/harbour".parse().unwrap(),
        content_type: Some("text/html; charset=utf-8".into()),
        kind: Kind::Html,
        body: html.clone().into_bytes(),
        cut: false,
        redirects: 0,
    };
    let mut times = Vec::with_capacity(RUNS);
    let mut out_len = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let out = render(&fetched, 2_000_000, 2_000_000);
        times.push(t.elapsed());
        out_len = out.len();
    }
    let (p50, p90) = stats(times);
    println!(
        "web_fetch extraction, {} KB HTML → {} KB text: median {:.1} ms, p90 {:.1} ms ({RUNS} runs)",
        html.len() / 1024,
        out_len / 1024,
        p50.as_secs_f64() * 1e3,
        p90.as_secs_f64() * 1e3
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body = html.clone();
        let app = Router::new().route(
            "/page",
            get(move || {
                let body = body.clone();
                async move { ([("content-type", "text/html; charset=utf-8")], body) }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let limits = FetchLimits {
            allow_private_hosts: vec!["127.0.0.1".into()],
            timeout: Duration::from_secs(30),
            max_bytes: 2_000_000,
        };
        let url = format!("http://{addr}/page");
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let t = Instant::now();
            let page = fetch(&url, &limits).await.unwrap();
            let out = tokio::task::spawn_blocking(move || render(&page, 2_000_000, 12_000))
                .await
                .unwrap();
            times.push(t.elapsed());
            assert!(out.contains("Paragraph 0."));
        }
        let (p50, p90) = stats(times);
        println!(
            "web_fetch end to end on loopback, 1 MB page: median {:.1} ms, p90 {:.1} ms ({RUNS} runs)",
            p50.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3
        );

        let search_app = Router::new().route(
            "/search",
            get(|| async {
                (
                    [("content-type", "application/json")],
                    r#"{"results":[{"title":"A","url":"https://a.example/","content":"a"}]}"#,
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let saddr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, search_app).await.unwrap() });
        let tool = WebSearchTool::new(
            vec![Provider::searxng(format!("http://{saddr}"))],
            std::sync::Arc::new(bus::SystemClock),
        );
        tool.search("harbour", 5).await.unwrap();
        let mut times = Vec::with_capacity(1000);
        for _ in 0..1000 {
            let t = Instant::now();
            assert!(tool.search("harbour", 5).await.unwrap().cached);
            times.push(t.elapsed());
        }
        let (p50, _) = stats(times);
        println!(
            "web_search cache hit: median {:.1} µs (1000 lookups)",
            p50.as_secs_f64() * 1e6
        );
    });
}
