//! `[model_params]` of agent files and `kind = "anthropic"` / `max_tokens` of providers: parsed
//! into typed parameters, every bad value reported with file:line:col.

use super::Fixture;
use crate::config::{DEFAULT_ANTHROPIC_BASE_URL, ProviderKind, load};
use crate::config::{ReasoningEffort, Stop, ToolChoice};
use serde_json::json;

const PROVIDERS: &str = r#"[providers.claude]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
max_tokens = 512
"#;

#[test]
fn model_params_and_provider_max_tokens_are_loaded() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", PROVIDERS).write(
        "agents.d/a.toml",
        r#"model = "local/qwen3:8b"
[model_params]
temperature = 1
top_p = 0.9
max_tokens = 200
stop = ["END", "%%"]
seed = 42
tool_choice = "read"
parallel_tool_calls = false
reasoning_effort = "low"
extra = { top_k = 20, chat_template_kwargs = { enable_thinking = false } }
"#,
    );
    let config = load(&fx.opts()).unwrap();
    let claude = &config.providers["claude"];
    assert_eq!(claude.kind, ProviderKind::Anthropic);
    assert_eq!(claude.base_url.as_deref(), Some(DEFAULT_ANTHROPIC_BASE_URL));
    assert_eq!(claude.max_tokens, Some(4096));
    assert_eq!(config.providers["local"].max_tokens, Some(512));
    let p = &config.agent("a").unwrap().model_params;
    assert_eq!(p.temperature, Some(1.0));
    assert_eq!(p.top_p, Some(0.9));
    assert_eq!(p.max_tokens, Some(200));
    assert_eq!(p.stop, Some(Stop::Many(vec!["END".into(), "%%".into()])));
    assert_eq!(p.seed, Some(42));
    assert_eq!(p.tool_choice, Some(ToolChoice::Tool("read".into())));
    assert_eq!(p.parallel_tool_calls, Some(false));
    assert_eq!(p.reasoning_effort, Some(ReasoningEffort::Low));
    assert_eq!(p.extra["top_k"], json!(20));
    assert_eq!(
        p.extra["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
}

#[test]
fn bad_model_params_are_each_reported_at_their_value() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", PROVIDERS).write(
        "agents.d/a.toml",
        r#"model = "claude/claude-sonnet-4-5"
[tools]
profile = "minimal"
[model_params]
temperature = 2.5
top_p = -0.1
max_tokens = 0
stop = []
seed = 1
tool_choice = "exec"
reasoning_effort = "extreme"
extra = { messages = [] }
"#,
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/a.toml:5:15: field \"model_params.temperature\": 2.5 is out of range (expected a number from 0 to 2)",
            "agents.d/a.toml:6:9: field \"model_params.top_p\": -0.1 is out of range (expected a number from 0 to 1)",
            "agents.d/a.toml:7:14: field \"model_params.max_tokens\": 0 is out of range (expected a number of tokens from 1 to 4294967295)",
            "agents.d/a.toml:8:8: field \"model_params.stop\": not a stop sequence (expected a non-empty string or a non-empty array of non-empty strings)",
            "agents.d/a.toml:9:8: field \"model_params.seed\": not supported by anthropic providers (expected it only for an openai-kind model, or set it with model_params.extra)",
            "agents.d/a.toml:10:15: field \"model_params.tool_choice\": the agent cannot have tool \"exec\": it is not in its profile nor in tools.allow (expected auto, required, none, or the name of a tool the agent can have)",
            "agents.d/a.toml:11:20: field \"model_params.reasoning_effort\": unknown effort \"extreme\" (expected one of: low, medium, high)",
            "agents.d/a.toml:12:9: field \"model_params.extra.messages\": \"messages\" is set by clawbus itself (expected other keys than: model, messages, stream, tools, system)",
        ]
    );
}

#[test]
fn tool_choice_names_a_known_tool_and_wrong_types_are_placed() {
    let fx = Fixture::new();
    fx.write(
        "agents.d/a.toml",
        "[model_params]\ntool_choice = \"reed\"\nparallel_tool_calls = \"yes\"\nunknown = 1\n",
    )
    .write(
        "agents.d/b.toml",
        "[tools]\ndeny = [\"read\"]\n[model_params]\ntool_choice = \"read\"\n",
    )
    .write(
        "clawbus.toml",
        "[providers.x]\nkind = \"openai\"\nbase_url = \"http://h/v1\"\nmax_tokens = -3\n",
    );
    let lines = fx.lines(&fx.errors(&fx.opts()));
    let has = |needle: &str| {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "{needle:?} not in {lines:#?}"
        )
    };
    has("clawbus.toml:4:14: field \"providers.x.max_tokens\": -3 is out of range");
    has("agents.d/a.toml:2:15: field \"model_params.tool_choice\": unknown tool \"reed\"");
    has("agents.d/a.toml:3:23: field \"model_params.parallel_tool_calls\":");
    has("agents.d/a.toml:4:1: field \"model_params.unknown\": unknown field");
    has(
        "agents.d/b.toml:4:15: field \"model_params.tool_choice\": the agent cannot have tool \"read\": tools.deny removes it",
    );
}

#[test]
fn provider_images_default_by_kind_and_can_be_set() {
    let fx = Fixture::new();
    fx.write(
        "clawbus.toml",
        &format!(
            "{PROVIDERS}[providers.vision]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8081/v1\"\nimages = true\n[providers.blind]\nkind = \"anthropic\"\nimages = false\n"
        ),
    );
    let config = load(&fx.opts()).unwrap();
    let images = |p: &str| config.providers[p].images;
    assert!(images("claude"), "anthropic takes images by default");
    assert!(
        !images("local"),
        "openai-compatible servers take text only by default"
    );
    assert!(images("vision"));
    assert!(!images("blind"));
}
