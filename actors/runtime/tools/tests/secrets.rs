//! Secrets redacted from what tools answer, through the tool set.

mod through_the_tool_set {
    use crate::secrets::Secrets;
    use crate::tools::{Tool, ToolContext, ToolOutput, ToolSet};
    use async_trait::async_trait;
    use serde_json::json;
    use std::sync::Arc;

    /// Answers with its `text` argument, as an error when `fail` is set.
    struct Echo;

    #[async_trait]
    impl Tool for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn description(&self) -> &'static str {
            "Echoes text."
        }
        fn parameters(&self) -> serde_json::Value {
            json!({
                "type": "object",
                "properties": { "text": { "type": "string" }, "fail": { "type": "boolean" } },
                "required": ["text"]
            })
        }
        async fn call(&self, _: &ToolContext, args: serde_json::Value) -> ToolOutput {
            let text = args["text"].as_str().unwrap_or_default();
            if args["fail"].as_bool().unwrap_or(false) {
                ToolOutput::error("io", format!("could not use {text}"))
            } else {
                ToolOutput::ok(text)
            }
        }
    }

    const SECRET: &str = "sk-planted-0123456789abcdef";

    fn set() -> ToolSet {
        ToolSet::default().with(Echo).with_secrets(Arc::new(
            Secrets::default().with_value("PLANTED_KEY", SECRET),
        ))
    }

    fn ctx(dir: &tempfile::TempDir) -> ToolContext {
        ToolContext {
            workspace: dir.path().canonicalize().unwrap(),
            agent: clawbus_core::ids::AgentId::new("a"),
            session: clawbus_core::ids::SessionKey::parse("agent:a:s").unwrap(),
            channel: "api".into(),
            run: None,
        }
    }

    #[tokio::test]
    async fn a_secret_in_a_tool_output_never_reaches_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({ "text": format!("token={SECRET}\n") }).to_string();
        let out = set().invoke(&ctx(&dir), "echo", &args, 16_000).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(out.text, "token=[REDACTED:PLANTED_KEY]\n");
    }

    #[tokio::test]
    async fn error_outputs_are_redacted_too() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({ "text": SECRET, "fail": true }).to_string();
        let out = set().invoke(&ctx(&dir), "echo", &args, 16_000).await;
        assert!(out.is_error);
        assert!(!out.text.contains(SECRET), "{}", out.text);
        assert!(out.text.contains("[REDACTED:PLANTED_KEY]"), "{}", out.text);
    }

    #[tokio::test]
    async fn a_long_output_is_redacted_before_it_is_cut_and_saved() {
        let dir = tempfile::tempdir().unwrap();
        // The secret straddles the cap: cutting first would leave a prefix of it behind.
        let text = format!("{}{SECRET}{}", "x".repeat(990), "y".repeat(5000));
        let args = json!({ "text": text }).to_string();
        let out = set().invoke(&ctx(&dir), "echo", &args, 1000).await;
        assert!(!out.text.contains("sk-planted"), "{}", out.text);
        // Whatever was saved for paging holds no secret either.
        for entry in walk(dir.path()) {
            let saved = std::fs::read_to_string(&entry).unwrap_or_default();
            assert!(
                !saved.contains(SECRET),
                "{} holds the secret",
                entry.display()
            );
        }
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
