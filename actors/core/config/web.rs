//! The `[web]` section of `clawbus.toml`: limits of `web_fetch` and endpoints of `web_search`.
//!
//! ```toml
//! [web]
//! allow_private_hosts = ["127.0.0.1", "wiki.internal"]   # exact hosts that may be private
//! timeout = "30s"                                         # one whole fetch, redirects included
//! max_bytes = 2000000                                     # body bytes read, the rest is dropped
//!
//! [web.search]
//! brave_base_url = "https://api.search.brave.com"         # for tests and proxies
//! tavily_base_url = "https://api.tavily.com"
//! ```
//!
//! Which search provider is used depends on the environment (`BRAVE_API_KEY`, `TAVILY_API_KEY`,
//! `SEARXNG_URL`), never on this file: keys do not belong in files.

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// Default limit on one `web_fetch`, redirects and body included.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on the body bytes `web_fetch` reads.
pub const DEFAULT_FETCH_MAX_BYTES: usize = 2_000_000;
/// `max_bytes` may not exceed this.
const MAX_FETCH_BYTES: usize = 100_000_000;

/// `[web]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebFile {
    pub allow_private_hosts: Option<Vec<Spanned<String>>>,
    pub timeout: Option<Spanned<DurationText>>,
    pub max_bytes: Option<Spanned<usize>>,
    #[serde(default)]
    pub search: WebSearchFile,
}

/// `[web.search]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebSearchFile {
    pub brave_base_url: Option<Spanned<String>>,
    pub tavily_base_url: Option<Spanned<String>>,
}

/// The validated `[web]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebDef {
    /// Hosts `web_fetch` may reach even though they are loopback or private (self-hosted
    /// services, tests), lower-cased and normalised as URLs spell them (`127.0.0.1`,
    /// `wiki.internal`, `[::1]`). Matched exactly against a URL's host: other spellings of the
    /// same address are not listed.
    pub allow_private_hosts: Vec<String>,
    /// Limit on one whole fetch, redirects included.
    pub fetch_timeout: Duration,
    /// Body bytes read per fetch; reading stops there.
    pub fetch_max_bytes: usize,
    /// Search endpoints (`[web.search]`).
    pub search: WebSearchDef,
}

impl Default for WebDef {
    fn default() -> Self {
        Self {
            allow_private_hosts: Vec::new(),
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            search: WebSearchDef::default(),
        }
    }
}

/// The validated `[web.search]` section: base URLs that replace the public APIs' (for tests
/// and proxies); `None` means the public API.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebSearchDef {
    /// Replaces `https://api.search.brave.com`.
    pub brave_base_url: Option<String>,
    /// Replaces `https://api.tavily.com`.
    pub tavily_base_url: Option<String>,
}

/// Turns `[web]` into a [`WebDef`], pushing a problem for each bad value (which then keeps its
/// default).
pub(super) fn web_def(src: &Source, f: &WebFile, problems: &mut Vec<Problem>) -> WebDef {
    let mut def = WebDef {
        fetch_timeout: duration(
            src,
            &f.timeout,
            "web.timeout",
            DEFAULT_FETCH_TIMEOUT,
            problems,
        ),
        ..WebDef::default()
    };
    for (i, host) in f.allow_private_hosts.iter().flatten().enumerate() {
        match normalize_host(host.get_ref()) {
            Some(h) => def.allow_private_hosts.push(h),
            None => problems.push(src.at(
                Some(host.span()),
                format!("web.allow_private_hosts[{i}]"),
                format!(
                    "{:?} is not a host name or IP address (expected e.g. \"127.0.0.1\", \"[::1]\" or \"wiki.internal\", without scheme, port or path)",
                    host.get_ref()
                ),
            )),
        }
    }
    if let Some(max) = &f.max_bytes {
        let v = *max.get_ref();
        if v == 0 || v > MAX_FETCH_BYTES {
            problems.push(src.at(
                Some(max.span()),
                "web.max_bytes",
                format!("{v} is out of range (expected 1 to {MAX_FETCH_BYTES})"),
            ));
        } else {
            def.fetch_max_bytes = v;
        }
    }
    let mut base_url = |value: &Option<Spanned<String>>, field: &str| -> Option<String> {
        let value = value.as_ref()?;
        let url = value.get_ref().trim_end_matches('/');
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
                Some(url.to_string())
            }
            _ => {
                problems.push(src.at(
                    Some(value.span()),
                    field,
                    format!(
                        "{:?} is not an http(s) URL (expected e.g. \"http://127.0.0.1:8080\")",
                        value.get_ref()
                    ),
                ));
                None
            }
        }
    };
    def.search.brave_base_url = base_url(&f.search.brave_base_url, "web.search.brave_base_url");
    def.search.tavily_base_url = base_url(&f.search.tavily_base_url, "web.search.tavily_base_url");
    def
}

/// The host as a URL spells it after parsing (lower case, IPv4 in dotted form, IPv6 in
/// brackets), or `None` when `host` is not a bare host.
pub(super) fn normalize_host(host: &str) -> Option<String> {
    let host = host.trim();
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    // A port, even the default one the URL parser would drop (`wiki.internal:80`).
    let after_brackets = host.rsplit_once(']').map_or(host, |(_, rest)| rest);
    if after_brackets.contains(':') {
        return None;
    }
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    if url.port().is_some() {
        return None;
    }
    url.host_str().map(str::to_string)
}

#[cfg(test)]
pub(super) mod tests {
    use crate::config::{self, LoadOptions, Problem};

    /// Loads `toml` as `clawbus.toml` of an empty project: the config, or every problem.
    pub(in crate::config) fn load(toml: &str) -> Result<config::Config, Vec<Problem>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
        std::fs::write(dir.path().join("clawbus.toml"), toml).unwrap();
        config::load(&LoadOptions {
            config: dir.path().join("clawbus.toml"),
            agents_dir: dir.path().join("agents.d"),
            state_dir: None,
            model_override: None,
        })
        .map_err(|r| r.files.into_iter().flat_map(|f| f.problems).collect())
    }

    #[test]
    fn the_web_section_is_read_and_hosts_are_normalised() {
        let c = load(
            "[web]\nallow_private_hosts = [\"127.0.0.1\", \"Wiki.Internal\", \"2130706433\", \"[::1]\"]\ntimeout = \"5s\"\nmax_bytes = 1000\n\n[web.search]\nbrave_base_url = \"http://127.0.0.1:9/\"\ntavily_base_url = \"https://tavily.example\"\n",
        )
        .unwrap();
        assert_eq!(
            c.web.allow_private_hosts,
            ["127.0.0.1", "wiki.internal", "127.0.0.1", "[::1]"]
        );
        assert_eq!(c.web.fetch_timeout, std::time::Duration::from_secs(5));
        assert_eq!(c.web.fetch_max_bytes, 1000);
        assert_eq!(
            c.web.search.brave_base_url.as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(
            c.web.search.tavily_base_url.as_deref(),
            Some("https://tavily.example")
        );
    }

    #[test]
    fn no_web_section_means_defaults() {
        let c = load("").unwrap();
        assert_eq!(c.web, super::WebDef::default());
    }

    #[test]
    fn every_bad_web_value_is_reported_with_its_line() {
        let problems = load(
            "[web]\nallow_private_hosts = [\"ok.internal\", \"http://x/\", \"host:8080\"]\ntimeout = \"soon\"\nmax_bytes = 0\n\n[web.search]\nbrave_base_url = \"ftp://x\"\n",
        )
        .unwrap_err();
        let got: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.field.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (2, "web.allow_private_hosts[1]"),
                (2, "web.allow_private_hosts[2]"),
                (3, "web.timeout"),
                (4, "web.max_bytes"),
                (7, "web.search.brave_base_url"),
            ],
            "{problems:#?}"
        );
    }

    #[test]
    fn an_unknown_web_field_is_reported() {
        let problems = load("[web]\nallow_hosts = []\n").unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].line, 2);
    }
}
