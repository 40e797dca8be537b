//! The methods OpenClaw's Control UI calls beyond the CLI's: answered with clawbus's data where
//! it has the concept (agents, sessions, history, tasks) and with OpenClaw's empty-but-valid
//! answer where it has none (talk, updates, pairing, session catalogs, provider credentials),
//! each such answer logged at debug.

use super::frames::ErrorShape;
use super::methods::{Empty, Method, params};
use super::openclaw;
use super::runs;
use crate::gateway::api::ApiState;
use crate::gateway::sessions;
use serde::Deserialize;
use serde_json::{Value, json};

/// Runs one of the Control UI's methods.
pub(super) async fn call(state: &ApiState, method: Method, p: Value) -> Result<Value, ErrorShape> {
    let empty = |answer: Value| {
        tracing::debug!(
            method = method.as_str(),
            "No counterpart here; answered empty."
        );
        Ok(answer)
    };
    match method {
        Method::ChatStartup => startup(state, p).await,
        Method::AgentIdentityGet => params::<IdentityParams>(method, p).and_then(|q| {
            let agent = q
                .agent_id
                .or_else(|| q.session_key.as_deref().and_then(agent_of_key))
                .or_else(|| state.config.agents.first().map(|a| a.id.to_string()))
                .unwrap_or_default();
            known_agent(state, &agent)?;
            Ok(openclaw::ui::identity(&agent))
        }),
        Method::SessionsMessagesSubscribe | Method::SessionsMessagesUnsubscribe => {
            // Every connection gets every session's events here: nothing to change.
            params::<MessagesParams>(method, p).map(|q| json!({ "subscribed": true, "key": q.key }))
        }
        Method::SessionsResolve => {
            let q = params::<ResolveParams>(method, p)?;
            let rows = sessions::rows(state, q.agent_id.as_deref()).await?;
            let found = rows.iter().find(|r| {
                q.key.as_deref() == Some(r.key.as_str())
                    || q.session_id.as_deref() == Some(r.session_id.as_str())
            });
            Ok(openclaw::ui::resolved(
                found.map(|r| (r.key.as_str(), r.agent.as_str())),
            ))
        }
        Method::ModelsAuthStatus => params::<AuthStatusParams>(method, p)
            .and_then(|_| empty(openclaw::ui::models_auth_status(state.clock.now_ms()))),
        Method::UpdateStatus => {
            params::<UpdateParams>(method, p).and_then(|_| empty(openclaw::ui::update_status()))
        }
        Method::TalkCatalog => {
            params::<TalkParams>(method, p).and_then(|_| empty(openclaw::ui::talk_catalog()))
        }
        Method::SessionsCatalogList => {
            params::<Empty>(method, p).and_then(|_| empty(openclaw::ui::sessions_catalog()))
        }
        Method::DevicePairList => {
            params::<Empty>(method, p).and_then(|_| empty(openclaw::ui::device_pairs()))
        }
        Method::ProgressCardGet => {
            params::<SessionParams>(method, p).and_then(|_| empty(openclaw::ui::progress_card()))
        }
        Method::SessionsBranchesList => {
            params::<SessionParams>(method, p).and_then(|_| empty(openclaw::ui::branches()))
        }
        Method::SessionsCompanionState => {
            params::<SessionParams>(method, p).and_then(|_| empty(openclaw::ui::companion()))
        }
        Method::SessionsObserverVisibility => params::<VisibilityParams>(method, p)
            .and_then(|_| empty(openclaw::ui::observer_visibility())),
        Method::EnvironmentsList => {
            params::<Empty>(method, p).and_then(|_| empty(openclaw::ui::environments()))
        }
        Method::NodeList => params::<Empty>(method, p)
            .and_then(|_| empty(openclaw::ui::nodes(state.clock.now_ms()))),
        Method::PluginsList => {
            params::<Empty>(method, p).and_then(|_| empty(openclaw::ui::plugins()))
        }
        Method::ChannelsStatus => params::<ChannelsParams>(method, p)
            .and_then(|_| empty(openclaw::ui::channels_status(state.clock.now_ms()))),
        Method::SystemInfo => params::<Empty>(method, p).map(|_| system_info(state)),
        other => Err(ErrorShape::invalid(format!(
            "{} is not one of the Control UI's methods",
            other.as_str()
        ))),
    }
}

/// `chat.startup`: with a `sessionKey`, the session's history as `chat.history` answers it;
/// with a `shortId` (a short link clawbus does not make), `{resolution: {ok: false}}`.
async fn startup(state: &ApiState, p: Value) -> Result<Value, ErrorShape> {
    if p.get("shortId").is_some() {
        let q: ShortIdParams = params(Method::ChatStartup, p)?;
        tracing::debug!(short_id = %q.short_id, "chat.startup by short id: no short ids here.");
        return Ok(json!({ "resolution": { "ok": false } }));
    }
    runs::history(state, params(Method::ChatStartup, p)?).await
}

fn system_info(state: &ApiState) -> Value {
    /// The most read of a `/proc` file.
    const MAX: u64 = 64 * 1024;
    let read = |path: &str| {
        use std::io::Read as _;
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX).read_to_string(&mut text))
            .map(|_| text.trim().to_string())
            .unwrap_or_default()
    };
    let machine = openclaw::ui::Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        release: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        memory: openclaw::ui::meminfo(&read("/proc/meminfo")),
        uptime_ms: state.clock.now_ms().saturating_sub(state.started_ms),
        port: state.config.gateway.port,
    };
    openclaw::ui::system_info(&machine)
}

fn agent_of_key(key: &str) -> Option<String> {
    key.strip_prefix("agent:")?
        .split(':')
        .next()
        .map(str::to_string)
}

fn known_agent(state: &ApiState, agent: &str) -> Result<(), ErrorShape> {
    match state.config.agent(agent) {
        Some(_) => Ok(()),
        None => Err(ErrorShape::new(
            super::frames::ErrorCode::NotFound,
            format!("no agent \"{agent}\""),
        )),
    }
}

/// `{sessionKey, agentId?}`: a session's side panels.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SessionParams {
    #[serde(rename = "sessionKey")]
    _session_key: String,
    #[serde(default, rename = "agentId")]
    _agent_id: Option<String>,
}

/// `{visible}` of `sessions.observer.visibility`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VisibilityParams {
    #[serde(rename = "visible")]
    _visible: bool,
}

/// `{probe?, timeoutMs?, channel?}` of `channels.status`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelsParams {
    #[serde(default, rename = "probe")]
    _probe: Option<bool>,
    #[serde(default, rename = "timeoutMs")]
    _timeout_ms: Option<u64>,
    #[serde(default, rename = "channel")]
    _channel: Option<String>,
}

/// `{agentId?, sessionKey?}` of `agent.identity.get`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdentityParams {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    session_key: Option<String>,
}

/// `{key, agentId?, includeApprovals?}` of `sessions.messages.(un)subscribe`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessagesParams {
    key: String,
    #[serde(default, rename = "agentId")]
    _agent_id: Option<String>,
    #[serde(default, rename = "includeApprovals")]
    _include_approvals: Option<bool>,
}

/// The fields of `sessions.resolve` honoured here (the rest are dropped by `fields`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResolveParams {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
}

/// `{refresh?, agentId?}` of `models.authStatus`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthStatusParams {
    #[serde(default, rename = "refresh")]
    _refresh: Option<bool>,
    #[serde(default, rename = "agentId")]
    _agent_id: Option<String>,
}

/// `{refreshCheckout?}` of `update.status`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateParams {
    #[serde(default, rename = "refreshCheckout")]
    _refresh_checkout: Option<bool>,
}

/// `{provider?, model?}` of `talk.catalog`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TalkParams {
    #[serde(default, rename = "provider")]
    _provider: Option<String>,
    #[serde(default, rename = "model")]
    _model: Option<String>,
}

/// `{shortId, agentId, limit?}`: `chat.startup` by a short link (`slugHint` and `maxBytes`
/// are dropped by `fields`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ShortIdParams {
    short_id: String,
    #[serde(rename = "agentId")]
    _agent_id: String,
    #[serde(default, rename = "limit")]
    _limit: Option<u64>,
}
