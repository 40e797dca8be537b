//! The web tools: `web_fetch` and `web_search`.
//!
//! - [`fetch`]: [`WebFetchTool`]; GET with a Chrome User-Agent, at most [`MAX_REDIRECTS`]
//!   redirects followed by hand, size cap and timeout from `[web]`.
//! - `guard`: before every connection the host is resolved once, every address checked
//!   (`guard::classify`), and the connection pinned to the checked address.
//! - [`extract`]: HTML → title + main content as Markdown (dom_smoothie, a readability.js port);
//!   text passes through; binary is refused.
//! - `shape`: a bounded first parse; pages too deep or too large to extract safely are not.
//! - [`search`]: [`WebSearchTool`] over Brave, Tavily or SearXNG (first configured wins), cached
//!   15 minutes.
//!
//! Both tools wrap what they return with `crate::untrusted::wrap`. Error types the model may
//! see: `invalid_url`, `url_refused`, `redirect`, `http_status`, `unsupported_content`,
//! `network`, `timed_out`, `search_failed`.

pub mod extract;
pub mod fetch;
pub(crate) mod guard;
pub mod search;
pub(crate) mod shape;

#[cfg(test)]
mod tests;

pub use fetch::{FetchError, FetchLimits, MAX_REDIRECTS, WebFetchTool};
pub use search::{WebSearchTool, web_search_available};
