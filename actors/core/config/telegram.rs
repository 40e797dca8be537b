//! `[channels.telegram]` of `clawbus.toml`: the Telegram Bot API channel (long polling).
//!
//! ```toml
//! [channels.telegram]
//! token_env = "TELEGRAM_BOT_TOKEN"        # the bot token's environment variable, read at start
//! base_url = "https://api.telegram.org"   # default; a local fake in tests
//! allow_chats = [123456789, -1001234]     # chat ids that may talk to the agent; empty: none
//! agent = "assistant"                     # who answers chats no [[bindings]] entry claims
//! poll_timeout = "30s"                    # getUpdates long-poll timeout
//! deny_tools = ["exec"]
//! ```
//!
//! The channel polls only when `token_env` is set; a section with only `deny_tools`/`agent` is
//! policy for messages that reach `telegram` some other way.

use super::duration::DurationText;
use super::span::Source;
use super::validate::{duration, is_http_url};
use super::{Problem, is_env_name};
use crate::ids::Channel;
use std::time::Duration;
use toml::Spanned;

/// Default Bot API server.
pub const DEFAULT_TELEGRAM_BASE_URL: &str = "https://api.telegram.org";
/// Default `getUpdates` long-poll timeout.
pub(super) const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest long-poll timeout accepted.
const MAX_POLL_TIMEOUT: Duration = Duration::from_secs(120);

/// The validated polling settings of `[channels.telegram]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramDef {
    /// The environment variable holding the bot token (never the token itself).
    pub token_env: String,
    /// The Bot API server, without a trailing `/`.
    pub base_url: String,
    /// Chat ids whose messages are taken; every other chat is ignored (and logged).
    pub allow_chats: Vec<i64>,
    /// How long one `getUpdates` waits for news.
    pub poll_timeout: Duration,
}

/// The Telegram keys of a `[channels.<name>]` section (shape only; see [`telegram_def`]).
pub(super) struct TelegramKeys<'a> {
    pub token_env: &'a Option<Spanned<String>>,
    pub base_url: &'a Option<Spanned<String>>,
    pub allow_chats: &'a Option<Spanned<Vec<i64>>>,
    pub poll_timeout: &'a Option<Spanned<DurationText>>,
}

impl TelegramKeys<'_> {
    fn first_span(&self) -> Option<std::ops::Range<usize>> {
        self.token_env
            .as_ref()
            .map(Spanned::span)
            .or_else(|| self.base_url.as_ref().map(Spanned::span))
            .or_else(|| self.allow_chats.as_ref().map(Spanned::span))
            .or_else(|| self.poll_timeout.as_ref().map(Spanned::span))
    }
}

/// Validates the Telegram keys of `[channels.<channel>]`; `None` when the channel does not poll.
pub(super) fn telegram_def(
    src: &Source,
    channel: &str,
    keys: TelegramKeys<'_>,
    problems: &mut Vec<Problem>,
) -> Option<TelegramDef> {
    if Channel::Telegram != channel {
        if let Some(span) = keys.first_span() {
            problems.push(src.at(
                Some(span),
                format!("channels.{channel}"),
                "token_env, base_url, allow_chats and poll_timeout belong to [channels.telegram] only",
            ));
        }
        return None;
    }
    let field = |k: &str| format!("channels.{}.{k}", Channel::Telegram);
    let Some(token_env) = keys.token_env else {
        if let Some(span) = keys.first_span() {
            problems.push(src.at(
                Some(span),
                field("token_env"),
                "missing (expected the NAME of the environment variable holding the bot token)",
            ));
        }
        return None;
    };
    let before = problems.len();
    if !is_env_name(token_env.get_ref()) {
        // The value is not echoed: a misplaced token must not end up in a terminal or a log.
        problems.push(src.at(
            Some(token_env.span()),
            field("token_env"),
            "not an environment variable name (expected the NAME of a variable, [A-Z_][A-Z0-9_]*, never the token itself)",
        ));
    }
    let base_url = match keys.base_url {
        None => DEFAULT_TELEGRAM_BASE_URL.to_string(),
        Some(u) if is_http_url(u.get_ref()) => u.get_ref().trim_end_matches('/').to_string(),
        Some(u) => {
            problems.push(src.at(
                Some(u.span()),
                field("base_url"),
                format!(
                    "{:?} is not an http(s) URL (expected e.g. \"{DEFAULT_TELEGRAM_BASE_URL}\")",
                    u.get_ref()
                ),
            ));
            String::new()
        }
    };
    let poll_timeout = duration(
        src,
        keys.poll_timeout,
        &field("poll_timeout"),
        DEFAULT_POLL_TIMEOUT,
        problems,
    );
    if poll_timeout > MAX_POLL_TIMEOUT {
        problems.push(src.at(
            keys.poll_timeout.as_ref().map(Spanned::span),
            field("poll_timeout"),
            format!(
                "{}s is too long (expected at most {}s)",
                poll_timeout.as_secs(),
                MAX_POLL_TIMEOUT.as_secs()
            ),
        ));
    }
    let allow_chats = keys
        .allow_chats
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    (problems.len() == before).then(|| TelegramDef {
        token_env: token_env.get_ref().clone(),
        base_url,
        allow_chats,
        poll_timeout,
    })
}
