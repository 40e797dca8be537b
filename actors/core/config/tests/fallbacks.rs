//! `fallbacks` of agent files: model refs of known providers, placed errors.

use super::Fixture;
use crate::config::{LoadOptions, ModelRef, load};

const PROVIDERS: &str = r#"[providers.claude]
kind = "anthropic"
[providers.ollama]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
"#;

fn model(s: &str) -> ModelRef {
    ModelRef::parse(s).unwrap()
}

#[test]
fn fallbacks_are_loaded_in_order() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", PROVIDERS).write(
        "agents.d/a.toml",
        "model = \"claude/claude-sonnet-4-5\"\nfallbacks = [\"ollama/qwen3:8b\", \"scripted/echo\"]\n",
    );
    fx.write("agents.d/b.toml", "");
    let config = load(&fx.opts()).unwrap();
    let a = config.agent("a").unwrap();
    assert_eq!(
        a.fallbacks,
        [model("ollama/qwen3:8b"), model("scripted/echo")]
    );
    assert!(
        config.agent("b").unwrap().fallbacks.is_empty(),
        "none by default"
    );
}

#[test]
fn an_unknown_or_repeated_fallback_is_placed() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", PROVIDERS).write(
        "agents.d/a.toml",
        "model = \"claude/claude-sonnet-4-5\"\n\nfallbacks = [\n  \"opnai/gpt-4.1-mini\",\n  \"ollama\",\n  \"claude/claude-sonnet-4-5\",\n]\n",
    );
    let report = fx.errors(&fx.opts());
    assert_eq!(
        fx.lines(&report),
        [
            "agents.d/a.toml:4:3: field \"fallbacks[0]\": unknown provider \"opnai\" (expected one of: claude, ollama, scripted)",
            "agents.d/a.toml:5:3: field \"fallbacks[1]\": model \"ollama\" has no provider (expected \"<provider>/<model>\", e.g. \"scripted/echo\")",
            "agents.d/a.toml:6:3: field \"fallbacks[2]\": claude/claude-sonnet-4-5 is already tried before this fallback",
        ]
    );
}

#[test]
fn a_fallbacks_value_of_the_wrong_type_is_placed() {
    let fx = Fixture::new();
    fx.write("agents.d/a.toml", "fallbacks = \"scripted/echo\"\n");
    let report = fx.errors(&fx.opts());
    let lines = fx.lines(&report);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("agents.d/a.toml:1:13: field \"fallbacks\""),
        "{lines:?}"
    );
}

#[test]
fn the_model_override_drops_the_fallbacks() {
    let fx = Fixture::new();
    fx.write("clawbus.toml", PROVIDERS).write(
        "agents.d/a.toml",
        "model = \"claude/x\"\nfallbacks = [\"ollama/qwen3:8b\"]\n",
    );
    let config = load(&LoadOptions {
        model_override: Some("scripted/echo".into()),
        ..fx.opts()
    })
    .unwrap();
    let a = config.agent("a").unwrap();
    assert_eq!(a.model, model("scripted/echo"));
    assert!(a.fallbacks.is_empty());
}
