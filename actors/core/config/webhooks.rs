//! `[webhooks.<name>]` of `clawbus.toml`: inbound webhooks, each bound to one agent and signed
//! with a secret read from the environment at start (never from a file).

use super::duration::DurationText;
use super::span::Source;
use super::{Problem, is_env_name, is_name};
use crate::ids::AgentId;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// One inbound webhook (`POST /v1/hooks/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDef {
    /// The agent every delivery goes to.
    pub agent: AgentId,
    /// The environment variable holding the HMAC-SHA256 secret.
    pub secret_env: String,
    /// A fixed session name: every delivery runs in `agent:<id>:webhook:<name>:<session>`;
    /// `None`: each delivery in a session of its own (`…:webhook:<name>:<delivery id>`).
    pub session: Option<String>,
    /// Where the replies of this hook's tasks (and announcements to `webhook:<name>`) are POSTed,
    /// signed like inbound deliveries; `None`: replies are not sent anywhere.
    pub deliver_url: Option<String>,
    /// How far a delivery's `X-Clawbus-Timestamp` may be from the clock, in the past or the
    /// future, before it is refused (and how long a used signature is remembered).
    pub tolerance: Duration,
}

/// The default [`WebhookDef::tolerance`]: 5 minutes (the Stripe/Slack default).
pub(super) const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The file shape of `[webhooks.<name>]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebhookFile {
    pub agent: Option<Spanned<String>>,
    pub secret_env: Option<Spanned<String>>,
    pub session: Option<Spanned<String>>,
    pub deliver_url: Option<Spanned<String>>,
    pub tolerance: Option<Spanned<DurationText>>,
}

fn is_session_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Validates every `[webhooks.<name>]`; a hook with a problem is left out.
pub(super) fn webhooks(
    src: &Source,
    hooks: &BTreeMap<Spanned<String>, WebhookFile>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, WebhookDef> {
    let mut out = BTreeMap::new();
    for (name, h) in hooks {
        let n = name.get_ref();
        let before = problems.len();
        if !is_name(n) || n.len() > 64 {
            problems.push(src.at(
                Some(name.span()),
                format!("webhooks.{n}"),
                format!("invalid webhook name {n:?} (expected 1-64 lowercase letters, digits, '-' or '_')"),
            ));
        }
        let agent = match &h.agent {
            None => {
                problems.push(src.at(
                    Some(name.span()),
                    format!("webhooks.{n}.agent"),
                    "missing (expected the id of the agent that receives the deliveries)",
                ));
                None
            }
            Some(a) => match AgentId::parse(a.get_ref()) {
                Ok(id) => Some(id),
                Err(e) => {
                    problems.push(src.at(Some(a.span()), format!("webhooks.{n}.agent"), e));
                    None
                }
            },
        };
        let secret_env = match &h.secret_env {
            None => {
                problems.push(src.at(
                    Some(name.span()),
                    format!("webhooks.{n}.secret_env"),
                    "missing (expected the NAME of the environment variable holding the signing secret)",
                ));
                None
            }
            Some(v) if is_env_name(v.get_ref()) => Some(v.get_ref().clone()),
            // The value is not echoed: a misplaced secret must not end up in a terminal or a log.
            Some(v) => {
                problems.push(src.at(
                    Some(v.span()),
                    format!("webhooks.{n}.secret_env"),
                    "not an environment variable name (expected the NAME of a variable, [A-Z_][A-Z0-9_]*, never the secret itself)",
                ));
                None
            }
        };
        let session = match &h.session {
            Some(s) if !is_session_name(s.get_ref()) => {
                problems.push(src.at(
                    Some(s.span()),
                    format!("webhooks.{n}.session"),
                    format!(
                        "invalid session name {:?} (expected 1-128 characters of A-Z, a-z, 0-9, '-', '_' or '.')",
                        s.get_ref()
                    ),
                ));
                None
            }
            s => s.as_ref().map(|s| s.get_ref().clone()),
        };
        let deliver_url = match &h.deliver_url {
            Some(u) if !super::validate::is_http_url(u.get_ref()) => {
                problems.push(src.at(
                    Some(u.span()),
                    format!("webhooks.{n}.deliver_url"),
                    format!(
                        "{:?} is not an http(s) URL (expected e.g. \"https://ci.example.com/clawbus\")",
                        u.get_ref()
                    ),
                ));
                None
            }
            u => u.as_ref().map(|u| u.get_ref().clone()),
        };
        let tolerance = super::validate::duration(
            src,
            &h.tolerance,
            &format!("webhooks.{n}.tolerance"),
            DEFAULT_TOLERANCE,
            problems,
        );
        if let (Some(agent), Some(secret_env), true) = (agent, secret_env, problems.len() == before)
        {
            out.insert(
                n.clone(),
                WebhookDef {
                    agent,
                    secret_env,
                    session,
                    deliver_url,
                    tolerance,
                },
            );
        }
    }
    out
}
