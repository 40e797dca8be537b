use super::*;
use std::fs;
use tempfile::TempDir;

mod cron;
mod fallbacks;
mod mcp;
mod model_params;
mod prices;
mod retry;
mod sandbox;
mod subscribe;
mod user_input;

/// A folder holding `clawbus.toml` (optional) and `agents.d/`.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("agents.d")).unwrap();
        Self { dir }
    }

    fn write(&self, rel: &str, text: &str) -> &Self {
        let path = self.dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        self
    }

    fn opts(&self) -> LoadOptions {
        LoadOptions {
            config: self.dir.path().join("clawbus.toml"),
            agents_dir: self.dir.path().join("agents.d"),
            state_dir: None,
            model_override: None,
        }
    }

    fn errors(&self, opts: &LoadOptions) -> CheckReport {
        load(opts).expect_err("the configuration must be rejected")
    }

    /// The report with the tempdir prefix removed, so paths read `agents.d/x.toml`.
    fn render(&self, report: &CheckReport) -> String {
        report
            .render()
            .replace(&format!("{}/", self.dir.path().display()), "")
    }

    fn lines(&self, report: &CheckReport) -> Vec<String> {
        let prefix = format!("{}/", self.dir.path().display());
        report
            .problems()
            .map(|p| p.to_string().replace(&prefix, ""))
            .collect()
    }
}

#[test]
fn missing_clawbus_toml_means_all_defaults() {
    let fx = Fixture::new();
    fx.write("agents.d/helper.toml", "");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.path, None);
    assert_eq!(config.state_dir, fx.dir.path().join(".clawbus"));
    assert_eq!(
        config.gateway,
        GatewayDef {
            bind: DEFAULT_BIND,
            port: 18789,
            token_env: None,
            shutdown_grace: Duration::from_secs(10),
            max_body: 1024 * 1024,
            ws_max_connections: crate::config::DEFAULT_WS_MAX_CONNECTIONS,
            ws_max_buffered: crate::config::DEFAULT_WS_MAX_BUFFERED,
            control_ui_dir: None,
            timezone: crate::config::timezone::system_default(),
        }
    );
    assert_eq!(config.bus.dedup_window, Duration::from_secs(86_400));
    assert!(config.providers.is_empty());
    assert_eq!(config.default_model.to_string(), "scripted/echo");
    let agent = config.agent("helper").expect("agent helper is loaded");
    assert_eq!(agent.model, config.default_model);
    assert_eq!(agent.limits, Limits::default());
    assert_eq!(agent.seed_dir, None);
    assert!(agent.allows_tool("read") && agent.allows_tool("write"));
    let scripted = config
        .provider_for(&agent.model)
        .expect("scripted is built in");
    assert_eq!(scripted.kind, ProviderKind::Scripted);
    assert_eq!(agent.rules_file(), None);
}

const FULL: &str = r#"state_dir = "state"
[gateway]
bind = "0.0.0.0"
port = 9000
token_env = "CLAWBUS_TOKEN"
[bus]
dedup_window = "1h30m"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "OPENAI_API_KEY"
timeout = "30s"
max_retries = 1
[defaults]
model = "local/qwen3:8b"
"#;

#[test]
fn full_config_is_loaded() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", FULL)
        .write(
            "agents.d/researcher.toml",
            "description = \"Finds things out.\"\nmodel = \"scripted/plan\"\n[limits]\nmax_iterations = 5\nturn_timeout = \"2m\"\ntool_result_max_chars = 100\n[tools]\nallow = [\"read\", \"write\"]\ndeny = [\"write\"]\n",
        )
        .write("agents.d/researcher/SOUL.md", "You research.")
        .write("agents.d/researcher/plan.rules.toml", "")
        .write("agents.d/writer.toml", "")
        .write("agents.d/README.md", "not an agent")
        .write("agents.d/notes/x.toml", "not an agent either");
    let config = load(&fx.opts()).unwrap();
    let dir = fx.dir.path();
    assert_eq!(config.path, Some(dir.join("clawbus.toml")));
    assert_eq!(config.state_dir, dir.join("state"));
    assert_eq!(config.gateway.bind.to_string(), "0.0.0.0");
    assert_eq!(config.gateway.port, 9000);
    assert_eq!(config.gateway.token_env.as_deref(), Some("CLAWBUS_TOKEN"));
    assert_eq!(config.bus.dedup_window, Duration::from_secs(5400));
    let local = &config.providers["local"];
    assert_eq!(local.kind, ProviderKind::OpenAi);
    assert_eq!(local.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
    assert_eq!(local.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(
        (local.timeout, local.max_retries),
        (Duration::from_secs(30), 1)
    );

    let ids: Vec<&str> = config.agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["researcher", "writer"],
        "only *.toml files are agents, in name order"
    );
    let researcher = config.agent("researcher").unwrap();
    assert_eq!(researcher.description.as_deref(), Some("Finds things out."));
    assert_eq!(researcher.model.to_string(), "scripted/plan");
    assert_eq!(researcher.seed_dir, Some(dir.join("agents.d/researcher")));
    assert_eq!(
        researcher.rules_file(),
        Some(dir.join("agents.d/researcher/plan.rules.toml"))
    );
    assert_eq!(researcher.limits.max_iterations, 5);
    assert_eq!(researcher.limits.turn_timeout, Duration::from_secs(120));
    assert_eq!(researcher.limits.tool_result_max_chars, 100);
    assert!(researcher.allows_tool("read"));
    assert!(!researcher.allows_tool("write"), "deny wins over allow");
    let writer = config.agent("writer").unwrap();
    assert_eq!(
        writer.model.to_string(),
        "local/qwen3:8b",
        "agents without a model get the default"
    );
    assert_eq!(config.provider_for(&writer.model), Some(local));

    let mut opts = fx.opts();
    opts.model_override = Some("scripted/echo".into());
    opts.state_dir = Some(PathBuf::from("elsewhere"));
    let config = load(&opts).unwrap();
    assert!(
        config
            .agents
            .iter()
            .all(|a| a.model.to_string() == "scripted/echo")
    );
    assert_eq!(
        config.state_dir,
        PathBuf::from("elsewhere"),
        "the flag overrides the file"
    );
}

#[test]
fn unknown_field_points_at_its_key() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[gateway]\nbind = \"127.0.0.1\"\n  prot = 1\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.render(&report),
        "✗ clawbus.toml\n  clawbus.toml:3:3: field \"gateway.prot\": unknown field \"prot\" (expected one of: bind, port, token_env, shutdown_grace, max_body, timezone, ws_max_connections, ws_max_buffered, control_ui_dir)\n"
    );
}

#[test]
fn bad_type_points_at_the_value() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[gateway]\nport = \"x\"\n");
    let report = fx.errors(&fx.opts());
    let p = report.problems().next().unwrap();
    assert_eq!((p.line, p.col, p.field.as_str()), (2, 8, "gateway.port"));
    assert_eq!(
        p.message,
        "invalid type: string \"x\" (expected an integer from 0 to 65535)"
    );
}

#[test]
fn unknown_provider_points_at_the_model_value() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[providers.openai-local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n")
        .write(
            "agents.d/researcher.toml",
            "# The researcher.\n\ndescription = \"Finds things out.\"\n\n[limits]\nmax_iterations = 3\n[tools]\nallow = [\"read\"]\n",
        );
    load(&fx.opts()).unwrap();
    fx.write(
        "agents.d/researcher.toml",
        "# The researcher.\n\ndescription = \"Finds things out.\"\n\n\n\nmodel = \"opnai/gpt-4o\"\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/researcher.toml:7:9: field \"model\": unknown provider \"opnai\" (expected one of: openai-local, scripted)"
        ]
    );
    assert_eq!(
        fx.render(&report),
        "✓ clawbus.toml\n✗ agents.d/researcher.toml\n  agents.d/researcher.toml:7:9: field \"model\": unknown provider \"opnai\" (expected one of: openai-local, scripted)\n"
    );
}

#[test]
fn every_problem_in_every_file_is_reported() {
    let fx = Fixture::new();
    fx.write("agents.d/alpha.toml", "modle = \"scripted/echo\"\n[limits]\nmax_iterations = \"many\"\nturn_timeout = \"10x\"\n[tools]\nallow = [\"read\", \"web\"]\n")
        .write("agents.d/beta.toml", "model = \"nope/x\"\n[limits]\nmax_iterations = 0\n")
        .write("agents.d/gamma.toml", "");
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.render(&report),
        [
            "✗ agents.d/alpha.toml",
            "  agents.d/alpha.toml:1:1: field \"modle\": unknown field \"modle\" (expected one of: description, model, fallbacks, limits, retry, tools, exec, timezone, prompt, session, bindings, skills, cron, heartbeat, model_params, subscribe, may_call, sandbox)",
            "  agents.d/alpha.toml:3:18: field \"limits.max_iterations\": invalid type: string \"many\" (expected an integer from 0 to 4294967295)",
            "  agents.d/alpha.toml:4:16: field \"limits.turn_timeout\": invalid duration \"10x\": unknown unit \"x\" (expected a number followed by ms, s, m, h or d, e.g. \"30s\" or \"1h30m\")",
            "  agents.d/alpha.toml:6:18: field \"tools.allow\": unknown tool \"web\" (expected one of: read, write, edit, exec, web_fetch, web_search, memory_search, memory_get, sessions_list, sessions_history, sessions_send, sessions_spawn, agent_call, cron, message, flow_run, browser, or a group: group:fs, group:runtime, group:web, group:memory, group:sessions, group:messaging, group:agents, group:automation, group:ui, group:mcp, group:mcp:<server>, or an MCP tool mcp__<server>__<tool>)",
            "✗ agents.d/beta.toml",
            "  agents.d/beta.toml:1:9: field \"model\": unknown provider \"nope\" (expected one of: scripted)",
            "  agents.d/beta.toml:3:18: field \"limits.max_iterations\": 0 is out of range (expected 1 to 200)",
            "✓ agents.d/gamma.toml",
            "",
        ]
        .join("\n")
    );
    assert!(!report.is_ok());
    let (report, config) = check(&fx.opts());
    assert!(config.is_none() && report.problems().count() == 6);
}

#[test]
fn invalid_agent_file_name_is_a_problem() {
    let fx = Fixture::new();
    fx.write("agents.d/Bad Name.toml", "");
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/Bad Name.toml: invalid agent id \"Bad Name\" (expected 1-64 characters of a-z, 0-9, '-' or '_', starting with a letter or digit)"
        ]
    );
}

#[test]
fn bad_durations_are_reported_in_the_gateway_file() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[bus]\ndedup_window = \"24\"\n[providers.p]\nkind = \"scripted\"\ntimeout = \"0s\"\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:2:16: field \"bus.dedup_window\": invalid duration \"24\": missing unit (expected a number followed by ms, s, m, h or d, e.g. \"30s\" or \"1h30m\")",
            "clawbus.toml:5:11: field \"providers.p.timeout\": zero duration (expected more than 0, e.g. \"30s\")",
        ]
    );
}

#[test]
fn provider_mistakes_are_reported_without_echoing_secrets() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[providers.scripted]\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n[providers.remote]\nkind = \"openai\"\napi_key_env = \"sk-secret123\"\n[providers.odd]\nkind = \"opnai\"\n[providers.nokind]\n",
    )
    .write("agents.d/a.toml", "model = \"odd/m\"\n");
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert_eq!(
        lines,
        [
            "clawbus.toml:2:8: field \"providers.scripted.kind\": \"scripted\" is the built-in scripted provider, it cannot be of kind \"openai\" (expected kind = \"scripted\" or another provider name)",
            "clawbus.toml:4:1: field \"providers.remote.base_url\": missing (expected the http(s) URL of an OpenAI-compatible API, e.g. \"http://127.0.0.1:11434/v1\")",
            "clawbus.toml:6:15: field \"providers.remote.api_key_env\": not an environment variable name (expected the NAME of a variable, [A-Z_][A-Z0-9_]*, such as OPENAI_API_KEY, never a secret itself)",
            "clawbus.toml:8:8: field \"providers.odd.kind\": unknown variant \"opnai\" (expected one of: openai, scripted, anthropic)",
            "clawbus.toml:9:1: field \"providers.nokind.kind\": missing (expected one of: openai, scripted, anthropic)",
        ],
        "a broken provider is reported once, and agents naming it are not blamed"
    );
    assert!(!fx.render(&report).contains("sk-secret123"));
}

#[test]
fn syntax_errors_are_placed_and_name_their_key() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[gateway]\nport = = 3\n").write(
        "agents.d/a.toml",
        "description = \"x\"\nmodel = scripted/echo\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:2:8: field \"gateway.port\": extra \"=\" (expected nothing)",
            "agents.d/a.toml:2:9: field \"model\": string values must be quoted (expected literal string)",
        ]
    );
}

#[test]
fn missing_agents_dir_names_the_path() {
    let fx = Fixture::new();
    let mut opts = fx.opts();
    opts.agents_dir = fx.dir.path().join("nowhere");
    let report = fx.errors(&opts);
    assert_eq!(
        fx.render(&report),
        "✗ nowhere\n  nowhere: agents folder not found (expected a folder of <id>.toml agent files)\n"
    );
}

#[test]
fn bad_model_override_is_one_problem() {
    let fx = Fixture::new();
    fx.write("agents.d/a.toml", "").write("agents.d/b.toml", "");
    let mut opts = fx.opts();
    opts.model_override = Some("gpt-4o".into());
    let report = fx.errors(&opts);
    assert_eq!(
        fx.lines(&report),
        [
            "<--model>: field \"model\": model \"gpt-4o\" has no provider (expected \"<provider>/<model>\", e.g. \"scripted/echo\")"
        ]
    );
}

#[test]
fn model_refs_parse_and_display() {
    let m = ModelRef::parse("local/qwen3:8b").unwrap();
    assert_eq!(
        (m.provider.as_str(), m.model.as_str()),
        ("local", "qwen3:8b")
    );
    assert_eq!(
        ModelRef::parse("or/meta/llama").unwrap().model,
        "meta/llama"
    );
    assert_eq!(m.to_string(), "local/qwen3:8b");
    assert!(ModelRef::parse("local/").is_err());
    assert!(ModelRef::parse("Local/x").is_err());
}

#[test]
fn durations_parse() {
    let ok = [
        ("500ms", 500),
        ("30s", 30_000),
        ("2m", 120_000),
        ("24h", 86_400_000),
        ("1h30m", 5_400_000),
        ("1d", 86_400_000),
        ("1h 30m", 5_400_000),
        ("1.5s", 1_500),
        ("3 s", 3_000),
        ("2days", 172_800_000),
    ];
    for (text, ms) in ok {
        assert_eq!(
            parse_duration(text),
            Ok(Duration::from_millis(ms)),
            "{text}"
        );
    }
    let why = |bad: &str| {
        let Err(e) = parse_duration(bad) else {
            panic!("{bad:?} must be rejected");
        };
        let e = e.to_string();
        let (head, tail) = e
            .split_once(" (expected a number followed by ms, s, m, h or d")
            .unwrap_or_else(|| panic!("{bad:?}: {e} says what is expected"));
        assert!(tail.ends_with("e.g. \"30s\" or \"1h30m\")"), "{e}");
        head.to_string()
    };
    assert_eq!(why(""), "empty duration");
    assert_eq!(why("  "), "empty duration");
    assert_eq!(why("30"), "invalid duration \"30\": missing unit");
    assert_eq!(
        why("s"),
        "invalid duration \"s\": a number must come before each unit"
    );
    assert_eq!(why("10x"), "invalid duration \"10x\": unknown unit \"x\"");
    assert_eq!(
        why("-1s"),
        "invalid duration \"-1s\": a number must come before each unit"
    );
    assert_eq!(
        why("1s!"),
        "invalid duration \"1s!\": unexpected character '!'"
    );
    assert_eq!(
        why("99999999999999999999s"),
        "invalid duration \"99999999999999999999s\": too large or too precise"
    );
}

#[test]
fn columns_count_characters() {
    assert_eq!(span::line_col("a = \"é\"\nbb = 1", 0), (1, 1));
    assert_eq!(span::line_col("é = 1", 3), (1, 3));
    assert_eq!(span::line_col("a\nbc", 3), (2, 2));
}

#[test]
fn byte_sizes_are_read_and_checked() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[gateway]\nmax_body = 2048\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmax_response_bytes = 4096\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.gateway.max_body, 2048);
    assert_eq!(config.providers["local"].max_response_bytes, 4096);

    fx.write(
        "clawbus.toml",
        "[gateway]\nmax_body = 0\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmax_response_bytes = -1\n",
    );
    let report = fx.errors(&fx.opts());
    let found: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].ends_with(":2:12: field \"gateway.max_body\": 0 is out of range (expected a number of bytes from 1 to 1073741824, e.g. 1048576 for 1 MiB)"),
        "{found:?}"
    );
    assert!(
        found[1]
            .contains(":7:22: field \"providers.local.max_response_bytes\": -1 is out of range"),
        "{found:?}"
    );
}

#[test]
fn the_store_section_sets_the_cache_and_the_replay_log_and_checks_them() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.store, super::StoreDef::default());
    assert_eq!(config.store.cache, super::DEFAULT_STORE_CACHE);

    fx.write(
        "clawbus.toml",
        "[store]\ncache = 1048576\nreplay_log = 65536\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.store.cache, 1_048_576);
    assert_eq!(config.store.replay_log, 65_536);

    fx.write("clawbus.toml", "[store]\ncache = 0\nreplay_log = \"big\"\n");
    let report = fx.errors(&fx.opts());
    let found: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].ends_with(":2:9: field \"store.cache\": 0 is out of range (expected a number of bytes from 1 to 1073741824, e.g. 1048576 for 1 MiB)"),
        "{found:?}"
    );
    assert!(
        found[1].contains(":3:14: field \"store.replay_log\""),
        "{found:?}"
    );
}

#[test]
fn the_history_cache_of_live_sessions_is_set_in_bytes_and_checked() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(
        config.sessions.history_cache,
        super::session::DEFAULT_HISTORY_CACHE
    );

    fx.write("clawbus.toml", "[sessions]\nhistory_cache = 65536\n");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.sessions.history_cache, 65_536);

    fx.write("clawbus.toml", "[sessions]\nhistory_cache = 0\n");
    let report = fx.errors(&fx.opts());
    let found: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(":2:17: field \"sessions.history_cache\": 0 is out of range"),
        "{found:?}"
    );
}

#[test]
fn provider_breaker_settings_are_read_and_checked() {
    let fx = Fixture::new();
    let provider = "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    fx.write(
        "clawbus.toml",
        &format!("{provider}breaker_failures = 3\nbreaker_cooldown = \"10s\"\nbreaker_max_cooldown = \"1m\"\n"),
    );
    let config = load(&fx.opts()).unwrap();
    let policy = config.providers["local"].breaker;
    assert_eq!(policy.failures, 3);
    assert_eq!(policy.cooldown, std::time::Duration::from_secs(10));
    assert_eq!(policy.max_cooldown, std::time::Duration::from_secs(60));

    fx.write(
        "clawbus.toml",
        &format!("{provider}breaker_failures = 0\nbreaker_cooldown = \"10m\"\nbreaker_max_cooldown = \"1m\"\n"),
    );
    let report = fx.errors(&fx.opts());
    let found: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains(":4:20: field \"providers.local.breaker_failures\": 0 is out of range"),
        "{found:?}"
    );
    assert!(
        found[1].contains(":6:24: field \"providers.local.breaker_max_cooldown\": 1m is shorter than breaker_cooldown (600s)"),
        "{found:?}"
    );
}

#[test]
fn control_ui_dir_must_hold_the_control_uis_index_html() {
    let fx = Fixture::new();
    fx.write("ui/assets/app.js", "x");
    fx.write("clawbus.toml", "[gateway]\ncontrol_ui_dir = \"ui\"\n");
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("clawbus.toml:2:18: field \"gateway.control_ui_dir\": ")
            && lines[0].contains("has no index.html"),
        "{lines:?}"
    );
    fx.write("ui/index.html", "<html>");
    let config = crate::config::load(&fx.opts()).unwrap();
    assert_eq!(
        config.gateway.control_ui_dir,
        Some(fx.dir.path().join("ui")),
        "relative to the config file"
    );
}

#[test]
fn a_nats_bus_is_configured_by_url_and_a_bad_one_is_reported_where_it_is() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        "[bus]\nbackend = \"nats://127.0.0.1:4222\"\nack_wait = \"5s\"\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(
        config.bus.backend,
        super::BusBackend::Nats {
            url: "nats://127.0.0.1:4222".into()
        }
    );
    assert_eq!(config.bus.ack_wait, Duration::from_secs(5));
    fx.write(
        "clawbus.toml",
        "[bus]\nbackend = \"redis://x\"\nack_wait = \"0s\"\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "clawbus.toml:2:11: field \"bus.backend\": unknown bus backend \"redis://x\" (expected \"local\" or a URL such as \"nats://127.0.0.1:4222\")",
            "clawbus.toml:3:12: field \"bus.ack_wait\": zero duration (expected more than 0, e.g. \"30s\")",
        ]
    );
}

#[test]
fn the_session_lease_ttl_is_its_own_setting_and_defaults_to_ack_wait() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", "[bus]\nack_wait = \"5s\"\n");
    let config = load(&fx.opts()).unwrap();
    assert_eq!(
        config.bus.session_lease_ttl,
        Duration::from_secs(5),
        "unset: as long as ack_wait, as before"
    );
    fx.write(
        "clawbus.toml",
        "[bus]\nack_wait = \"5s\"\nsession_lease_ttl = \"2m\"\n",
    );
    let config = load(&fx.opts()).unwrap();
    assert_eq!(config.bus.session_lease_ttl, Duration::from_secs(120));
    assert_eq!(config.bus.ack_wait, Duration::from_secs(5));
    fx.write("clawbus.toml", "[bus]\nsession_lease_ttl = \"500ms\"\n");
    assert_eq!(
        fx.lines(&fx.errors(&fx.opts())),
        [
            "clawbus.toml:2:21: field \"bus.session_lease_ttl\": \"500ms\" is not whole seconds (expected at least \"1s\", e.g. \"30s\": the lease store keeps whole seconds)"
        ]
    );
    for (bad, why) in [
        ("0s", "zero duration (expected more than 0, e.g. \"30s\")"),
        ("soon", ""),
    ] {
        fx.write(
            "clawbus.toml",
            &format!("[bus]\nsession_lease_ttl = \"{bad}\"\n"),
        );
        let lines = fx.lines(&fx.errors(&fx.opts()));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("clawbus.toml:2:21: field \"bus.session_lease_ttl\": ")
                && lines[0].ends_with(why),
            "{lines:?}"
        );
    }
}
