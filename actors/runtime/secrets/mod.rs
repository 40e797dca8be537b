//! Secret values that must never reach a model or a transcript.
//!
//! A [`Secrets`] set holds the VALUES of the environment variables that carry credentials: every
//! provider's `api_key_env`, the gateway's `token_env`, the Telegram bot token, the webhook
//! secrets, the web search keys (`SEARCH_KEY_VARS`)
//! and any extra names (skills' `requires.env`, via [`Secrets::with_names`]), plus the gateway
//! token file's content. `Secrets::redact` replaces each value found in a
//! text with `[REDACTED:<VAR_NAME>]`; [`crate::tools::ToolSet::invoke`] applies it to every tool
//! output, and the model clients to every error they return
//! ([`crate::model::ModelError::redacted`]): a provider may echo the key it was sent. Values shorter than `MIN_SECRET_LEN` are ignored: they would redact ordinary words.
//! Each value is also matched in its Markdown-escaped spelling (`sk\_live\_…`), the form a secret
//! takes in a web page that `web_fetch` rendered as Markdown.

#[cfg(test)]
mod tests;

use clawbus_core::config::Config;
use std::borrow::Cow;
use std::fmt;

/// Values shorter than this (in bytes) are not treated as secrets.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// The fewest bytes of a secret's head that [`Secrets::redact_cut`] redacts at a cut.
const CUT_HEAD_MIN: usize = 4;

/// The environment variables of the web search providers, always treated as secrets.
pub(crate) const SEARCH_KEY_VARS: &[&str] = &["BRAVE_API_KEY", "TAVILY_API_KEY"];
/// The name the gateway token (from its file) is redacted under.
pub(crate) const GATEWAY_TOKEN: &str = "gateway.token";

/// One secret: the variable it came from and its value.
#[derive(Clone)]
struct Secret {
    name: String,
    value: String,
    /// A searcher for `value`, built once: every tool output and error is searched for every
    /// secret, and setting up a substring search costs more than most searches.
    finder: memchr::memmem::Finder<'static>,
}

impl Secret {
    fn new(name: &str, value: String) -> Self {
        let finder = memchr::memmem::Finder::new(value.as_bytes()).into_owned();
        Self {
            name: name.to_string(),
            value,
            finder,
        }
    }

    /// Whether `text` holds this secret's value.
    fn is_in(&self, text: &str) -> bool {
        self.finder.find(text.as_bytes()).is_some()
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.value == other.value
    }
}

impl Eq for Secret {}

/// A set of secret values and the names of the variables that hold them.
///
/// `Debug` shows the names only, never the values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Longest value first, so a secret that contains another is replaced whole.
    entries: Vec<Secret>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.entries.iter().map(|s| &s.name))
            .finish()
    }
}

impl Secrets {
    /// The values, read from the process environment, of the variables `Secrets::names_in`
    /// lists, plus the gateway token from `<state-dir>/gateway.token` when that file exists
    /// (a command run by an agent can read the file; its output must not carry the token).
    pub fn from_config(config: &Config) -> Self {
        Self::from_config_with(config, |name| std::env::var(name).ok())
    }

    /// Same as [`Secrets::from_config`] with `lookup` in place of the process environment.
    pub(crate) fn from_config_with(
        config: &Config,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let secrets = Self::default().with_names_from(Self::names_in(config), lookup);
        let path = clawbus_core::config::token_path(&config.state_dir);
        match std::fs::read_to_string(&path) {
            Ok(token) => secrets.with_value(GATEWAY_TOKEN, token),
            Err(_) => secrets,
        }
    }

    /// The variables `config` makes secret: every provider's `api_key_env`, the gateway's
    /// `token_env`, the Telegram bot's `token_env`, every webhook's `secret_env`, every HTTP MCP
    /// server's `headers_env` and [`SEARCH_KEY_VARS`]. None of them is ever passed to a command.
    pub(crate) fn names_in(config: &Config) -> Vec<String> {
        let mut names: Vec<String> = config
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone())
            .collect();
        names.extend(config.gateway.token_env.clone());
        names.extend(
            config
                .channels
                .values()
                .filter_map(|c| c.telegram.as_ref().map(|t| t.token_env.clone())),
        );
        names.extend(config.webhooks.values().map(|h| h.secret_env.clone()));
        names.extend(SEARCH_KEY_VARS.iter().map(|s| s.to_string()));
        // The headers of HTTP MCP servers carry credentials (`Authorization`).
        names.extend(
            config
                .mcp
                .servers
                .values()
                .flat_map(|s| match &s.transport {
                    clawbus_core::config::McpTransport::Http { headers_env, .. } => {
                        headers_env.values().cloned().collect()
                    }
                    clawbus_core::config::McpTransport::Stdio { .. } => Vec::new(),
                }),
        );
        names
    }

    /// Adds the values of the environment variables `names` (unset or short ones are skipped).
    pub fn with_names<I, S>(self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.with_names_from(names, |name| std::env::var(name).ok())
    }

    /// Adds the values `lookup` gives for `names` (`None` or short ones are skipped).
    pub(crate) fn with_names_from<I, S>(
        mut self,
        names: I,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for name in names {
            let name = name.as_ref();
            if let Some(value) = lookup(name) {
                self.insert(name, value);
            }
        }
        self.sort();
        self
    }

    /// Adds one secret value under `name` (ignored when shorter than `MIN_SECRET_LEN`).
    pub fn with_value(mut self, name: &str, value: impl Into<String>) -> Self {
        self.insert(name, value.into());
        self.sort();
        self
    }

    /// How many variables contributed a secret value.
    pub fn len(&self) -> usize {
        let mut names: Vec<&str> = self.names().collect();
        names.dedup();
        names.len()
    }

    /// Whether the set holds no value.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The variable names, sorted, each once.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self.entries.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    /// `text` with every secret value replaced by `[REDACTED:<VAR_NAME>]`; borrowed when there is
    /// nothing to replace.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.entries {
            if secret.is_in(&out) {
                let replaced = out.replace(
                    secret.value.as_str(),
                    &format!("[REDACTED:{}]", secret.name),
                );
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    /// Like [`Secrets::redact`], for a text that may have been cut short with a trailing `…`
    /// (an error body kept to its first characters): a cut secret's head (4 bytes or more) just
    /// before the `…` is redacted too.
    pub(crate) fn redact_cut<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let out = self.redact(text);
        let Some(head) = out.strip_suffix('…') else {
            return out;
        };
        for secret in &self.entries {
            let value = secret.value.as_str();
            let cut = (CUT_HEAD_MIN..value.len())
                .rev()
                .filter(|&n| value.is_char_boundary(n))
                .find(|&n| head.ends_with(&value[..n]));
            if let Some(n) = cut {
                let kept = &head[..head.len() - n];
                return Cow::Owned(format!("{kept}[REDACTED:{}]…", secret.name));
            }
        }
        out
    }

    fn insert(&mut self, name: &str, value: String) {
        // Surrounding whitespace (a trailing newline from a file) is not part of what leaks.
        let value = value.trim();
        if value.len() < MIN_SECRET_LEN || self.entries.iter().any(|s| s.value == value) {
            return;
        }
        let escaped = markdown_escaped(value);
        if escaped != value {
            self.entries.push(Secret::new(name, escaped));
        }
        self.entries.push(Secret::new(name, value.to_string()));
    }

    fn sort(&mut self) {
        self.entries
            .sort_by(|a, b| b.value.len().cmp(&a.value.len()).then(a.name.cmp(&b.name)));
    }
}

/// `value` with the characters Markdown renderers escape in prose (backslash, `_`, `*`, `[`, `]`,
/// backtick) escaped.
fn markdown_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if matches!(c, '\\' | '_' | '*' | '[' | ']' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
