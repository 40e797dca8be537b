//! The `[browser]` section of `clawbus.toml`: the Chromium the `browser` tool drives, and its
//! bounds.
//!
//! ```toml
//! [browser]
//! executable = "/usr/bin/chromium"   # default: chromium, chromium-browser, google-chrome on PATH
//! idle_timeout = "5m"                # an agent's browser stops after this long unused
//! load_timeout = "30s"               # one page load (navigate, open, a click that navigates)
//! max_tabs = 8                       # tabs one agent may hold open
//! max_download_bytes = 10000000      # a larger download is cancelled; 0 refuses every download
//! ```
//!
//! `test_allow_origins` (never set by default) lets the browser reach listed loopback or
//! private origins (`"http://127.0.0.1:43123"`, scheme, host and port exactly): it exists so
//! tests can serve fixture pages on loopback, and a warning is logged whenever it is set.

use super::Problem;
use super::duration::DurationText;
use super::span::Source;
use super::validate::duration;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// Default `[browser] idle_timeout`.
pub const DEFAULT_BROWSER_IDLE: Duration = Duration::from_secs(300);
/// Default `[browser] load_timeout`.
pub const DEFAULT_BROWSER_LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Default `[browser] max_tabs`.
pub const DEFAULT_BROWSER_MAX_TABS: usize = 8;
/// Default `[browser] max_download_bytes`.
pub const DEFAULT_BROWSER_MAX_DOWNLOAD: u64 = 10_000_000;
/// `max_tabs` may not exceed this.
const MAX_TABS: usize = 64;
/// `max_download_bytes` may not exceed this (1 GiB).
const MAX_DOWNLOAD: u64 = 1 << 30;

/// `[browser]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BrowserFile {
    pub executable: Option<Spanned<String>>,
    pub idle_timeout: Option<Spanned<DurationText>>,
    pub load_timeout: Option<Spanned<DurationText>>,
    pub max_tabs: Option<Spanned<i64>>,
    pub max_download_bytes: Option<Spanned<i64>>,
    pub test_allow_origins: Option<Vec<Spanned<String>>>,
}

/// The validated `[browser]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserDef {
    /// The Chromium binary (`None`: the first of `chromium`, `chromium-browser`,
    /// `google-chrome`, `google-chrome-stable` found on `PATH`). Relative to the config file's
    /// folder when relative.
    pub executable: Option<PathBuf>,
    /// An agent's browser is stopped after this long without a call.
    pub idle_timeout: Duration,
    /// The limit on one page load; past it the load is stopped and the call answers `timed_out`.
    pub load_timeout: Duration,
    /// Tabs one agent may hold open at once.
    pub max_tabs: usize,
    /// The largest download saved into the workspace; a larger one is cancelled and deleted.
    /// `0` refuses every download.
    pub max_download_bytes: u64,
    /// Test-only: origins (`http://127.0.0.1:43123`) the address guard lets through although
    /// they are loopback or private. Empty unless the file sets it.
    pub test_allow_origins: Vec<String>,
}

impl Default for BrowserDef {
    fn default() -> Self {
        Self {
            executable: None,
            idle_timeout: DEFAULT_BROWSER_IDLE,
            load_timeout: DEFAULT_BROWSER_LOAD_TIMEOUT,
            max_tabs: DEFAULT_BROWSER_MAX_TABS,
            max_download_bytes: DEFAULT_BROWSER_MAX_DOWNLOAD,
            test_allow_origins: Vec::new(),
        }
    }
}

/// Turns `[browser]` into a [`BrowserDef`], pushing a problem for each bad value (which then
/// keeps its default). `base` is the config file's folder, for a relative `executable`.
pub(super) fn browser_def(
    src: &Source,
    f: &BrowserFile,
    base: &std::path::Path,
    problems: &mut Vec<Problem>,
) -> BrowserDef {
    let mut def = BrowserDef {
        idle_timeout: duration(
            src,
            &f.idle_timeout,
            "browser.idle_timeout",
            DEFAULT_BROWSER_IDLE,
            problems,
        ),
        load_timeout: duration(
            src,
            &f.load_timeout,
            "browser.load_timeout",
            DEFAULT_BROWSER_LOAD_TIMEOUT,
            problems,
        ),
        ..BrowserDef::default()
    };
    if let Some(exe) = &f.executable {
        if exe.get_ref().trim().is_empty() {
            problems.push(src.at(
                Some(exe.span()),
                "browser.executable",
                "empty path (expected e.g. \"/usr/bin/chromium\", or leave it out to search PATH)",
            ));
        } else {
            def.executable = Some(base.join(exe.get_ref()));
        }
    }
    if let Some(v) = &f.max_tabs {
        match usize::try_from(*v.get_ref()) {
            Ok(n) if (1..=MAX_TABS).contains(&n) => def.max_tabs = n,
            _ => problems.push(src.at(
                Some(v.span()),
                "browser.max_tabs",
                format!("{} is out of range (expected 1 to {MAX_TABS})", v.get_ref()),
            )),
        }
    }
    if let Some(v) = &f.max_download_bytes {
        match u64::try_from(*v.get_ref()) {
            Ok(n) if n <= MAX_DOWNLOAD => def.max_download_bytes = n,
            _ => problems.push(src.at(
                Some(v.span()),
                "browser.max_download_bytes",
                format!(
                    "{} is out of range (expected 0 to {MAX_DOWNLOAD}; 0 refuses downloads)",
                    v.get_ref()
                ),
            )),
        }
    }
    for (i, origin) in f.test_allow_origins.iter().flatten().enumerate() {
        match origin_of(origin.get_ref()) {
            Some(o) => def.test_allow_origins.push(o),
            None => problems.push(src.at(
                Some(origin.span()),
                format!("browser.test_allow_origins[{i}]"),
                format!(
                    "{:?} is not an origin with a port (expected e.g. \"http://127.0.0.1:43123\", no path)",
                    origin.get_ref()
                ),
            )),
        }
    }
    def
}

/// `scheme://host:port` as the URL parser spells it, or `None` when `text` is not an http(s)
/// origin with an explicit port and no path, query or credentials.
pub fn origin_of(text: &str) -> Option<String> {
    let url = url::Url::parse(text.trim()).ok()?;
    let bare = matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    let port = url.port()?;
    let host = url.host_str()?;
    (matches!(url.scheme(), "http" | "https") && bare)
        .then(|| format!("{}://{host}:{port}", url.scheme()))
}

#[cfg(test)]
mod tests {
    use crate::config::web::tests::load;

    #[test]
    fn no_browser_section_means_defaults_and_no_test_origins() {
        let c = load("").unwrap();
        assert_eq!(c.browser, super::BrowserDef::default());
        assert!(c.browser.test_allow_origins.is_empty());
    }

    #[test]
    fn the_browser_section_is_read() {
        let c = load(
            "[browser]\nexecutable = \"/opt/chrome\"\nidle_timeout = \"2s\"\nload_timeout = \"3s\"\nmax_tabs = 2\nmax_download_bytes = 0\ntest_allow_origins = [\"http://127.0.0.1:4000/\"]\n",
        )
        .unwrap();
        let b = &c.browser;
        assert_eq!(
            b.executable.as_deref(),
            Some(std::path::Path::new("/opt/chrome"))
        );
        assert_eq!(b.idle_timeout, std::time::Duration::from_secs(2));
        assert_eq!(b.load_timeout, std::time::Duration::from_secs(3));
        assert_eq!((b.max_tabs, b.max_download_bytes), (2, 0));
        assert_eq!(b.test_allow_origins, ["http://127.0.0.1:4000"]);
    }

    #[test]
    fn every_bad_browser_value_is_reported_at_its_line_and_column() {
        let problems = load(
            "[browser]\nexecutable = \"\"\nidle_timeout = \"soon\"\nmax_tabs = 0\nmax_download_bytes = -1\ntest_allow_origins = [\"http://127.0.0.1\", \"ftp://x:1\"]\n",
        )
        .unwrap_err();
        let got: Vec<(usize, usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.col, p.field.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (2, 14, "browser.executable"),
                (3, 16, "browser.idle_timeout"),
                (4, 12, "browser.max_tabs"),
                (5, 22, "browser.max_download_bytes"),
                (6, 23, "browser.test_allow_origins[0]"),
                (6, 43, "browser.test_allow_origins[1]"),
            ],
            "{problems:#?}"
        );
    }
}
