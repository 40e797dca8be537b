use super::*;
use clawbus_core::config::{self, LoadOptions};
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn a_secret_value_is_replaced_by_its_variable_name() {
    let secrets = Secrets::default().with_names_from(
        ["OPENAI_API_KEY"],
        env(&[("OPENAI_API_KEY", "sk-live-1234567890")]),
    );
    let out = secrets.redact("key=sk-live-1234567890; again sk-live-1234567890.");
    assert_eq!(
        out,
        "key=[REDACTED:OPENAI_API_KEY]; again [REDACTED:OPENAI_API_KEY]."
    );
}

#[test]
fn text_without_secrets_is_borrowed_unchanged() {
    let secrets = Secrets::default().with_value("TOKEN", "abcdefgh12345");
    let out = secrets.redact("nothing to see");
    assert!(matches!(out, Cow::Borrowed("nothing to see")));
}

#[test]
fn short_unset_and_blank_values_are_ignored() {
    let secrets = Secrets::default().with_names_from(
        ["SHORT", "UNSET", "BLANK", "PADDED"],
        env(&[
            ("SHORT", "1234567"),
            ("BLANK", "        \n"),
            ("PADDED", "  padded-secret\n"),
        ]),
    );
    assert_eq!(secrets.names().collect::<Vec<_>>(), ["PADDED"]);
    assert_eq!(
        secrets.redact("1234567 padded-secret"),
        "1234567 [REDACTED:PADDED]"
    );
}

#[test]
fn a_secret_containing_another_is_replaced_whole() {
    let secrets = Secrets::default()
        .with_value("INNER", "abcdefgh")
        .with_value("OUTER", "xx-abcdefgh-yy");
    assert_eq!(
        secrets.redact("xx-abcdefgh-yy and abcdefgh"),
        "[REDACTED:OUTER] and [REDACTED:INNER]"
    );
}

#[test]
fn the_markdown_escaped_spelling_is_redacted_too() {
    let secrets = Secrets::default().with_value("STRIPE_KEY", "sk_live_abcdef123");
    assert_eq!(
        secrets.redact("raw sk_live_abcdef123, rendered sk\\_live\\_abcdef123"),
        "raw [REDACTED:STRIPE_KEY], rendered [REDACTED:STRIPE_KEY]"
    );
    assert_eq!(secrets.len(), 1);
}

#[test]
fn debug_shows_names_never_values() {
    let secrets = Secrets::default().with_value("API_TOKEN", "very-secret-value");
    let shown = format!("{secrets:?}");
    assert!(shown.contains("API_TOKEN"), "{shown}");
    assert!(!shown.contains("very-secret-value"), "{shown}");
}

#[test]
fn from_config_reads_provider_keys_and_search_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
    std::fs::write(
        dir.path().join("clawbus.toml"),
        "[providers.remote]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"REMOTE_KEY\"\n",
    )
    .unwrap();
    let config = config::load(&LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: dir.path().join("agents.d"),
        state_dir: None,
        model_override: None,
    })
    .unwrap();
    let secrets = Secrets::from_config_with(
        &config,
        env(&[
            ("REMOTE_KEY", "remote-key-value-1"),
            ("BRAVE_API_KEY", "brave-key-value-2"),
            ("TAVILY_API_KEY", "tvly-key-value-3"),
            ("UNRELATED", "unrelated-value-4"),
        ]),
    );
    assert_eq!(secrets.len(), 3, "{secrets:?}");
    let out =
        secrets.redact("remote-key-value-1 brave-key-value-2 tvly-key-value-3 unrelated-value-4");
    assert_eq!(
        out,
        "[REDACTED:REMOTE_KEY] [REDACTED:BRAVE_API_KEY] [REDACTED:TAVILY_API_KEY] unrelated-value-4"
    );
}

#[test]
fn the_gateway_token_and_the_channel_secrets_are_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents.d")).unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("clawbus.toml"),
        "[gateway]\ntoken_env = \"MY_GW_TOKEN\"\n[channels.telegram]\ntoken_env = \"MY_TG_TOKEN\"\n[webhooks.ci]\nagent = \"a\"\nsecret_env = \"MY_HOOK_SECRET\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("agents.d/a.toml"), "").unwrap();
    std::fs::write(
        dir.path()
            .join("state")
            .join(clawbus_core::config::TOKEN_FILE),
        "file-token-0123456789abcdef\n",
    )
    .unwrap();
    let config = config::load(&LoadOptions {
        config: dir.path().join("clawbus.toml"),
        agents_dir: dir.path().join("agents.d"),
        state_dir: Some(dir.path().join("state")),
        model_override: None,
    })
    .unwrap();
    let names = Secrets::names_in(&config);
    for secret in ["MY_GW_TOKEN", "MY_TG_TOKEN", "MY_HOOK_SECRET"] {
        assert!(names.contains(&secret.to_string()), "{secret}: {names:?}");
    }
    let secrets = Secrets::from_config_with(&config, env(&[("MY_GW_TOKEN", "env-token-98765")]));
    assert_eq!(
        secrets.redact("cat said file-token-0123456789abcdef and env-token-98765"),
        "cat said [REDACTED:gateway.token] and [REDACTED:MY_GW_TOKEN]"
    );
}

#[test]
fn a_secret_cut_by_truncation_is_redacted_up_to_the_cut() {
    let secrets = Secrets::default().with_value("API_KEY", "sk-live-0123456789");
    assert_eq!(
        secrets.redact_cut("Incorrect key: Bearer sk-live-01…"),
        "Incorrect key: Bearer [REDACTED:API_KEY]…"
    );
    assert_eq!(
        secrets.redact_cut("whole sk-live-0123456789 then cut sk-l…"),
        "whole [REDACTED:API_KEY] then cut [REDACTED:API_KEY]…"
    );
    // Fewer than 4 bytes of the head, or no cut at all: left alone.
    assert_eq!(secrets.redact_cut("ends in sk-…"), "ends in sk-…");
    assert_eq!(
        secrets.redact_cut("ends in sk-live-01"),
        "ends in sk-live-01"
    );
}
