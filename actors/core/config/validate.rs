//! Phase two: turn the file shapes into `*Def`s, checking every value a shape cannot.

use super::agent;
use super::duration::DurationText;
use super::file::{self, ConfigFile, ProviderFile};
use super::span::{Source, positionless};
use super::{
    BusDef, CheckReport, Config, DEFAULT_BIND, DEFAULT_DEDUP_WINDOW, DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL, DEFAULT_PORT, DEFAULT_PROVIDER_TIMEOUT, DEFAULT_STATE_DIR, FileReport,
    GatewayDef, LoadOptions, ModelRef, ModelRefError, Problem, ProviderDef, ProviderKind,
    SCRIPTED_PROVIDER, config_dir, is_env_name, is_name, parse_duration,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Provider names an agent may use, with their kind when it is known.
pub(super) type Known = BTreeMap<String, Option<ProviderKind>>;

/// What `clawbus.toml` contributes, defaults where it is absent or broken.
struct Gateway {
    state_dir: Option<String>,
    gateway: GatewayDef,
    bus: BusDef,
    providers: BTreeMap<String, ProviderDef>,
    default_model: ModelRef,
    known: Known,
    lanes: super::LanesDef,
    sessions: super::SessionsDef,
    skills: super::skills::SkillsPart,
    web: super::WebDef,
    browser: super::BrowserDef,
    channels: BTreeMap<String, super::ChannelDef>,
    webhooks: BTreeMap<String, super::WebhookDef>,
    prices: BTreeMap<String, super::Price>,
    delivery: super::DeliveryDef,
    store: super::StoreDef,
    cron: super::CronDef,
    sandbox: super::SandboxDef,
    mcp: super::McpDef,
    /// `[mcp.serve] agents`, each with its problem should no agent have that id.
    mcp_serve: Vec<super::mcp::ServeRef>,
}

/// Examines every file and builds the [`Config`] when nothing is wrong.
pub(super) fn check(opts: &LoadOptions) -> (CheckReport, Option<Config>) {
    let mut report = CheckReport::default();
    let (mut base, config_path) = match std::fs::read_to_string(&opts.config) {
        Ok(text) => {
            let (base, problems) = gateway_file(&Source {
                path: &opts.config,
                text: &text,
            });
            report.files.push(FileReport {
                path: opts.config.clone(),
                problems,
            });
            (base, Some(opts.config.clone()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (gateway_defaults(), None),
        Err(e) => {
            let problem = unreadable(&opts.config, &e);
            report.files.push(FileReport {
                path: opts.config.clone(),
                problems: vec![problem],
            });
            (gateway_defaults(), Some(opts.config.clone()))
        }
    };
    let mut override_problems = Vec::new();
    if let Some(text) = &opts.model_override {
        match resolve_model(text, &base.known) {
            Ok(model) => base.default_model = model,
            Err(message) => {
                override_problems.push(positionless(Path::new("<--model>"), "model", message))
            }
        }
    }
    let override_ok = override_problems.is_empty();
    let routes = super::ReplyRoutes::from_parts(&base.channels, &base.webhooks);
    let mut agents = Vec::new();
    match agent::agent_files(&opts.agents_dir) {
        Ok(files) => {
            let peers: Vec<String> = files
                .iter()
                .filter_map(|p| p.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            for path in files {
                let (agent, problems) = agent::agent_file(
                    &path,
                    &opts.agents_dir,
                    &peers,
                    &base.default_model,
                    &base.known,
                    base.gateway.timezone,
                    &routes,
                );
                report.files.push(FileReport { path, problems });
                agents.extend(agent);
            }
        }
        Err(problem) => report.files.push(FileReport {
            path: opts.agents_dir.clone(),
            problems: vec![problem],
        }),
    }
    let unknown_channel_agents: Vec<Problem> = base
        .channels
        .iter()
        .filter_map(|(name, c)| c.agent.as_ref().map(|a| (name, a)))
        .filter(|(_, a)| !agents.iter().any(|d: &super::AgentDef| &d.id == *a))
        .map(|(name, a)| {
            positionless(
                &opts.config,
                &format!("channels.{name}.agent"),
                format!(
                    "no agent \"{a}\" (expected the id of a file in {})",
                    opts.agents_dir.display()
                ),
            )
        })
        .chain(
            base.webhooks
                .iter()
                .filter(|(_, h)| !agents.iter().any(|d: &super::AgentDef| d.id == h.agent))
                .map(|(name, h)| {
                    positionless(
                        &opts.config,
                        &format!("webhooks.{name}.agent"),
                        format!(
                            "no agent \"{}\" (expected the id of a file in {})",
                            h.agent,
                            opts.agents_dir.display()
                        ),
                    )
                }),
        )
        .chain(
            base.mcp_serve
                .iter()
                .filter(|(id, _)| !agents.iter().any(|d: &super::AgentDef| d.id.as_str() == id))
                .map(|(_, problem)| problem.clone()),
        )
        .collect();
    if !unknown_channel_agents.is_empty() {
        match report.files.iter_mut().find(|f| f.path == opts.config) {
            Some(f) => f.problems.extend(unknown_channel_agents),
            None => report.files.push(FileReport {
                path: opts.config.clone(),
                problems: unknown_channel_agents,
            }),
        }
    }
    let flows = check_flows(opts, &agents, &base.lanes, &mut report);
    if !override_ok {
        report.files.push(FileReport {
            path: PathBuf::from("<--model>"),
            problems: override_problems,
        });
    }
    for agent in &mut agents {
        agent.sandbox = agent.sandbox.over(&base.sandbox);
        for problem in super::sandbox::merged_problems(&agent.sandbox, &agent.file) {
            match report.files.iter_mut().find(|f| f.path == problem.path) {
                Some(f) if f.problems.contains(&problem) => {}
                Some(f) => f.problems.push(problem),
                None => report.files.push(FileReport {
                    path: problem.path.clone(),
                    problems: vec![problem],
                }),
            }
        }
    }
    if !report.is_ok() {
        return (report, None);
    }
    if opts.model_override.is_some() {
        for agent in &mut agents {
            agent.model = base.default_model.clone();
            agent.fallbacks.clear();
        }
    }
    let state_dir = match (&opts.state_dir, &base.state_dir) {
        (Some(flag), _) => flag.clone(),
        (None, Some(file)) => config_dir(&opts.config).join(file),
        (None, None) => config_dir(&opts.config).join(DEFAULT_STATE_DIR),
    };
    tracing::debug!(agents = agents.len(), state_dir = %state_dir.display(), "Configuration loaded.");
    let config = Config {
        path: config_path,
        state_dir,
        gateway: base.gateway,
        bus: base.bus,
        providers: base.providers,
        default_model: base.default_model,
        agents,
        agents_dir: opts.agents_dir.clone(),
        lanes: base.lanes,
        sessions: base.sessions,
        skills: base.skills.resolve(&opts.config),
        web: base.web,
        browser: base.browser,
        channels: base.channels,
        webhooks: base.webhooks,
        prices: base.prices,
        delivery: base.delivery,
        store: base.store,
        cron: base.cron,
        sandbox: base.sandbox,
        flows,
        mcp: base.mcp,
    };
    (report, Some(config))
}

/// Checks every file of the flows folder next to `agents.d/`, adding each to the report.
fn check_flows(
    opts: &LoadOptions,
    agents: &[super::AgentDef],
    lanes: &super::LanesDef,
    report: &mut CheckReport,
) -> Vec<super::flow::FlowDef> {
    let dir = flows_dir(opts);
    let ids: Vec<crate::ids::AgentId> = agents.iter().map(|a| a.id.clone()).collect();
    let lanes: Vec<String> = lanes.caps.keys().cloned().collect();
    let files = match super::flow::flow_files(&dir) {
        Ok(f) => f,
        Err(problem) => {
            report.files.push(FileReport {
                path: dir,
                problems: vec![problem],
            });
            return Vec::new();
        }
    };
    let mut flows: Vec<super::flow::FlowDef> = Vec::new();
    for path in files {
        let (flow, mut problems) = super::flow::check_file(&path, &ids, &lanes);
        if let Some(f) = flow {
            match flows.iter().find(|o| o.name == f.name) {
                Some(other) => problems.push(positionless(
                    &path,
                    "flow.name",
                    format!(
                        "flow \"{}\" is also defined in {} (expected each name once)",
                        f.name,
                        other.path.display()
                    ),
                )),
                None => flows.push(f),
            }
        }
        report.files.push(FileReport { path, problems });
    }
    for p in super::flow::check_nested(&flows, &[]) {
        match report.files.iter_mut().find(|f| f.path == p.path) {
            Some(f) => f.problems.push(p),
            None => report.files.push(FileReport {
                path: p.path.clone(),
                problems: vec![p],
            }),
        }
    }
    flows
}

/// `flows.d/` next to the agents folder.
pub(super) fn flows_dir(opts: &LoadOptions) -> PathBuf {
    opts.agents_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join(super::flow::FLOWS_DIR)
}

pub(super) fn unreadable(path: &Path, e: &std::io::Error) -> Problem {
    positionless(
        path,
        "",
        format!("cannot read the file: {e} (expected a readable UTF-8 TOML file)"),
    )
}

/// The most WebSocket connections `[gateway] ws_max_connections` may allow.
const MAX_WS_CONNECTIONS: usize = 100_000;

fn gateway_defaults() -> Gateway {
    Gateway {
        state_dir: None,
        gateway: GatewayDef {
            bind: DEFAULT_BIND,
            port: DEFAULT_PORT,
            token_env: None,
            shutdown_grace: super::DEFAULT_SHUTDOWN_GRACE,
            max_body: super::DEFAULT_MAX_BODY,
            timezone: super::timezone::system_default(),
            ws_max_connections: super::DEFAULT_WS_MAX_CONNECTIONS,
            ws_max_buffered: super::DEFAULT_WS_MAX_BUFFERED,
            control_ui_dir: None,
        },
        bus: BusDef {
            dedup_window: DEFAULT_DEDUP_WINDOW,
            backend: super::BusBackend::Local,
            ack_wait: super::DEFAULT_ACK_WAIT,
            session_lease_ttl: super::DEFAULT_ACK_WAIT,
            node_id: None,
            agents_here: None,
        },
        providers: BTreeMap::new(),
        default_model: ModelRef {
            provider: SCRIPTED_PROVIDER.to_string(),
            model: "echo".to_string(),
        },
        known: BTreeMap::from([(SCRIPTED_PROVIDER.to_string(), Some(ProviderKind::Scripted))]),
        lanes: Default::default(),
        sessions: Default::default(),
        skills: Default::default(),
        web: Default::default(),
        browser: Default::default(),
        channels: BTreeMap::new(),
        webhooks: BTreeMap::new(),
        prices: BTreeMap::new(),
        delivery: Default::default(),
        store: Default::default(),
        cron: Default::default(),
        sandbox: Default::default(),
        mcp: Default::default(),
        mcp_serve: Vec::new(),
    }
}

fn gateway_file(src: &Source) -> (Gateway, Vec<Problem>) {
    let parsed = file::parse::<ConfigFile>(src);
    let mut base = gateway_defaults();
    // Every declared name counts, even a broken one, so agents are not blamed for its faults.
    for name in file::section_keys(src.text, "providers") {
        base.known.entry(name).or_insert(None);
    }
    let mut problems = Vec::new();
    let Some(f) = &parsed.value else {
        return (base, parsed.merge(problems));
    };
    base.state_dir = f.state_dir.clone();
    base.sessions = super::session::sessions_def(src, &f.sessions, &mut problems);
    base.lanes = super::lanes::lanes_def(src, &f.lanes, &mut problems);
    base.skills = super::skills::skills_part(src, &f.skills, &mut problems);
    base.web = super::web::web_def(src, &f.web, &mut problems);
    let folder = src.path.parent().unwrap_or(std::path::Path::new("."));
    base.browser = super::browser::browser_def(src, &f.browser, folder, &mut problems);
    base.channels = super::tools::channels(src, &f.channels, &mut problems);
    base.webhooks = super::webhooks::webhooks(src, &f.webhooks, &mut problems);
    base.delivery = super::delivery::delivery_def(src, &f.delivery, &mut problems);
    base.store = super::store::store_def(src, &f.store, &mut problems);
    base.cron = super::cron_limits::cron_def(src, &f.cron, &mut problems);
    base.sandbox = super::sandbox::sandbox_def(src, &f.sandbox, &mut problems);
    (base.mcp, base.mcp_serve) = super::mcp::mcp_def(src, &f.mcp, &base.sandbox, &mut problems);
    if let Some(bind) = &f.gateway.bind {
        match bind.get_ref().parse() {
            Ok(ip) => base.gateway.bind = ip,
            Err(_) => problems.push(src.at(
                Some(bind.span()),
                "gateway.bind",
                format!(
                    "invalid IP address {:?} (expected an address such as 127.0.0.1 or ::1)",
                    bind.get_ref()
                ),
            )),
        }
    }
    base.gateway.port = f.gateway.port.unwrap_or(DEFAULT_PORT);
    base.gateway.token_env = env_name(
        src,
        &f.gateway.token_env,
        "gateway.token_env",
        &mut problems,
    );
    base.gateway.shutdown_grace = duration(
        src,
        &f.gateway.shutdown_grace,
        "gateway.shutdown_grace",
        super::DEFAULT_SHUTDOWN_GRACE,
        &mut problems,
    );
    base.gateway.max_body = byte_size(
        src,
        &f.gateway.max_body,
        "gateway.max_body",
        super::DEFAULT_MAX_BODY,
        &mut problems,
    );
    base.gateway.ws_max_buffered = byte_size(
        src,
        &f.gateway.ws_max_buffered,
        "gateway.ws_max_buffered",
        super::DEFAULT_WS_MAX_BUFFERED,
        &mut problems,
    );
    if let Some(dir) = &f.gateway.control_ui_dir {
        let path = config_dir(src.path).join(dir.get_ref());
        if path.join("index.html").is_file() {
            base.gateway.control_ui_dir = Some(path);
        } else {
            problems.push(src.at(
                Some(dir.span()),
                "gateway.control_ui_dir",
                format!(
                    "{} has no index.html (expected OpenClaw's Control UI: the dist/control-ui folder of its npm package)",
                    path.display()
                ),
            ));
        }
    }
    if let Some(n) = &f.gateway.ws_max_connections {
        match usize::try_from(*n.get_ref()) {
            Ok(v) if (1..=MAX_WS_CONNECTIONS).contains(&v) => base.gateway.ws_max_connections = v,
            _ => problems.push(src.at(
                Some(n.span()),
                "gateway.ws_max_connections",
                format!(
                    "{} is out of range (expected a number of connections from 1 to {MAX_WS_CONNECTIONS})",
                    n.get_ref()
                ),
            )),
        }
    }
    if let Some(tz) = &f.gateway.timezone {
        match tz.get_ref().parse::<chrono_tz::Tz>() {
            Ok(t) => base.gateway.timezone = t,
            Err(_) => problems.push(src.at(
                Some(tz.span()),
                "gateway.timezone",
                format!(
                    "unknown timezone {:?} (expected an IANA name such as \"Europe/Paris\" or \"UTC\")",
                    tz.get_ref()
                ),
            )),
        }
    }
    if let Some(backend) = &f.bus.backend {
        match super::BusBackend::parse(backend.get_ref()) {
            Ok(b) => base.bus.backend = b,
            Err(message) => problems.push(src.at(Some(backend.span()), "bus.backend", message)),
        }
    }
    base.bus.dedup_window = duration(
        src,
        &f.bus.dedup_window,
        "bus.dedup_window",
        DEFAULT_DEDUP_WINDOW,
        &mut problems,
    );
    base.bus.ack_wait = duration(
        src,
        &f.bus.ack_wait,
        "bus.ack_wait",
        super::DEFAULT_ACK_WAIT,
        &mut problems,
    );
    base.bus.session_lease_ttl = lease_ttl(
        src,
        &f.bus.session_lease_ttl,
        "bus.session_lease_ttl",
        base.bus.ack_wait,
        &mut problems,
    );
    for (name, provider) in &f.providers {
        if let Some(kind) = provider.get_ref().kind.as_ref() {
            base.known
                .insert(name.get_ref().clone(), Some(*kind.get_ref()));
        }
        if let Some(def) = provider_def(src, name, provider, &mut problems) {
            base.providers.insert(def.name.clone(), def);
        }
    }
    base.prices = super::prices::prices(src, &f.prices, &base.known, &mut problems);
    let model = f.defaults.model.as_ref();
    let text = model.map_or(DEFAULT_MODEL, |m| m.get_ref().as_str());
    match resolve_model(text, &base.known) {
        Ok(m) => base.default_model = m,
        Err(message) => problems.push(src.at(model.map(Spanned::span), "defaults.model", message)),
    }
    (base, parsed.merge(problems))
}

fn provider_def(
    src: &Source,
    name: &Spanned<String>,
    provider: &Spanned<ProviderFile>,
    problems: &mut Vec<Problem>,
) -> Option<ProviderDef> {
    let p = provider.get_ref();
    let field = |f: &str| format!("providers.{}.{f}", name.get_ref());
    if !is_name(name.get_ref()) {
        problems.push(src.at(
            Some(name.span()),
            format!("providers.{}", name.get_ref()),
            format!(
                "invalid provider name {:?} (expected a-z, 0-9, '-' or '_')",
                name.get_ref()
            ),
        ));
    }
    let Some(kind) = &p.kind else {
        problems.push(src.at(
            Some(provider.span()),
            field("kind"),
            "missing (expected one of: openai, scripted, anthropic)",
        ));
        return None;
    };
    let kind_value = *kind.get_ref();
    if name.get_ref() == SCRIPTED_PROVIDER && kind_value != ProviderKind::Scripted {
        problems.push(src.at(
            Some(kind.span()),
            field("kind"),
            format!(
                "\"{SCRIPTED_PROVIDER}\" is the built-in scripted provider, it cannot be of kind \"{kind_value}\" (expected kind = \"scripted\" or another provider name)"
            ),
        ));
    }
    match (&p.base_url, kind_value) {
        (Some(url), _) if !is_http_url(url.get_ref()) => problems.push(src.at(
            Some(url.span()),
            field("base_url"),
            format!("{:?} is not an http(s) URL (expected e.g. \"http://127.0.0.1:11434/v1\")", url.get_ref()),
        )),
        (None, ProviderKind::OpenAi) => problems.push(src.at(
            Some(provider.span()),
            field("base_url"),
            "missing (expected the http(s) URL of an OpenAI-compatible API, e.g. \"http://127.0.0.1:11434/v1\")",
        )),
        _ => {}
    }
    Some(ProviderDef {
        name: name.get_ref().clone(),
        kind: kind_value,
        base_url: match (&p.base_url, kind_value) {
            (Some(u), _) => Some(u.get_ref().clone()),
            (None, ProviderKind::Anthropic) => Some(super::DEFAULT_ANTHROPIC_BASE_URL.to_string()),
            (None, _) => None,
        },
        api_key_env: env_name(src, &p.api_key_env, &field("api_key_env"), problems),
        timeout: duration(
            src,
            &p.timeout,
            &field("timeout"),
            DEFAULT_PROVIDER_TIMEOUT,
            problems,
        ),
        max_retries: p.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        max_response_bytes: byte_size(
            src,
            &p.max_response_bytes,
            &field("max_response_bytes"),
            super::DEFAULT_MAX_RESPONSE_BYTES,
            problems,
        ),
        max_tokens: super::model_params::provider_max_tokens(
            src,
            &p.max_tokens,
            &field("max_tokens"),
            kind_value,
            problems,
        ),
        images: p.images.unwrap_or(kind_value == ProviderKind::Anthropic),
        breaker: super::breaker::breaker_policy(
            src,
            super::breaker::BreakerFields {
                failures: &p.breaker_failures,
                cooldown: &p.breaker_cooldown,
                max_cooldown: &p.breaker_max_cooldown,
            },
            field,
            problems,
        ),
    })
}

/// Parses a model ref and checks that its provider is declared (or built in).
pub(super) fn resolve_model(text: &str, known: &Known) -> Result<ModelRef, ModelRefError> {
    let model = ModelRef::parse(text)?;
    match known.get(&model.provider) {
        None => {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            Err(ModelRefError::UnknownProvider {
                provider: model.provider,
                known: names.join(", "),
            })
        }
        Some(Some(ProviderKind::Scripted)) if !is_name(&model.model) => {
            Err(ModelRefError::ScriptedName { model: model.model })
        }
        Some(_) => Ok(model),
    }
}

fn env_name(
    src: &Source,
    value: &Option<Spanned<String>>,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    let value = value.as_ref()?;
    if is_env_name(value.get_ref()) {
        return Some(value.get_ref().clone());
    }
    // The value is not echoed: a misplaced secret must not end up in a terminal or a log.
    problems.push(src.at(
        Some(value.span()),
        field,
        "not an environment variable name (expected the NAME of a variable, [A-Z_][A-Z0-9_]*, such as OPENAI_API_KEY, never a secret itself)",
    ));
    None
}

pub(super) fn duration(
    src: &Source,
    value: &Option<Spanned<DurationText>>,
    field: &str,
    default: Duration,
    problems: &mut Vec<Problem>,
) -> Duration {
    let Some(value) = value else { return default };
    match parse_duration(&value.get_ref().0) {
        Ok(d) if d.is_zero() => {
            problems.push(src.at(
                Some(value.span()),
                field,
                "zero duration (expected more than 0, e.g. \"30s\")",
            ));
            default
        }
        Ok(d) => d,
        Err(message) => {
            problems.push(src.at(Some(value.span()), field, message));
            default
        }
    }
}

/// A lease's time to live: a duration of whole seconds, at least one (what JetStream's per-key
/// TTL keeps); `default` when unset.
fn lease_ttl(
    src: &Source,
    value: &Option<Spanned<DurationText>>,
    field: &str,
    default: Duration,
    problems: &mut Vec<Problem>,
) -> Duration {
    let before = problems.len();
    let ttl = duration(src, value, field, default, problems);
    match value {
        Some(v)
            if problems.len() == before
                && (ttl < Duration::from_secs(1) || ttl.subsec_nanos() > 0) =>
        {
            problems.push(src.at(
                Some(v.span()),
                field,
                format!(
                    "{:?} is not whole seconds (expected at least \"1s\", e.g. \"30s\": the lease store keeps whole seconds)",
                    v.get_ref().0
                ),
            ));
            default
        }
        _ => ttl,
    }
}

/// The largest byte size a `max_*` setting may name: 1 GiB.
const MAX_BYTE_SIZE: i64 = 1 << 30;

/// A size in bytes (a TOML integer), from 1 to [`MAX_BYTE_SIZE`].
pub(super) fn byte_size(
    src: &Source,
    value: &Option<Spanned<i64>>,
    field: &str,
    default: usize,
    problems: &mut Vec<Problem>,
) -> usize {
    let Some(value) = value else { return default };
    let v = *value.get_ref();
    match usize::try_from(v) {
        Ok(n) if (1..=MAX_BYTE_SIZE).contains(&v) => n,
        _ => {
            problems.push(src.at(
                Some(value.span()),
                field,
                format!("{v} is out of range (expected a number of bytes from 1 to {MAX_BYTE_SIZE}, e.g. 1048576 for 1 MiB)"),
            ));
            default
        }
    }
}

pub(super) fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| {
        let host = r.split(['/', '?', '#']).next().unwrap_or_default();
        !host.is_empty() && !r.contains(char::is_whitespace)
    })
}
