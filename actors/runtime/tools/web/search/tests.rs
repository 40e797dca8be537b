use super::*;
use crate::tools::web::tests::fake::{Fake, reply};
use crate::untrusted::END_MARKER;
use bus::ManualClock;
use serde_json::json;
use std::collections::HashMap;

/// Brave's `WebSearchApiResponse`, trimmed from a real answer.
fn brave_answer() -> String {
    json!({
        "type": "search",
        "query": { "original": "rust actors", "show_strict_warning": false, "more_results_available": true },
        "mixed": { "type": "mixed", "main": [{ "type": "web", "index": 0, "all": false }] },
        "web": {
            "type": "search",
            "family_friendly": true,
            "results": [
                {
                    "type": "search_result",
                    "title": "Actix &amp; friends",
                    "url": "https://actix.rs/",
                    "is_source_local": false,
                    "is_source_both": false,
                    "description": "Actix is a <strong>powerful</strong> actor framework.",
                    "profile": { "name": "Actix", "url": "https://actix.rs/", "long_name": "actix.rs" },
                    "language": "en",
                    "family_friendly": true,
                    "meta_url": { "scheme": "https", "netloc": "actix.rs", "hostname": "actix.rs", "path": "" }
                },
                {
                    "type": "search_result",
                    "title": "Ractor",
                    "url": "https://docs.rs/ractor",
                    "description": "Erlang-style actors for Rust.",
                    "language": "en"
                }
            ]
        }
    })
    .to_string()
}

/// Tavily's `/search` answer.
fn tavily_answer() -> String {
    json!({
        "query": "rust actors",
        "follow_up_questions": null,
        "answer": null,
        "images": [],
        "results": [
            { "title": "Actix", "url": "https://actix.rs/", "content": "Actor framework for Rust.", "score": 0.98, "raw_content": null },
            { "title": "Kameo", "url": "https://docs.rs/kameo", "content": "Fault-tolerant async actors.", "score": 0.91, "raw_content": null }
        ],
        "response_time": 1.09,
        "request_id": "123e4567-e89b-12d3-a456-426614174111"
    })
    .to_string()
}

/// SearXNG's `format=json` answer.
fn searxng_answer() -> String {
    json!({
        "query": "rust actors",
        "number_of_results": 0,
        "results": [
            { "url": "https://actix.rs/", "title": "Actix", "content": "Actor framework.", "engine": "duckduckgo",
              "parsed_url": ["https", "actix.rs", "/", "", "", ""], "template": "default.html",
              "engines": ["duckduckgo", "brave"], "positions": [1, 2], "score": 1.5, "category": "general" },
            { "url": "https://docs.rs/bastion", "title": "Bastion", "content": null, "engine": "brave",
              "engines": ["brave"], "positions": [3], "score": 0.3, "category": "general" },
            { "url": "https://example.org/third", "title": "Third", "content": "More.", "engine": "brave" }
        ],
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": ["rust actor model"],
        "unresponsive_engines": []
    })
    .to_string()
}

async fn brave_fake() -> Fake {
    Fake::start("127.0.0.1", |seen, _| {
        match (seen.method.as_str(), seen.path.as_str(), seen.header("x-subscription-token")) {
            ("GET", "/res/v1/web/search", Some(token)) if token == "brave-test-key-1" => {
                reply(200, "application/json", brave_answer())
            }
            ("GET", "/res/v1/web/search", _) => reply(
                401,
                "application/json",
                r#"{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","status":401}}"#,
            ),
            _ => reply(404, "text/plain", "no such endpoint"),
        }
    })
    .await
}

async fn tavily_fake(status: u16) -> Fake {
    Fake::start("127.0.0.1", move |seen, _| {
        match (
            seen.method.as_str(),
            seen.path.as_str(),
            seen.header("authorization"),
        ) {
            ("POST", "/search", Some(auth))
                if auth == "Bearer tvly-test-key-2" && status == 200 =>
            {
                reply(200, "application/json", tavily_answer())
            }
            ("POST", "/search", _) => reply(
                if status == 200 { 401 } else { status },
                "application/json",
                r#"{"detail":{"error":"Unauthorized: missing or invalid API key."}}"#,
            ),
            _ => reply(404, "text/plain", "no such endpoint"),
        }
    })
    .await
}

async fn searxng_fake() -> Fake {
    Fake::start("127.0.0.1", |seen, _| {
        match (seen.path.as_str(), seen.param("format").as_deref()) {
            ("/searx/search", Some("json")) => reply(200, "application/json", searxng_answer()),
            // A real instance answers 403 for a format that is not enabled.
            ("/searx/search", _) => reply(403, "text/html", "<h1>403 Forbidden</h1>"),
            _ => reply(404, "text/plain", "no such endpoint"),
        }
    })
    .await
}

fn tool(providers: Vec<Provider>) -> (WebSearchTool, Arc<ManualClock>) {
    let clock = ManualClock::new(1_700_000_000_000);
    (WebSearchTool::new(providers, clock.clone()), clock)
}

#[tokio::test]
async fn brave_is_asked_in_its_format() {
    let fake = brave_fake().await;
    let (t, _) = tool(vec![Provider::brave(fake.url(""), "brave-test-key-1")]);
    let found = t.search("  rust   actors ", 2).await.unwrap();
    assert_eq!(found.provider, ProviderKind::Brave);
    assert_eq!(
        found.hits,
        [
            Hit {
                title: "Actix & friends".into(),
                url: "https://actix.rs/".into(),
                snippet: "Actix is a powerful actor framework.".into()
            },
            Hit {
                title: "Ractor".into(),
                url: "https://docs.rs/ractor".into(),
                snippet: "Erlang-style actors for Rust.".into()
            },
        ]
    );
    let seen = &fake.requests()[0];
    assert_eq!(seen.param("q").as_deref(), Some("rust actors"));
    assert_eq!(seen.param("count").as_deref(), Some("2"));
    assert_eq!(seen.header("accept").as_deref(), Some("application/json"));
}

#[tokio::test]
async fn tavily_is_asked_in_its_format() {
    let fake = tavily_fake(200).await;
    let (t, _) = tool(vec![Provider::tavily(fake.url(""), "tvly-test-key-2")]);
    let found = t.search("rust actors", 3).await.unwrap();
    assert_eq!(found.provider, ProviderKind::Tavily);
    assert_eq!(found.hits.len(), 2);
    assert_eq!(found.hits[1].url, "https://docs.rs/kameo");
    assert_eq!(found.hits[1].snippet, "Fault-tolerant async actors.");
    let body = fake.requests()[0].json();
    assert_eq!(body["query"], "rust actors");
    assert_eq!(body["max_results"], 3);
    assert_eq!(body["search_depth"], "basic");
    assert!(
        body.get("api_key").is_none(),
        "the key goes in the Authorization header"
    );
}

#[tokio::test]
async fn searxng_is_asked_in_its_format_and_cut_to_count() {
    let fake = searxng_fake().await;
    let (t, _) = tool(vec![Provider::searxng(fake.url("/searx/"))]);
    let found = t.search("rust actors", 2).await.unwrap();
    assert_eq!(found.provider, ProviderKind::Searxng);
    assert_eq!(found.hits.len(), 2, "{found:?}");
    assert_eq!(found.hits[1].title, "Bastion");
    assert_eq!(
        found.hits[1].snippet, "",
        "a null content is an empty snippet"
    );
    let seen = &fake.requests()[0];
    assert_eq!(seen.path, "/searx/search");
    assert_eq!(seen.param("q").as_deref(), Some("rust actors"));
}

#[tokio::test]
async fn a_second_identical_query_is_answered_from_the_cache_until_it_expires() {
    let fake = brave_fake().await;
    let (t, clock) = tool(vec![Provider::brave(fake.url(""), "brave-test-key-1")]);
    let first = t.search("rust actors", 5).await.unwrap();
    assert!(!first.cached);
    let second = t.search("rust  actors", 5).await.unwrap();
    assert!(second.cached);
    assert_eq!(second.hits, first.hits);
    assert_eq!(fake.hits(), 1, "one request for two identical queries");

    t.search("rust actors", 3).await.unwrap();
    assert_eq!(fake.hits(), 2, "another count is another query");

    clock.advance(CACHE_TTL - Duration::from_millis(1));
    assert!(t.search("rust actors", 5).await.unwrap().cached);
    assert_eq!(fake.hits(), 2);
    clock.advance(Duration::from_millis(1));
    let after = t.search("rust actors", 5).await.unwrap();
    assert!(
        !after.cached,
        "15 minutes later the provider is asked again"
    );
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn a_failing_provider_falls_back_to_the_next_one() {
    let tavily_down = tavily_fake(500).await;
    let searxng = searxng_fake().await;
    let (t, _) = tool(vec![
        Provider::tavily(tavily_down.url(""), "tvly-test-key-2"),
        Provider::searxng(searxng.url("/searx")),
    ]);
    let found = t.search("rust actors", 5).await.unwrap();
    assert_eq!(found.provider, ProviderKind::Searxng);
    assert_eq!(tavily_down.hits(), 1);
}

#[tokio::test]
async fn errors_name_the_provider_and_never_the_key() {
    let fake = brave_fake().await;
    let (t, _) = tool(vec![Provider::brave(fake.url(""), "wrong-key-value-9")]);
    let errors = t.search("rust", 5).await.unwrap_err();
    assert!(
        matches!(
            &errors[..],
            [SearchError::Status {
                provider: ProviderKind::Brave,
                status: 401
            }]
        ),
        "{errors:?}"
    );
    assert!(!format!("{t:?}").contains("wrong-key-value-9"));
}

#[tokio::test]
async fn results_are_rendered_as_untrusted_content() {
    let fake = brave_fake().await;
    let (t, _) = tool(vec![Provider::brave(fake.url(""), "brave-test-key-1")]);
    let found = t.search("rust actors", 5).await.unwrap();
    let out = render("rust actors", &found);
    assert!(
        out.starts_with(
            "<<<EXTERNAL_UNTRUSTED_CONTENT source=\"web_search:brave\">>>\nSearch results for \"rust actors\" (brave):\n\n1. Actix & friends\n   URL: https://actix.rs/\n   Actix is a powerful actor framework.\n"
        ),
        "{out}"
    );
    assert!(out.ends_with(END_MARKER), "{out}");
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn providers_follow_the_documented_order() {
    let def = WebSearchDef {
        brave_base_url: Some("http://127.0.0.1:1".into()),
        tavily_base_url: None,
    };
    let all = providers_from(
        &def,
        env(&[
            ("SEARXNG_URL", "http://searx.local/"),
            ("TAVILY_API_KEY", "tvly-abc"),
            ("BRAVE_API_KEY", "brave-abc"),
        ]),
    );
    let kinds: Vec<ProviderKind> = all.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ProviderKind::Brave,
            ProviderKind::Tavily,
            ProviderKind::Searxng
        ]
    );
    assert_eq!(all[0].base_url, "http://127.0.0.1:1");
    assert_eq!(all[1].base_url, TAVILY_BASE_URL);
    assert_eq!(all[2].base_url, "http://searx.local");

    assert!(providers_from(&def, env(&[])).is_empty());
    assert!(
        providers_from(
            &def,
            env(&[("BRAVE_API_KEY", "  "), ("SEARXNG_URL", "searx.local")])
        )
        .is_empty(),
        "blank keys and non-http URLs configure nothing"
    );
    assert!(
        WebSearchTool::new(Vec::new(), ManualClock::new(0))
            .available()
            .is_err()
    );
}

#[tokio::test]
async fn a_redirect_never_carries_the_key_elsewhere() {
    let elsewhere = Fake::start("127.0.0.1", |_, _| {
        reply(200, "application/json", brave_answer())
    })
    .await;
    let target = elsewhere.url("/res/v1/web/search");
    let brave = Fake::start("127.0.0.1", move |_, _| {
        crate::tools::web::tests::fake::redirect(307, &target)
    })
    .await;
    let (t, _) = tool(vec![Provider::brave(brave.url(""), "brave-test-key-1")]);
    let errors = t.search("rust actors", 2).await.unwrap_err();
    assert!(
        matches!(
            &errors[..],
            [SearchError::Status {
                provider: ProviderKind::Brave,
                status: 307
            }]
        ),
        "{errors:?}"
    );
    assert_eq!(elsewhere.hits(), 0, "the redirect was not followed");
}

#[tokio::test]
async fn an_endless_answer_is_cut_off() {
    let huge = "x".repeat(MAX_ANSWER_BYTES + 1);
    let fake = Fake::start("127.0.0.1", move |_, _| {
        reply(200, "application/json", huge.clone())
    })
    .await;
    let (t, _) = tool(vec![Provider::searxng(fake.url(""))]);
    let errors = t.search("rust actors", 2).await.unwrap_err();
    assert!(
        matches!(&errors[..], [SearchError::Parse { source, .. }] if source.to_string().contains("larger than")),
        "{errors:?}"
    );
}
