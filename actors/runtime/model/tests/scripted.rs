use serde_json::json;

use crate::model::{ChatMessage, ChatModel, ChatRequest, ScriptedModel, ToolCall};

const RULES: &str = r#"
[[rule]]
match = "read (?P<path>\\S+)"
tool = "read"
args = { path = "$path", note = "from ${path}", limit = 10 }
then = "Here is ${path}: {{result}}"

[[rule]]
match = "(?i)hello"
reply = "Hello! I am a scripted agent."

[[rule]]
match = "list"
tool = "list"
"#;

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "scripted/demo".into(),
        messages,
        tools: Default::default(),
    }
}

async fn say(model: &ScriptedModel, text: &str) -> crate::model::ModelReply {
    let req = request(vec![ChatMessage::system("sys"), ChatMessage::user(text)]);
    model.complete(&req).await.unwrap()
}

#[tokio::test]
async fn tool_rule_calls_the_tool_then_replies_with_the_result() {
    let model = ScriptedModel::from_rules_str(RULES).unwrap();
    let first = say(&model, "please read notes/today.md now").await;
    assert_eq!(first.text, None);
    assert_eq!(first.finish_reason.as_deref(), Some("tool_calls"));
    let call = &first.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "read"));
    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(
        args,
        json!({ "path": "notes/today.md", "note": "from notes/today.md", "limit": 10 })
    );

    let req = request(vec![
        ChatMessage::user("please read notes/today.md now"),
        ChatMessage::assistant(None, first.tool_calls.clone()),
        ChatMessage::tool("call_1", "the file body costs $5"),
    ]);
    let second = model.complete(&req).await.unwrap();
    assert_eq!(
        second.text.as_deref(),
        Some("Here is notes/today.md: the file body costs $5"),
        "captures expand in `then`; the result's own `$` stays"
    );
    assert!(second.tool_calls.is_empty());
}

#[tokio::test]
async fn tool_result_is_truncated_and_then_defaults_to_the_result() {
    let model = ScriptedModel::from_rules_str(RULES).unwrap();
    let req = request(vec![
        ChatMessage::user("list"),
        ChatMessage::assistant(None, vec![]),
        ChatMessage::tool("call_1", "y".repeat(5000)),
    ]);
    let text = model.complete(&req).await.unwrap().text.unwrap();
    assert!(
        text.starts_with("yyy") && text.chars().count() <= 2001,
        "{} chars",
        text.len()
    );
}

#[tokio::test]
async fn tool_call_ids_count_assistant_messages() {
    let model = ScriptedModel::from_rules_str(RULES).unwrap();
    let earlier = ToolCall {
        id: "call_1".into(),
        name: "list".into(),
        arguments: "{}".into(),
    };
    let req = request(vec![
        ChatMessage::user("list"),
        ChatMessage::assistant(None, vec![earlier]),
        ChatMessage::tool("call_1", "a b"),
        ChatMessage::assistant(Some("a b".into()), vec![]),
        ChatMessage::user("list again"),
    ]);
    let reply = model.complete(&req).await.unwrap();
    assert_eq!(reply.tool_calls[0].id, "call_3");
    assert_eq!(reply.tool_calls[0].arguments, "{}");
}

#[tokio::test]
async fn hello_rule_replies() {
    let model = ScriptedModel::from_rules_str(RULES).unwrap();
    let reply = say(&model, "HeLLo there").await;
    assert_eq!(reply.text.as_deref(), Some("Hello! I am a scripted agent."));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn unmatched_message_is_echoed() {
    let model = ScriptedModel::from_rules_str(RULES).unwrap();
    assert_eq!(
        say(&model, "what time is it?").await.text.as_deref(),
        Some("echo: what time is it?")
    );
    let echo = ScriptedModel::echo();
    assert_eq!(
        say(&echo, "read x").await.text.as_deref(),
        Some("echo: read x")
    );
}

#[test]
fn bad_regex_error_names_line_and_field() {
    let rules = "[[rule]]\nmatch = \"ok\"\nreply = \"x\"\n\n[[rule]]\nmatch = \"(unclosed\"\nreply = \"y\"\n";
    let err = ScriptedModel::from_rules_str(rules)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("<rules>:6:9: field \"match\": invalid regex"),
        "{err}"
    );
}

#[test]
fn rules_file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.toml");
    std::fs::write(&path, "[[rule]]\nmatch = \"a\"\nreplay = \"typo\"\n").unwrap();
    let err = ScriptedModel::from_rules_file(&path)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{}:3:1:", path.display())),
        "{err}"
    );
    assert!(err.contains("replay"), "{err}");
}

#[test]
fn rule_needs_exactly_one_of_reply_or_tool_and_known_captures() {
    let rules = concat!(
        "[[rule]]\nmatch = \"a\"\nreply = \"x\"\ntool = \"t\"\n",
        "[[rule]]\nmatch = \"b\"\n",
        "[[rule]]\nmatch = \"(?P<x>c)\"\ntool = \"t\"\nargs = { p = \"$y\" }\n",
        "[[rule]]\nmatch = \"d\"\nreply = \"x\"\nthen = \"no\"\n",
    );
    let err = ScriptedModel::from_rules_str(rules)
        .unwrap_err()
        .to_string();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "every problem is reported: {err}");
    assert!(
        lines[0].starts_with("<rules>:4:") && lines[0].contains("not both"),
        "{err}"
    );
    assert!(lines[1].contains("has neither"), "{err}");
    assert!(lines[2].contains("\"$y\" is not a capture group"), "{err}");
    assert!(
        lines[3].starts_with("<rules>:14:") && lines[3].contains("\"then\""),
        "{err}"
    );
}
