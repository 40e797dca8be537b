//! From a fetched body to text a model can read.
//!
//! HTML goes through `dom_smoothie`, a port of Mozilla's readability.js: it scores the DOM for
//! the main content, drops scripts, styles, navigation, sidebars and footers, and renders what
//! is left as Markdown (links kept). Text types pass through. Anything else is binary and refused
//! before its body is read (see [`Kind::of`]). [`render`] builds what the model gets.

use super::fetch::Fetched;
use crate::untrusted;
use dom_smoothie::{Config, Readability, TextMode};

/// What a response holds, judged from its `Content-Type` (and its first bytes when there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `text/html`, `application/xhtml+xml`: reduced to readable text.
    Html,
    /// `text/*`, JSON, XML, YAML, JavaScript …: passed through as it is.
    Text,
    /// No `Content-Type`: decided from the body (`Kind::sniff`).
    Unknown,
    /// Images, audio, video, fonts, PDFs, archives, `application/octet-stream` …: refused.
    Binary,
}

impl Kind {
    /// Judges a `Content-Type` header value (parameters such as `charset` are ignored).
    pub fn of(content_type: Option<&str>) -> Kind {
        let Some(ct) = content_type else {
            return Kind::Unknown;
        };
        let mime = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if mime.is_empty() {
            return Kind::Unknown;
        }
        let (top, sub) = mime.split_once('/').unwrap_or((mime.as_str(), ""));
        match (top, sub) {
            ("text", "html") | ("application", "xhtml+xml") => Kind::Html,
            ("text", _) => Kind::Text,
            (
                "application",
                "json"
                | "xml"
                | "javascript"
                | "ecmascript"
                | "x-javascript"
                | "yaml"
                | "x-yaml"
                | "toml"
                | "x-toml"
                | "x-ndjson"
                | "ndjson"
                | "markdown"
                | "x-sh"
                | "sql"
                | "graphql"
                | "x-www-form-urlencoded",
            ) => Kind::Text,
            ("application", s) if s.ends_with("+json") || s.ends_with("+xml") => Kind::Text,
            _ => Kind::Binary,
        }
    }

    /// Decides an untyped body: NUL bytes or invalid UTF-8 → binary; an HTML start → HTML;
    /// otherwise text. `cut` says the body was truncated (a split last char is then fine).
    pub(crate) fn sniff(body: &[u8], cut: bool) -> Kind {
        if body.contains(&0) {
            return Kind::Binary;
        }
        match std::str::from_utf8(body) {
            Ok(_) => {}
            Err(e) if cut && e.error_len().is_none() => {}
            Err(_) => return Kind::Binary,
        }
        let head: String = String::from_utf8_lossy(&body[..body.len().min(512)])
            .trim_start()
            .chars()
            .take(64)
            .collect::<String>()
            .to_ascii_lowercase();
        if head.starts_with("<!doctype html") || head.starts_with("<html") {
            Kind::Html
        } else {
            Kind::Text
        }
    }
}

/// A readable page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readable {
    /// The page title (from metadata or `<title>`); may be empty.
    pub title: String,
    /// The main content as Markdown.
    pub text: String,
}

/// Reduces an HTML document to its title and main content. `url` resolves relative links.
/// CPU-bound (≈14 ms for 1 MB): call it off the async threads. A page `super::shape::check`
/// refuses (too deep, too many elements) is not extracted: its text is a note saying why.
pub fn readable(html: &str, url: &str) -> Readable {
    if let Err(why) = super::shape::check(html) {
        tracing::info!(url, reason = %why, "Page too complex to extract.");
        return Readable {
            title: String::new(),
            text: format!("[page not extracted: {why}]"),
        };
    }
    let cfg = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    let parsed = Readability::new(html, Some(url), Some(cfg.clone())).and_then(|mut r| r.parse());
    match parsed {
        Ok(article) => Readable {
            title: article.title.trim().to_string(),
            text: tidy(&article.text_content),
        },
        Err(e) => {
            // No main content found (an empty or script-only page): keep what metadata there is.
            tracing::debug!(url, error = %e, "No readable content; returning the title only.");
            let title = Readability::new(html, None, Some(cfg))
                .map(|r| r.get_article_title().to_string())
                .unwrap_or_default();
            Readable {
                title: title.trim().to_string(),
                text: String::new(),
            }
        }
    }
}

/// The text the model gets for a fetched page: title, URL and readable text, wrapped as
/// untrusted content. HTML extraction is CPU-bound; call from a blocking thread.
pub fn render(page: &Fetched, max_bytes: usize, max_chars: usize) -> String {
    let raw = String::from_utf8_lossy(&page.body);
    let url = page.url.as_str();
    let (title, text) = match page.kind {
        Kind::Html => {
            let r = readable(&raw, url);
            (r.title, r.text)
        }
        _ => (String::new(), raw.into_owned()),
    };
    let mut out = String::with_capacity(text.len().min(max_chars * 4) + 256);
    if !title.is_empty() {
        out.push_str(&format!("Title: {title}\n"));
    }
    out.push_str(&format!("URL: {url}\n"));
    if let Some(ct) = &page.content_type {
        out.push_str(&format!("Content-Type: {ct}\n"));
    }
    if page.cut {
        out.push_str(&format!(
            "[body truncated: only the first {max_bytes} bytes were read]\n"
        ));
    }
    out.push('\n');
    let total = text.chars().count();
    if total > max_chars {
        let end = text
            .char_indices()
            .nth(max_chars)
            .map_or(text.len(), |(i, _)| i);
        out.push_str(&text[..end]);
        out.push_str(&format!(
            "\n[text truncated: {max_chars} of {total} characters shown; call again with a larger max_chars to see more]"
        ));
    } else {
        out.push_str(&text);
    }
    untrusted::wrap(url, &out)
}

/// Trims trailing spaces and collapses runs of blank lines to one.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}
