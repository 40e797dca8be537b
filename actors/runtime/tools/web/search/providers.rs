//! The three search APIs, each in its real request and response format.
//!
//! - Brave Web Search: `GET {base}/res/v1/web/search?q=…&count=…&text_decorations=false`, header
//!   `X-Subscription-Token: <key>`; answer `{"web": {"results": [{"title", "url", "description"}]}}`.
//! - Tavily: `POST {base}/search` with `Authorization: Bearer <key>` and JSON
//!   `{"query", "max_results", "search_depth": "basic", "include_answer": false}`; answer
//!   `{"results": [{"title", "url", "content", "score"}]}`.
//! - SearXNG (self-hosted, no key): `GET {SEARXNG_URL}/search?q=…&format=json` (the instance must
//!   enable the JSON format); answer `{"results": [{"title", "url", "content"}]}`. It has no
//!   result-count parameter: the first `count` results are kept.

use super::{Hit, MAX_ANSWER_BYTES, Provider, ProviderKind, SearchError, Unreachable, Unreadable};
use reqwest::header;
use serde::Deserialize;
use serde_json::json;

/// Public base URL of the Brave Search API.
pub const BRAVE_BASE_URL: &str = "https://api.search.brave.com";
/// Public base URL of the Tavily API.
pub const TAVILY_BASE_URL: &str = "https://api.tavily.com";

/// Asks `provider` for `count` results for `query`.
pub(super) async fn query(
    client: &reqwest::Client,
    provider: &Provider,
    query: &str,
    count: usize,
) -> Result<Vec<Hit>, SearchError> {
    let base = provider.base_url.trim_end_matches('/');
    let key = provider.key.as_deref().unwrap_or_default();
    let kind = provider.kind;
    let url = |path: &str, params: &[(&str, &str)]| {
        reqwest::Url::parse_with_params(&format!("{base}{path}"), params).map_err(|e| {
            SearchError::Network {
                provider: kind,
                source: Unreachable::BaseUrl {
                    base: base.to_string(),
                    source: e,
                },
            }
        })
    };
    let request = match kind {
        ProviderKind::Brave => client
            .get(url(
                "/res/v1/web/search",
                &[
                    ("q", query),
                    ("count", &count.to_string()),
                    ("text_decorations", "false"),
                ],
            )?)
            .header(header::ACCEPT, "application/json")
            .header("X-Subscription-Token", key),
        ProviderKind::Tavily => {
            client
                .post(format!("{base}/search"))
                .bearer_auth(key)
                .json(&json!({
                    "query": query,
                    "max_results": count,
                    "search_depth": "basic",
                    "include_answer": false,
                }))
        }
        ProviderKind::Searxng => client
            .get(url("/search", &[("q", query), ("format", "json")])?)
            .header(header::ACCEPT, "application/json"),
    };
    let network = |e: reqwest::Error| SearchError::Network {
        provider: kind,
        // Without the URL: it may carry a query the log should not repeat, never a key.
        source: Unreachable::Http(e.without_url()),
    };
    let mut resp = request.send().await.map_err(network)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(SearchError::Status {
            provider: kind,
            status: status.as_u16(),
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(network)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(SearchError::Parse {
                provider: kind,
                source: Unreadable::TooLarge,
            });
        }
        body.extend_from_slice(&chunk);
    }
    let parse_error = |e: serde_json::Error| SearchError::Parse {
        provider: kind,
        source: Unreadable::Json(e),
    };
    let hits: Vec<Hit> = match kind {
        ProviderKind::Brave => serde_json::from_slice::<BraveResponse>(&body)
            .map_err(parse_error)?
            .web
            .map(|w| w.results)
            .unwrap_or_default()
            .into_iter()
            .map(|r| hit(r.title, r.url, r.description))
            .collect(),
        ProviderKind::Tavily | ProviderKind::Searxng => {
            serde_json::from_slice::<ResultsResponse>(&body)
                .map_err(parse_error)?
                .results
                .into_iter()
                .map(|r| hit(r.title, r.url, r.content))
                .collect()
        }
    };
    Ok(hits
        .into_iter()
        .filter(|h| !h.url.is_empty())
        .take(count)
        .collect())
}

/// Brave's `WebSearchApiResponse`, the part used.
#[derive(Deserialize)]
struct BraveResponse {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: String,
}

/// Tavily's and SearXNG's answers share this part.
#[derive(Deserialize)]
struct ResultsResponse {
    #[serde(default)]
    results: Vec<ContentResult>,
}

#[derive(Deserialize)]
struct ContentResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    content: String,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn hit(title: String, url: String, snippet: String) -> Hit {
    Hit {
        title: plain(&title),
        url: url.trim().to_string(),
        snippet: plain(&snippet),
    }
}

/// Snippets may carry highlighting tags (`<strong>`) and entities: keep the plain text.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
