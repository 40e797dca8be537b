//! `clawbus.toml` and `agents.d/`: parse, validate, and report every problem with `file:line:col`.
//!
//! Loading has two phases. `file` deserializes each file into a serde shape with
//! `deny_unknown_fields`, keeping `toml::Spanned` on values a later check points at; a bad entry is
//! reported and dropped so the rest of the file is still examined. `validate` then turns the
//! shapes into the `*Def` types that the rest of the crate uses. Every problem in every file is
//! collected before [`load`] fails, each rendered as
//! `agents.d/researcher.toml:7:9: field "model": unknown provider "opnai" (expected one of: local, scripted)`.
//!
//! Module map: `file` (serde shapes, span repair), `validate` (the whole check, `clawbus.toml` →
//! defs), `agent` (agent files → [`AgentDef`]), `span` (byte offset → line:col, message wording),
//! `duration` ([`parse_duration`]), `report` ([`Problem`], [`CheckReport`]), `prompt` (time zone and
//! system-prompt caps, [`PromptDef`]), `skills` (`[skills]`, [`SkillsDef`], [`AgentSkillsDef`]), `web`
//! (`[web]`, [`WebDef`]), `browser` (`[browser]`, [`BrowserDef`]), `lanes` (`[lanes]`, [`LanesDef`]), `tools` (`[tools]` profiles and groups,
//! `[channels.<name>]`, [`ToolsDef`]), `exec` (`[exec]`, [`ExecDef`]), `cron` (`[[cron]]`,
//! `[heartbeat]`), `cron_limits` (`[cron]`, [`CronDef`]), `timezone` (`[gateway] timezone` and its
//! default), `sandbox` (`[sandbox]`, [`SandboxDef`]), `mcp` (`[mcp.servers.<name>]`, `[mcp.serve]`,
//! [`McpDef`]).

mod agent;
mod breaker;
mod browser;
pub(crate) mod cron;
pub mod cron_limits;
mod delivery;
mod duration;
mod exec;
mod file;
pub mod flow;
mod lanes;
pub mod mcp;
mod mcp_transport;
mod model_params;
mod prices;
mod prompt;
mod report;
pub mod retry;
mod routes;
pub mod rules;
pub(crate) mod sandbox;
mod session;
mod skills;
mod span;
mod store;
pub mod subscribe;
mod telegram;
pub(crate) mod timezone;
mod tools;
mod validate;
mod web;
mod webhooks;

#[cfg(test)]
mod tests;

use crate::ids::AgentId;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

pub use breaker::BreakerPolicy;
pub use browser::{
    BrowserDef, DEFAULT_BROWSER_IDLE, DEFAULT_BROWSER_LOAD_TIMEOUT, DEFAULT_BROWSER_MAX_DOWNLOAD,
    DEFAULT_BROWSER_MAX_TABS, origin_of,
};
pub use cron_limits::CronDef;
pub use delivery::DeliveryDef;
pub use duration::{DurationError, parse_duration};
pub use exec::{
    ArgsPattern, DEFAULT_APPROVAL_TIMEOUT, DEFAULT_EXEC_TIMEOUT, ExecDef, ExecRule, ExecSecurity,
};
pub use lanes::{CRON_LANE, DEFAULT_WARN_AFTER, LanesDef, MAIN_LANE, MAX_LANE_CAP, SUBAGENT_LANE};
pub use mcp::{DEFAULT_MCP_TIMEOUT, McpDef, McpServerDef, McpStart, McpTransport};
pub use model_params::{ModelParams, RESERVED_BODY_KEYS, ReasoningEffort, Stop, ToolChoice};
pub use prices::Price;
pub use prompt::{
    DEFAULT_FILE_MAX_CHARS, DEFAULT_MEMORY_MAX_CHARS, DEFAULT_TOTAL_MAX_CHARS, PromptDef,
};
pub use report::{CheckReport, FileReport, Problem};
pub use routes::ReplyRoutes;
pub use sandbox::{
    Bind, NetworkMode, Origin, SandboxBackend, SandboxDef, SandboxMode, Set, WorkspaceAccess,
};
pub use session::{BindingDef, SessionDef, SessionsDef};
pub use skills::{AgentSkillsDef, DEFAULT_BUNDLED_DIR, SkillsDef, is_skill_name};
pub use store::{DEFAULT_STORE_CACHE, StoreDef};
pub use telegram::{DEFAULT_TELEGRAM_BASE_URL, TelegramDef};
pub use tools::{
    AgentRule, ChannelDef, MCP_GROUP, MCP_PREFIX, Profile, TOOL_GROUPS, ToolsDef, entry_for,
    expand, matches, mcp_tool_name,
};
pub use web::{DEFAULT_FETCH_MAX_BYTES, DEFAULT_FETCH_TIMEOUT, WebDef, WebSearchDef};
pub use webhooks::WebhookDef;

/// Tools no profile grants, not even `full`: an agent has one only when its `[tools] allow`
/// names it.
pub(crate) const OPT_IN_TOOLS: &[&str] = &["flow_run"];

/// The tool catalogue: every tool name `tools.allow`/`tools.deny`/`deny_tools` may use (besides
/// groups, see [`TOOL_GROUPS`]). Not every one is implemented yet; `clawbus tools` says which.
pub const KNOWN_TOOLS: &[&str] = &[
    "read",
    "write",
    "edit",
    "exec",
    "web_fetch",
    "web_search",
    "memory_search",
    "memory_get",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "agent_call",
    "cron",
    "message",
    "flow_run",
    "browser",
];

/// The reserved name of the built-in scripted provider, usable without declaring it.
pub(crate) const SCRIPTED_PROVIDER: &str = "scripted";

/// Default bind address of the gateway.
pub(crate) const DEFAULT_BIND: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
/// Default port of the gateway.
pub(crate) const DEFAULT_PORT: u16 = 18789;
/// Default bus dedup window.
pub(crate) const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Default `[bus] ack_wait`: how long a node may hold a NATS task without a sign of life.
pub(crate) const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// Default time a shutdown lets running turns finish.
pub(crate) const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Default cap on an HTTP request body, in bytes (`[gateway] max_body`).
pub(crate) const DEFAULT_MAX_BODY: usize = 1024 * 1024;
/// Default cap on open WebSocket connections (`[gateway] ws_max_connections`).
pub(crate) const DEFAULT_WS_MAX_CONNECTIONS: usize = 64;
/// Default cap on the bytes queued for one WebSocket client (`[gateway] ws_max_buffered`).
pub(crate) const DEFAULT_WS_MAX_BUFFERED: usize = 8 * 1024 * 1024;
/// Default cap on what one model call may stream back (text plus tool-call arguments), in bytes
/// (`[providers.<name>] max_response_bytes`).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Default `max_tokens` of an `anthropic` provider (the Messages API requires one).
pub(crate) const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 4096;
/// Default `base_url` of an `anthropic` provider.
pub(crate) const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// Default per-call model timeout of a provider.
pub(crate) const DEFAULT_PROVIDER_TIMEOUT: Duration = Duration::from_secs(120);
/// Default number of retries of a failed model call.
pub(crate) const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default model of agents that name none.
pub(crate) const DEFAULT_MODEL: &str = "scripted/echo";
/// Default name of the state folder, next to `clawbus.toml`.
pub const DEFAULT_STATE_DIR: &str = ".clawbus";

/// The whole validated configuration: the gateway file plus every agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `clawbus.toml` that was read, `None` when it was absent (all defaults).
    pub path: Option<PathBuf>,
    /// Where sessions, transcripts and the bus journal live (flag, else file, else `.clawbus`).
    pub state_dir: PathBuf,
    /// The HTTP gateway settings.
    pub gateway: GatewayDef,
    /// The bus settings.
    pub bus: BusDef,
    /// Declared providers by name (the built-in `scripted` is not listed unless declared).
    pub providers: BTreeMap<String, ProviderDef>,
    /// The model of agents that name none (the `--model` override when given).
    pub default_model: ModelRef,
    /// Every agent, in file name order.
    pub agents: Vec<AgentDef>,
    /// The `agents.d/` folder the agents were read from.
    pub agents_dir: PathBuf,
    /// Live-session cap and idle timeout (`[sessions]`).
    pub sessions: SessionsDef,
    /// Global lanes and their caps (`[lanes]`).
    pub lanes: LanesDef,
    /// Where skills come from (`[skills]`).
    pub skills: SkillsDef,
    /// `web_fetch` limits and `web_search` endpoints (`[web]`).
    pub web: WebDef,
    /// The Chromium the `browser` tool drives, and its bounds (`[browser]`).
    pub browser: BrowserDef,
    /// Per-channel tool policy (`[channels.<name>]`), by channel name.
    pub channels: BTreeMap<String, ChannelDef>,
    /// Inbound webhooks (`[webhooks.<name>]`), by name.
    pub webhooks: BTreeMap<String, WebhookDef>,
    /// Token prices (`[prices."<provider>/<model>"]`), by `provider/model`.
    pub prices: BTreeMap<String, Price>,
    /// How replies and announcements are retried (`[delivery]`).
    pub delivery: DeliveryDef,
    /// What the embedded store may keep in memory (`[store]`).
    pub store: StoreDef,
    /// The limits on jobs models add through the `cron` tool (`[cron]`).
    pub cron: CronDef,
    /// The sandbox defaults of every agent (`[sandbox]`).
    pub sandbox: SandboxDef,
    /// Every flow of `flows.d/` (next to `agents.d/`), in file name order.
    pub flows: Vec<flow::FlowDef>,
    /// The MCP servers whose tools agents may use (`[mcp.servers.<name>]`) and the agents
    /// `clawbus mcp serve` exposes (`[mcp.serve]`).
    pub mcp: McpDef,
}

/// The `[gateway]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayDef {
    /// Address the HTTP server binds.
    pub bind: IpAddr,
    /// Port the HTTP server binds (0 = any free port).
    pub port: u16,
    /// Name of an environment variable whose value overrides the token file.
    pub token_env: Option<String>,
    /// How long a shutdown lets running turns finish before it stops them (they run again on
    /// the next start).
    pub shutdown_grace: Duration,
    /// The largest request body accepted, in bytes; a larger one answers 413.
    pub max_body: usize,
    /// The timezone of cron schedules and heartbeats that name none (`[gateway] timezone`;
    /// default `timezone::system_default`).
    pub timezone: chrono_tz::Tz,
    /// The most WebSocket connections open at once; one more is refused with 503.
    pub ws_max_connections: usize,
    /// The most bytes queued for one WebSocket client: a client that reads slower than its
    /// events come is disconnected (close 1008) rather than buffered without end.
    pub ws_max_buffered: usize,
    /// OpenClaw's Control UI (the `dist/control-ui` folder of its npm package), served on the
    /// gateway's port when set (`[gateway] control_ui_dir`, relative to the config file).
    pub control_ui_dir: Option<std::path::PathBuf>,
}

/// The `[bus]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusDef {
    /// How long a request id is remembered for deduplication.
    pub dedup_window: Duration,
    /// Which bus carries the messages.
    pub backend: BusBackend,
    /// On NATS: how long a delivered task may go without an ack or a progress mark (a running
    /// one is marked every third of it) before the server gives it to another node; so also
    /// about how long the tasks of a node that died wait before they run elsewhere.
    pub ack_wait: Duration,
    /// On NATS: how long a session's lease lives past its last renewal (renewed every third of
    /// it while a run goes on), so about how long the sessions of a node that died wait before
    /// they run elsewhere; `[bus] session_lease_ttl`, default `ack_wait` (whole seconds, at
    /// least one: what JetStream's per-key TTL keeps).
    pub session_lease_ttl: Duration,
    /// This process's name among the nodes sharing a distributed bus (`clawbus up --node-id`);
    /// `None`: unnamed (one node).
    pub node_id: Option<String>,
    /// The agents this node hosts, that is consumes tasks for (`clawbus up --agents-here a,b`);
    /// `None`: every agent. The others are still known here (posted to, called, listed) and
    /// run on the nodes that host them.
    pub agents_here: Option<Vec<AgentId>>,
}

/// `[bus] backend` (or `clawbus up --bus`): which implementation of the bus the daemon runs on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BusBackend {
    /// The embedded bus: an in-process broker, tasks journaled in sled. Needs no setup.
    #[default]
    Local,
    /// NATS JetStream at `url` (`nats://host:4222`): several daemons form one system.
    Nats {
        /// The server URL.
        url: String,
    },
}

impl BusBackend {
    /// The bus backend it names.
    pub fn to_bus(&self) -> bus::Backend {
        match self {
            Self::Local => bus::Backend::Local,
            Self::Nats { url } => bus::Backend::Nats(bus::nats::NatsOptions::new(url.clone())),
        }
    }

    /// Parses the configured name: `local`, or a `nats://` (`tls://`) URL.
    pub fn parse(s: &str) -> Result<Self, UnknownBackend> {
        match s {
            "local" => Ok(Self::Local),
            url if (url.starts_with("nats://") || url.starts_with("tls://"))
                && url.len() > "nats://".len() =>
            {
                Ok(Self::Nats {
                    url: url.to_string(),
                })
            }
            other => Err(UnknownBackend {
                given: other.to_string(),
            }),
        }
    }
}

/// A bus backend name this build does not know ([`BusBackend::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown bus backend {given:?} (expected \"local\" or a URL such as \"nats://127.0.0.1:4222\")"
)]
pub struct UnknownBackend {
    /// The name given.
    pub given: String,
}

/// What protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum ProviderKind {
    /// An OpenAI-compatible `/chat/completions` endpoint.
    #[serde(rename = "openai")]
    OpenAi,
    /// The built-in scripted model (rules file or echo); no network.
    #[serde(rename = "scripted")]
    Scripted,
    /// Anthropic's native Messages API (`/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OpenAi => "openai",
            Self::Scripted => "scripted",
            Self::Anthropic => "anthropic",
        })
    }
}

/// One `[providers.<name>]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderDef {
    /// The section name, used as the `<provider>` part of model refs.
    pub name: String,
    /// The protocol.
    pub kind: ProviderKind,
    /// Base URL of an OpenAI-compatible API (`…/v1`); required for `openai`. For `anthropic`,
    /// the URL without `/v1` (default `DEFAULT_ANTHROPIC_BASE_URL`).
    pub base_url: Option<String>,
    /// NAME of the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Limit on one model call.
    pub timeout: Duration,
    /// Retries of a failed model call.
    pub max_retries: u32,
    /// The most one call may stream back (text plus tool-call arguments), in bytes.
    pub max_response_bytes: usize,
    /// `max_tokens` of requests whose agent sets none (`[providers.x] max_tokens`): always sent
    /// by `anthropic` (default `DEFAULT_ANTHROPIC_MAX_TOKENS`), sent by `openai` when set.
    pub max_tokens: Option<u32>,
    /// Whether its models accept images (`[providers.x] images`; default `true` for `anthropic`,
    /// `false` for `openai`, whose compatible servers often take text only). Where `false`,
    /// images (screenshots) are left out of requests; the text still names the file.
    pub images: bool,
    /// Its circuit breaker (`breaker_failures`, `breaker_cooldown`, `breaker_max_cooldown`).
    pub breaker: BreakerPolicy,
}

impl ProviderDef {
    /// The built-in `scripted` provider used when none is declared under that name.
    pub(crate) fn builtin_scripted() -> Self {
        Self {
            name: SCRIPTED_PROVIDER.to_string(),
            kind: ProviderKind::Scripted,
            base_url: None,
            api_key_env: None,
            timeout: DEFAULT_PROVIDER_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_tokens: None,
            images: false,
            breaker: BreakerPolicy::default(),
        }
    }
}

static BUILTIN_SCRIPTED: LazyLock<ProviderDef> = LazyLock::new(ProviderDef::builtin_scripted);

/// A model reference `"<provider>/<model>"`, e.g. `local/qwen3:8b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// The provider name (a `[providers.<name>]` section or `scripted`).
    pub provider: String,
    /// The model name passed to the provider; may itself contain `/` or `:`.
    pub model: String,
}

impl ModelRef {
    /// Splits `"<provider>/<model>"` at the first `/`; the provider must be `[a-z0-9_-]+`.
    pub fn parse(s: &str) -> Result<ModelRef, ModelRefError> {
        let Some((provider, model)) = s.split_once('/') else {
            return Err(ModelRefError::NoProvider {
                given: s.to_string(),
            });
        };
        if !is_name(provider) {
            return Err(ModelRefError::ProviderName {
                provider: provider.to_string(),
                given: s.to_string(),
            });
        }
        if model.trim().is_empty() {
            return Err(ModelRefError::EmptyModel {
                given: s.to_string(),
            });
        }
        Ok(ModelRef {
            provider: provider.to_string(),
            model: model.to_string(),
        })
    }
}

/// A text that is not a model reference ([`ModelRef::parse`]), or one naming a provider that is
/// not configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelRefError {
    /// No `/`.
    #[error(
        "model {given:?} has no provider (expected \"<provider>/<model>\", e.g. \"scripted/echo\")"
    )]
    NoProvider {
        /// The text given.
        given: String,
    },
    /// The provider part is not `[a-z0-9_-]+`.
    #[error(
        "invalid provider name {provider:?} in model {given:?} (expected \"<provider>/<model>\", e.g. \"scripted/echo\")"
    )]
    ProviderName {
        /// The provider part.
        provider: String,
        /// The text given.
        given: String,
    },
    /// Nothing after the `/`.
    #[error(
        "model {given:?} has an empty model name (expected \"<provider>/<model>\", e.g. \"scripted/echo\")"
    )]
    EmptyModel {
        /// The text given.
        given: String,
    },
    /// The provider is neither declared nor built in.
    #[error("unknown provider {provider:?} (expected one of: {known})")]
    UnknownProvider {
        /// The provider named.
        provider: String,
        /// The known providers, comma-separated.
        known: String,
    },
    /// A scripted model's name is not a file stem.
    #[error(
        "invalid scripted model name {model:?} (expected a-z, 0-9, '-' or '_': it names the file agents.d/<id>/<name>.rules.toml)"
    )]
    ScriptedName {
        /// The model name.
        model: String,
    },
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// One validated agent definition (`agents.d/<id>.toml`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    /// The file stem.
    pub id: AgentId,
    /// The file it was read from.
    pub file: PathBuf,
    /// One line on what the agent is for.
    pub description: Option<String>,
    /// The resolved model: the `--model` override, else the agent's, else the default.
    pub model: ModelRef,
    /// Models tried in order when a call to `model` fails with a rate limit, overload, server
    /// error, timeout or connection failure (`fallbacks`); emptied by the `--model` override.
    pub fallbacks: Vec<ModelRef>,
    /// `agents.d/<id>/` (workspace seed files) when that folder exists.
    pub seed_dir: Option<PathBuf>,
    /// Turn limits.
    pub limits: Limits,
    /// When a failed attempt is tried again (`[retry]` over the retry settings of `[limits]`).
    pub retry: retry::RetryPolicy,
    /// Which tools the agent may call (`[tools]`).
    pub tools: ToolsDef,
    /// How `exec` decides and runs commands (`[exec]`).
    pub exec: ExecDef,
    /// Time zone and system-prompt caps (`timezone`, `[prompt]`).
    pub prompt: PromptDef,
    /// Context window and compaction (`[session]`).
    pub session: SessionDef,
    /// Channels and peers this agent answers (`[[bindings]]`).
    pub bindings: Vec<BindingDef>,
    /// Which skills the agent may see (`[skills] allow`).
    pub skills: AgentSkillsDef,
    /// Its `[[cron]]` jobs, checked, with their stored ids (`<agent>--<id>`).
    pub cron: Vec<crate::jobs::JobSpec>,
    /// Its heartbeat (`[heartbeat]`).
    pub heartbeat: crate::jobs::HeartbeatSpec,
    /// Request parameters sent with every model call (`[model_params]`).
    pub model_params: ModelParams,
    /// Shared topics it takes work from besides `agent.<id>` (`subscribe`): each task posted to
    /// one goes to exactly one of its subscribers.
    pub subscribe: Vec<bus::Topic>,
    /// The other agents it may reach through `agent_call` and `sessions_spawn` (`may_call`),
    /// each an agent of this config, never itself (a subagent of itself needs no entry);
    /// empty by default: it reaches no other agent.
    pub may_call: Vec<AgentId>,
    /// The OS sandbox its commands run in (`[sandbox]`, over `clawbus.toml`'s).
    pub sandbox: SandboxDef,
}

impl AgentDef {
    #[cfg(test)]
    /// `agents.d/<id>/<model>.rules.toml` when it exists: the script of a scripted model.
    ///
    /// Meaningful for scripted-kind providers; `None` when the model name is not a plain file stem.
    pub(crate) fn rules_file(&self) -> Option<PathBuf> {
        self.rules_file_for(&self.model.model)
    }

    /// `agents.d/<id>/<name>.rules.toml` when it exists: the script of scripted model `name` (the
    /// agent's model or one of its fallbacks).
    pub fn rules_file_for(&self, name: &str) -> Option<PathBuf> {
        if !is_file_stem(name) {
            return None;
        }
        let path = self
            .file
            .with_file_name(self.id.as_str())
            .join(format!("{name}.rules.toml"));
        path.is_file().then_some(path)
    }

    #[cfg(test)]
    /// Whether the agent's profile and `tools.allow`/`tools.deny` let it have tool `name` (the
    /// later policy layers, availability and channel, are in `crate::tools::policy`).
    pub(crate) fn allows_tool(&self, name: &str) -> bool {
        self.tools.rule(name) == AgentRule::Allowed
    }
}

/// The `[limits]` section of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Model calls per turn before the turn is stopped (1..=200, default 20).
    pub max_iterations: u32,
    /// Wall-clock limit on one turn (default 10m).
    pub turn_timeout: Duration,
    /// Tool output longer than this is truncated before the model sees it (default 16000).
    pub tool_result_max_chars: usize,
    /// Attempts a task gets when its turn fails for a passing reason (rate limit, overload,
    /// 5xx, timeout, lost connection) before it is dead-lettered (1..=5, default 3; the bus gives
    /// up after 5 deliveries in any case).
    pub max_attempts: u32,
    /// Wait before the second attempt; it doubles per attempt, with ±20 % jitter (default 500ms).
    pub retry_backoff: Duration,
    /// The longest wait between two attempts (default 8s).
    pub retry_backoff_max: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_iterations: 20,
            turn_timeout: Duration::from_secs(600),
            tool_result_max_chars: 16_000,
            max_attempts: 3,
            retry_backoff: Duration::from_millis(500),
            retry_backoff_max: Duration::from_secs(8),
        }
    }
}

/// Where to read the configuration from and what the command line overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Path of `clawbus.toml` (absent is fine: all defaults).
    pub config: PathBuf,
    /// Path of the `agents.d/` folder (must exist).
    pub agents_dir: PathBuf,
    /// `--state-dir`: overrides the file's `state_dir`.
    pub state_dir: Option<PathBuf>,
    /// `--model` / `CLAWBUS_MODEL`: replaces every agent's model and the default model.
    pub model_override: Option<String>,
}

impl LoadOptions {
    /// The layout of a project folder `root`: `clawbus.toml`, `agents.d/` and the state in
    /// `.clawbus/`, no model override.
    pub fn in_folder(root: &std::path::Path) -> Self {
        Self {
            config: root.join("clawbus.toml"),
            agents_dir: root.join("agents.d"),
            state_dir: Some(root.join(".clawbus")),
            model_override: None,
        }
    }
}

impl Config {
    /// The agent with this id.
    pub fn agent(&self, id: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.id.as_str() == id)
    }

    /// The provider a model ref names; `scripted` resolves to the built-in one if not declared.
    pub fn provider_for(&self, m: &ModelRef) -> Option<&ProviderDef> {
        match self.providers.get(&m.provider) {
            Some(p) => Some(p),
            None if m.provider == SCRIPTED_PROVIDER => Some(&BUILTIN_SCRIPTED),
            None => None,
        }
    }
}

/// Loads and validates everything; `Err` carries every problem found in every file.
pub fn load(opts: &LoadOptions) -> Result<Config, CheckReport> {
    match check(opts) {
        (_, Some(config)) => Ok(config),
        (report, None) => Err(report),
    }
}

/// Examines every file; the config is `Some` only when there is no problem at all.
pub fn check(opts: &LoadOptions) -> (CheckReport, Option<Config>) {
    validate::check(opts)
}

/// `[a-z0-9_-]+`: provider names, scripted model names.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A name usable as a file stem inside the seed folder (no separators, not hidden).
fn is_file_stem(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// `[A-Z_][A-Z0-9_]*`: environment variable names.
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The gateway token file's name inside the state dir.
pub const TOKEN_FILE: &str = "gateway.token";

/// Where the gateway token lives for a state dir.
pub fn token_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TOKEN_FILE)
}

/// The folder a relative `state_dir` in `clawbus.toml` is resolved against.
fn config_dir(config: &Path) -> PathBuf {
    config.parent().map(Path::to_path_buf).unwrap_or_default()
}
