use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{
    AnthropicClient, AnthropicConfig, ChatMessage, ChatModel, ChatRequest, ModelError,
    ModelObserver, ToolSchema,
};
use clawbus_testkit::{AnthropicServer, AnthropicTurn, AnthropicUsage};

fn client(server: &AnthropicServer, max_retries: u32) -> AnthropicClient {
    AnthropicClient::new(AnthropicConfig {
        base_url: server.base_url(),
        api_key: Some("sk-ant-test".into()),
        timeout: Duration::from_secs(10),
        max_retries,
        backoff_base: Duration::from_millis(2),
        max_tokens: 1000,
    })
    .unwrap()
}

fn tool(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

fn ask(system: &str, text: &str) -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        messages: vec![ChatMessage::system(system), ChatMessage::user(text)],
        tools: vec![tool("read"), tool("write")].into(),
    }
}

#[derive(Default)]
struct Seen {
    text: Mutex<Vec<String>>,
    retries: Mutex<Vec<Duration>>,
}

impl ModelObserver for Seen {
    fn text(&self, delta: &str) {
        self.text.lock().unwrap().push(delta.to_owned());
    }
    fn retry(&self, _: u32, delay: Duration, _: &ModelError) {
        self.retries.lock().unwrap().push(delay);
    }
}

const USAGE: AnthropicUsage = AnthropicUsage {
    input: 12,
    output: 7,
    cache_read: 2000,
    cache_write: 300,
};

#[tokio::test]
async fn a_text_turn_streams_its_deltas_and_records_cache_usage() {
    let server =
        AnthropicServer::start(vec![AnthropicTurn::text(&["Hel", "lo, wö", "rld"], USAGE)])
            .await
            .unwrap();
    let seen = Seen::default();
    let reply = client(&server, 0)
        .complete_observed(&ask("Be brief.\n\n# Runtime\ntime=1\n", "hi"), &seen)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("Hello, wörld"));
    assert_eq!(*seen.text.lock().unwrap(), ["Hel", "lo, wö", "rld"]);
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let usage = reply.usage.unwrap();
    assert_eq!(
        usage.prompt_tokens,
        12 + 2000 + 300,
        "every input token counts"
    );
    assert_eq!(usage.completion_tokens, 7);
    assert_eq!(usage.cache_read_tokens, Some(2000));
    assert_eq!(usage.cache_write_tokens, Some(300));
    let sent = &server.requests()[0];
    assert_eq!(sent.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(sent.version.as_deref(), Some("2023-06-01"));
    let body = &sent.body;
    assert_eq!(body["model"], json!("claude-test"));
    assert_eq!(body["max_tokens"], json!(1000));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "Be brief.\n\n", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "# Runtime\ntime=1\n"},
        ]),
        "the stable part carries the breakpoint, the runtime line follows"
    );
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools[0]["input_schema"]["type"], json!("object"));
    assert!(tools[0].get("cache_control").is_none());
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
    assert!(body.get("tool_choice").is_none(), "{body}");
}

#[tokio::test]
async fn a_streamed_tool_call_split_mid_string_then_its_result_goes_back() {
    let fragments = [
        "{\"pa",
        "th\": \"notes/tö",
        "day.md\", \"li",
        "mit\": 4",
        "0}",
    ];
    let server = AnthropicServer::start(vec![
        AnthropicTurn::tool_use("Let me look.", "toolu_01", "read", &fragments, USAGE),
        AnthropicTurn::text(&["Done."], USAGE),
    ])
    .await
    .unwrap();
    let client = client(&server, 0);
    let mut req = ask("sys", "read it");
    let reply = client.complete(&req).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Let me look."));
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.tool_calls.len(), 1);
    let call = &reply.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_01", "read"));
    let args: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(args, json!({"path": "notes/töday.md", "limit": 40}));
    req.messages
        .push(ChatMessage::assistant(reply.text, reply.tool_calls));
    req.messages
        .push(ChatMessage::tool("toolu_01", "file contents"));
    req.messages.push(ChatMessage::tool("toolu_02", ""));
    assert_eq!(
        client.complete(&req).await.unwrap().text.as_deref(),
        Some("Done.")
    );
    let second = &server.requests()[1].body;
    assert_eq!(
        second["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read it"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "notes/töday.md", "limit": 40}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "file contents"},
                {"type": "tool_result", "tool_use_id": "toolu_02"},
            ]},
        ]),
        "tool results merge into one user message"
    );
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let server = AnthropicServer::start(vec![
        AnthropicTurn::http(429, Some(0)),
        AnthropicTurn::text(&["ok"], USAGE),
    ])
    .await
    .unwrap();
    let seen = Seen::default();
    let reply = client(&server, 2)
        .complete_observed(&ask("s", "hi"), &seen)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("ok"));
    assert_eq!(
        *seen.retries.lock().unwrap(),
        [Duration::ZERO],
        "retry-after: 0"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_529_is_retried_and_fails_with_its_status_when_retries_run_out() {
    let server = AnthropicServer::start(vec![
        AnthropicTurn::http(529, None),
        AnthropicTurn::http(529, None),
        AnthropicTurn::text(&["never"], USAGE),
    ])
    .await
    .unwrap();
    let err = client(&server, 1)
        .complete(&ask("s", "hi"))
        .await
        .unwrap_err();
    let ModelError::Http { status, body, .. } = &err else {
        panic!("expected Http, got {err}")
    };
    assert_eq!(*status, 529);
    assert!(body.contains("overloaded_error"), "{body}");
    assert_eq!(server.requests().len(), 2, "one attempt plus one retry");
}

#[tokio::test]
async fn an_in_stream_error_ends_the_call_with_that_error() {
    let server = AnthropicServer::start(vec![AnthropicTurn::stream_error(
        "partial",
        "overloaded_error",
        "Overloaded",
    )])
    .await
    .unwrap();
    let err = client(&server, 3)
        .complete(&ask("s", "hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Protocol(_)), "{err}");
    assert!(
        err.to_string().contains("overloaded_error: Overloaded"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_an_error() {
    let AnthropicTurn::Events(mut events) = AnthropicTurn::text(&["cut"], USAGE) else {
        unreachable!()
    };
    events.truncate(4);
    let server = AnthropicServer::start(vec![AnthropicTurn::Events(events)])
        .await
        .unwrap();
    let err = client(&server, 0)
        .complete(&ask("s", "hi"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("message_stop"), "{err}");
    assert!(
        matches!(err, ModelError::Connect(_)),
        "a cut stream is tried again and falls over: {err:?}"
    );
}

#[tokio::test]
async fn a_stream_past_the_response_cap_fails_naming_it() {
    let long = "x".repeat(600);
    let server = AnthropicServer::start(vec![AnthropicTurn::text(&[&long, &long], USAGE)])
        .await
        .unwrap();
    let client = client(&server, 2).with_max_response_bytes("claude", 1000);
    let err = client.complete(&ask("s", "hi")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("[providers.claude] max_response_bytes"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn a_recorded_stream_decodes_as_a_streamed_call() {
    let client = AnthropicClient::new(AnthropicConfig {
        base_url: "http://127.0.0.1:9".into(),
        api_key: None,
        timeout: Duration::from_secs(1),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
        max_tokens: 100,
    })
    .unwrap();
    let events = [
        json!({"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [],
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hel"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let seen = Seen::default();
    let reply = client.decode_stream(body.as_bytes(), &seen).unwrap();
    assert_eq!(reply.text.as_deref(), Some("hello"));
    assert_eq!(*seen.text.lock().unwrap(), ["hel", "lo"]);
    assert_eq!(
        reply.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((5, 2))
    );
}

#[tokio::test]
async fn every_endless_answer_shape_fails_with_the_cap_error_and_is_not_retried() {
    use clawbus_testkit::Flood;
    for flood in Flood::ALL {
        let server = AnthropicServer::start(vec![
            AnthropicTurn::Flood(flood),
            AnthropicTurn::text(&["unused"], USAGE),
        ])
        .await
        .unwrap();
        let client = client(&server, 2).with_max_response_bytes("claude", 1000);
        let err = client.complete(&ask("s", "hi")).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ModelError::Protocol(_)), "{flood:?}: {err:?}");
        assert!(
            text.contains("([providers.claude] max_response_bytes = 1000); the call was stopped"),
            "{flood:?}: {text}"
        );
        assert_eq!(server.requests().len(), 1, "{flood:?} is not retried");
    }
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted_from_the_error() {
    let server = AnthropicServer::start(vec![AnthropicTurn::HttpMessage {
        status: 401,
        message: "invalid x-api-key: sk-ant-test-echoed".into(),
    }])
    .await
    .unwrap();
    let client = AnthropicClient::new(AnthropicConfig {
        base_url: server.base_url(),
        api_key: Some("sk-ant-test-echoed".into()),
        ..AnthropicConfig::default()
    })
    .unwrap();
    let text = client
        .complete(&ask("s", "hi"))
        .await
        .unwrap_err()
        .to_string();
    assert!(!text.contains("sk-ant-test-echoed"), "{text}");
    assert!(
        text.contains("invalid x-api-key: [REDACTED:api_key]"),
        "{text}"
    );
}

#[tokio::test]
async fn a_max_tokens_stop_mid_tool_use_is_a_truncated_reply_naming_the_served_model() {
    let AnthropicTurn::Events(mut events) =
        AnthropicTurn::tool_use("", "toolu_1", "read", &["{\"pa"], USAGE)
    else {
        unreachable!()
    };
    for e in &mut events {
        if e["type"] == "message_delta" {
            e["delta"]["stop_reason"] = json!("max_tokens");
        }
    }
    let server = AnthropicServer::start(vec![AnthropicTurn::Events(events)])
        .await
        .unwrap();
    let reply = client(&server, 0).complete(&ask("s", "hi")).await.unwrap();
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    assert!(reply.is_truncated(), "the turn treats it as cut off");
    assert_eq!(reply.tool_calls[0].arguments, "{\"pa");
    assert_eq!(reply.served_model.as_deref(), Some("claude-fake"));
}
