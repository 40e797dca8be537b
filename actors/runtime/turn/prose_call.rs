//! A tool call written as text: small local models (and servers without tool-call parsing) often
//! answer `{"name": "read", "arguments": {...}}` or `<tool_call>…</tool_call>` in the content
//! instead of the `tool_calls` field. The turn does not run such text (it may be a quote, and
//! guessing would loop); it ends with the text as the answer, and the log says why.

use serde_json::Value;

/// The tool named by `text` when the whole text is a tool call written as prose: a
/// `<tool_call>` block, or one JSON object (optionally in a code fence) with a string `name` and
/// `arguments` or `parameters`. `None` for anything else.
pub(crate) fn prose_tool_call(text: &str) -> Option<String> {
    let text = text.trim();
    let body = match text.strip_prefix("<tool_call>") {
        Some(rest) => rest.trim_end().strip_suffix("</tool_call>").unwrap_or(rest),
        None => unfence(text),
    };
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let call = match &value {
        Value::Array(calls) => calls.first()?,
        one => one,
    };
    let call = call.get("function").unwrap_or(call);
    let name = call.get("name")?.as_str()?;
    (call.get("arguments").is_some() || call.get("parameters").is_some()).then(|| name.to_owned())
}

/// `text` without a surrounding Markdown code fence (```` ```json … ``` ````).
fn unfence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map_or(rest, |(_, body)| body);
    rest.trim_end().strip_suffix("```").unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::prose_tool_call;

    #[test]
    fn json_and_tagged_tool_calls_in_text_are_recognised() {
        let json = r#"{"name": "read", "arguments": {"path": "a.txt"}}"#;
        assert_eq!(prose_tool_call(json).as_deref(), Some("read"));
        let tagged =
            "<tool_call>\n{\"name\": \"exec\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>";
        assert_eq!(prose_tool_call(tagged).as_deref(), Some("exec"));
        let fenced = "```json\n{\"name\": \"read\", \"parameters\": {}}\n```";
        assert_eq!(prose_tool_call(fenced).as_deref(), Some("read"));
        let openai = r#"[{"type": "function", "function": {"name": "read", "arguments": "{}"}}]"#;
        assert_eq!(prose_tool_call(openai).as_deref(), Some("read"));
    }

    #[test]
    fn ordinary_answers_are_not_tool_calls() {
        for text in [
            "The file says hello.",
            r#"{"name": "Ada"}"#,
            "I would call {\"name\": \"read\", \"arguments\": {}} next.",
            "",
        ] {
            assert_eq!(prose_tool_call(text), None, "{text}");
        }
    }
}
