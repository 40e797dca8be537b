use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{
    ChatMessage, ChatModel, ChatRequest, ModelError, OpenAiClient, OpenAiConfig, ToolCall,
    ToolSchema,
};
use clawbus_testkit::{ScriptedServer, Turn};

fn client_with(base_url: String, timeout: Duration, max_retries: u32) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig {
        base_url,
        api_key: Some("sk-test".into()),
        timeout,
        max_retries,
        backoff_base: Duration::from_millis(2),
    })
    .unwrap()
}

fn client(server: &ScriptedServer) -> OpenAiClient {
    client_with(server.base_url(), Duration::from_secs(10), 0)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        messages: vec![ChatMessage::user(text)],
        tools: Default::default(),
    }
}

fn args(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap()
}

#[tokio::test]
async fn plain_text_reply_is_returned_with_usage() {
    let server = ScriptedServer::start(vec![Turn::text("Hello there")]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Hello there"));
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert!(
        reply.usage.is_some_and(|u| u.completion_tokens > 0),
        "usage chunk must be read"
    );
    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({ "include_usage": true }));
    assert_eq!(sent["model"], json!("test-model"));
    assert!(
        sent.get("tools").is_none() && sent.get("tool_choice").is_none(),
        "no tools: {sent}"
    );
}

#[tokio::test]
async fn text_streamed_in_many_chunks_is_concatenated() {
    let server =
        ScriptedServer::start(vec![Turn::text_chunks(vec!["Hel", "lo, ", "wör", "ld"])]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Hello, wörld"));
}

#[tokio::test]
async fn tool_call_arguments_split_across_chunks_are_reassembled() {
    let call_args = json!({ "path": "notes/today.md", "limit": 40, "note": "ünïcode" });
    let turn = Turn::tool_call("read", call_args.clone()).split_args(3);
    let server = ScriptedServer::start(vec![turn]).await;
    let reply = client(&server).complete(&ask("read it")).await.unwrap();
    assert_eq!(reply.text, None);
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].name, "read");
    assert_eq!(reply.tool_calls[0].id, "call_1_1");
    assert_eq!(args(&reply.tool_calls[0]), call_args);
}

#[tokio::test]
async fn parallel_tool_calls_keep_ids_and_arguments_apart() {
    let turn = Turn::tool_calls(vec![
        ("read", json!({ "path": "a.txt" })),
        ("write", json!({ "path": "b.txt", "text": "hello" })),
    ])
    .split_args(2);
    let server = ScriptedServer::start(vec![turn]).await;
    let reply = client(&server).complete(&ask("both")).await.unwrap();
    let calls = &reply.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_1_1", "read")
    );
    assert_eq!(
        (calls[1].id.as_str(), calls[1].name.as_str()),
        ("call_1_2", "write")
    );
    assert_eq!(args(&calls[0]), json!({ "path": "a.txt" }));
    assert_eq!(args(&calls[1]), json!({ "path": "b.txt", "text": "hello" }));
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let turns = vec![
        Turn::http_error(500),
        Turn::http_error(503),
        Turn::text("finally"),
    ];
    let server = ScriptedServer::start(turns).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 3);
    let reply = client.complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("finally"));
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn retries_stop_after_max_retries() {
    let turns = vec![
        Turn::http_error(500),
        Turn::http_error(500),
        Turn::text("never"),
    ];
    let server = ScriptedServer::start(turns).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 1);
    let err = client.complete(&ask("hi")).await.unwrap_err();
    assert!(matches!(err, ModelError::Http { status: 500, .. }), "{err}");
    assert_eq!(server.request_count(), 2, "one attempt plus one retry");
}

#[tokio::test]
async fn rate_limit_is_retried_after_retry_after() {
    let server = ScriptedServer::start(vec![Turn::rate_limited(0), Turn::text("ok")]).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 2);
    assert_eq!(
        client.complete(&ask("hi")).await.unwrap().text.as_deref(),
        Some("ok")
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn bad_request_fails_at_once_with_the_body() {
    let server = ScriptedServer::start(vec![Turn::http_error(400), Turn::text("unused")]).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 3);
    let err = client.complete(&ask("hi")).await.unwrap_err();
    let ModelError::Http { status, body, .. } = &err else {
        panic!("expected Http, got {err}")
    };
    assert_eq!(*status, 400);
    assert!(body.contains("scripted HTTP 400"), "body kept: {body}");
    assert!(!err.is_retryable());
    let msg = err.to_string();
    assert!(
        msg.contains("test-model") && msg.contains(&server.base_url()),
        "names model and url: {msg}"
    );
    assert_eq!(server.request_count(), 1, "a 400 is never retried");
}

#[tokio::test]
async fn a_500_that_blames_the_request_is_not_retried_and_invalid_arguments_go_back_as_empty() {
    let blamed = Turn::HttpError {
        status: 500,
        body: r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON","type":"server_error"}}"#.into(),
        retry_after: None,
    };
    let server = ScriptedServer::start(vec![blamed, Turn::text("unused")]).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 3);
    let mut req = ask("hi");
    let cut = ToolCall {
        id: "call_1".into(),
        name: "write".into(),
        arguments: "{".into(),
    };
    req.messages.push(ChatMessage::assistant(None, vec![cut]));
    req.messages.push(ChatMessage::tool("call_1", "not run"));
    let err = client.complete(&req).await.unwrap_err();
    assert!(err.is_invalid_request(), "{err}");
    assert!(!err.is_retryable() && !err.falls_over(), "{err}");
    assert_eq!(
        server.request_count(),
        1,
        "the same request would fail again"
    );
    let sent = &server.requests()[0];
    assert_eq!(
        sent["messages"][1]["tool_calls"][0]["function"]["arguments"], "{}",
        "{sent}"
    );
}

#[tokio::test]
async fn error_body_is_truncated_to_500_chars() {
    let long = "x".repeat(2000);
    let turn = Turn::HttpError {
        status: 422,
        body: long,
        retry_after: None,
    };
    let server = ScriptedServer::start(vec![turn]).await;
    let err = client(&server).complete(&ask("hi")).await.unwrap_err();
    let ModelError::Http { body, .. } = err else {
        panic!("expected Http")
    };
    assert_eq!(body.chars().count(), 501, "500 chars and an ellipsis");
}

#[tokio::test]
async fn silent_server_times_out_after_the_attempt_timeout() {
    let server = ScriptedServer::start(vec![Turn::hang()]).await;
    let client = client_with(server.base_url(), Duration::from_millis(200), 0);
    let err = client.complete(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, ModelError::TimedOut { after, .. } if after == Duration::from_millis(200)),
        "{err}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn timed_out_attempt_is_retried() {
    let server = ScriptedServer::start(vec![Turn::hang(), Turn::text("second try")]).await;
    let client = client_with(server.base_url(), Duration::from_millis(200), 1);
    let reply = client.complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("second try"));
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn refused_connection_is_a_retryable_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = client_with(format!("http://{addr}/v1"), Duration::from_secs(5), 0);
    let err = client.complete(&ask("hi")).await.unwrap_err();
    assert!(matches!(err, ModelError::Connect(_)), "{err}");
    assert!(err.is_retryable());
    assert!(
        err.to_string().contains(&addr.to_string()),
        "names the url: {err}"
    );
}

#[tokio::test]
async fn lenient_stream_with_empty_finish_reason_and_missing_fields_parses() {
    let body = concat!(
        ": opening comment\r\n\r\n",
        "data:{\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":\"\"}]}\r\n\r\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":null}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"\"}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7}}\n\n",
    ); // and no [DONE]: the stream just ends
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Hello"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let usage = reply.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (7, 0));
}

#[tokio::test]
async fn tool_calls_without_index_are_keyed_by_id_or_position() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[",
        "{\"id\":\"a\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"p\\\":\"}},",
        "{\"id\":\"b\",\"function\":{\"name\":\"list\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"x\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: [DONE]\n\n",
    );
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    let summary: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    // "b" sent no arguments: `{}`. The id-less call is keyed by position and gets `call_3`.
    assert_eq!(
        summary,
        vec![
            ("a", "read", "{\"p\":1}"),
            ("b", "list", "{}"),
            ("call_3", "x", "{}")
        ]
    );
}

#[tokio::test]
async fn error_object_inside_the_stream_is_a_protocol_error() {
    let body = "data: {\"error\":{\"message\":\"model overloaded\"}}\n\ndata: [DONE]\n\n";
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let err = client(&server).complete(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Protocol(m) if m.contains("model overloaded")),
        "{err}"
    );
}

#[tokio::test]
async fn non_stream_json_answer_is_parsed() {
    let body = json!({
        "id": "x", "object": "chat.completion",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.",
            "tool_calls": [{ "id": "call_9", "type": "function",
                             "function": { "name": "read", "arguments": "{\"path\":\"x\"}" } }] } }],
        "usage": { "prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15 },
    });
    let server = ScriptedServer::start(vec![Turn::raw("application/json", body.to_string())]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Let me look."));
    assert_eq!(reply.tool_calls[0].id, "call_9");
    assert_eq!(args(&reply.tool_calls[0]), json!({ "path": "x" }));
    assert_eq!(reply.usage.map(|u| u.prompt_tokens), Some(12));
}

#[tokio::test]
async fn request_carries_tools_and_tool_call_pairing() {
    let server = ScriptedServer::start(vec![Turn::text("done")]).await;
    let params = json!({ "type": "object", "properties": { "path": { "type": "string" } } });
    let calls = vec![
        ToolCall {
            id: "call_a".into(),
            name: "read".into(),
            arguments: "{\"path\":\"a\"}".into(),
        },
        ToolCall {
            id: "call_b".into(),
            name: "list".into(),
            arguments: "{}".into(),
        },
    ];
    let req = ChatRequest {
        model: "test-model".into(),
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("look"),
            ChatMessage::assistant(None, calls),
            ChatMessage::tool("call_a", "contents of a"),
            ChatMessage::tool("call_b", "a\nb"),
        ],
        tools: vec![ToolSchema {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: params.clone(),
        }]
        .into(),
    };
    client(&server).complete(&req).await.unwrap();
    let sent = &server.requests()[0];
    assert_eq!(
        sent["tools"],
        json!([{ "type": "function",
                 "function": { "name": "read", "description": "Read a file.", "parameters": params } }])
    );
    assert_eq!(sent["tool_choice"], json!("auto"));
    let m = &sent["messages"];
    assert_eq!(m[0], json!({ "role": "system", "content": "be brief" }));
    assert_eq!(m[2]["role"], json!("assistant"));
    assert_eq!(m[2]["content"], Value::Null);
    assert_eq!(
        m[2]["tool_calls"][0],
        json!({ "id": "call_a", "type": "function",
                "function": { "name": "read", "arguments": "{\"path\":\"a\"}" } })
    );
    assert_eq!(m[2]["tool_calls"][1]["id"], json!("call_b"));
    assert_eq!(
        m[3],
        json!({ "role": "tool", "content": "contents of a", "tool_call_id": "call_a" })
    );
    assert_eq!(m[4]["tool_call_id"], json!("call_b"));
}

#[test]
fn malformed_base_url_is_a_config_error() {
    let cfg = OpenAiConfig {
        base_url: "not a url".into(),
        ..OpenAiConfig::default()
    };
    let err = OpenAiClient::new(cfg).unwrap_err();
    assert!(
        matches!(&err, ModelError::Config(m) if m.contains("not a url")),
        "{err}"
    );
}

#[test]
fn config_debug_hides_the_api_key() {
    let cfg = OpenAiConfig {
        api_key: Some("sk-secret".into()),
        ..OpenAiConfig::default()
    };
    assert!(!format!("{cfg:?}").contains("sk-secret"));
}

#[tokio::test]
async fn an_answer_of_another_content_type_is_named_with_the_start_of_its_body() {
    let page = "<!DOCTYPE html><html><body>Login required</body></html>";
    let server = ScriptedServer::start(vec![Turn::raw("text/html; charset=utf-8", page)]).await;
    let err = client(&server).complete(&ask("hi")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ModelError::Protocol(_)), "{err:?}");
    assert!(text.contains("text/html; charset=utf-8"), "{text}");
    assert!(text.contains("<!DOCTYPE html><html>"), "{text}");
    assert!(!text.contains("without any chunk"), "{text}");
}

#[tokio::test]
async fn a_stream_past_the_response_cap_fails_naming_the_cap_and_is_not_retried() {
    let chunk = "x".repeat(100);
    let chunks: Vec<&str> = std::iter::repeat_n(chunk.as_str(), 30).collect();
    let server = ScriptedServer::start(vec![Turn::text_chunks(chunks.clone())]).await;
    let capped = client_with(server.base_url(), Duration::from_secs(10), 2)
        .with_max_response_bytes("local", 1024);
    let err = capped.complete(&ask("hi")).await.unwrap_err();
    let text = err.to_string();
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        text.contains("[providers.local] max_response_bytes = 1024"),
        "{text}"
    );
    assert_eq!(server.request_count(), 1, "a capped answer is not retried");

    // Tool-call arguments count too.
    let big = json!({ "text": "y".repeat(2000) });
    let server = ScriptedServer::start(vec![Turn::tool_call("write", big).split_args(50)]).await;
    let capped = client(&server).with_max_response_bytes("local", 1024);
    let err = capped.complete(&ask("hi")).await.unwrap_err();
    assert!(
        err.to_string().contains("max_response_bytes = 1024"),
        "{err}"
    );

    // Under the cap all is well.
    let server = ScriptedServer::start(vec![Turn::text_chunks(chunks)]).await;
    let roomy = client(&server).with_max_response_bytes("local", 4096);
    let reply = roomy.complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.map(|t| t.len()), Some(3000));
}

/// `data:` line of one chunk whose delta carries `tool_calls`.
fn call_chunk(calls: Value) -> String {
    let chunk = json!({ "choices": [{ "index": 0, "delta": { "tool_calls": calls } }] });
    format!("data: {chunk}\n\n")
}

/// `data:` line of the closing chunk with `finish_reason: "tool_calls"`, then `[DONE]`.
fn tool_calls_end() -> String {
    let chunk = json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] });
    format!("data: {chunk}\n\ndata: [DONE]\n\n")
}

fn call_summary(calls: &[ToolCall]) -> Vec<(String, String, Value)> {
    calls
        .iter()
        .map(|c| (c.id.clone(), c.name.clone(), args(c)))
        .collect()
}

#[tokio::test]
async fn error_object_after_text_chunks_ends_the_call_with_that_error() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Half an\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\"}}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" answer\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let client = client_with(server.base_url(), Duration::from_secs(10), 2);
    let err = client.complete(&ask("hi")).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Protocol(m) if m.contains("upstream overloaded")),
        "{err}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "an in-stream error is not retried"
    );
}

#[tokio::test]
async fn a_stream_cut_before_done_without_finish_reason_is_an_error() {
    let cut = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n",
    ); // no finish_reason, no [DONE]: the connection was cut
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", cut)]).await;
    let err = client(&server).complete(&ask("hi")).await.unwrap_err();
    assert!(matches!(&err, ModelError::Connect(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("without [DONE] or a finish_reason"), "{text}");

    // It counts as an interruption: retried, and the retry's answer is the reply.
    let server = ScriptedServer::start(vec![
        Turn::raw("text/event-stream", cut),
        Turn::text("Hello"),
    ])
    .await;
    let retrying = client_with(server.base_url(), Duration::from_secs(10), 1);
    let reply = retrying.complete(&ask("hi")).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("Hello"));
    assert_eq!(server.request_count(), 2);

    // A cut tool call is caught too, also when the body is not announced as SSE.
    let body = call_chunk(json!([{ "index": 0, "id": "a", "type": "function",
        "function": { "name": "write", "arguments": "{\"text\":\"par" } }]));
    for content_type in ["text/event-stream", "text/plain"] {
        let server = ScriptedServer::start(vec![Turn::raw(content_type, body.clone())]).await;
        let err = client(&server).complete(&ask("hi")).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Connect(_)),
            "{content_type}: {err:?}"
        );
    }
}

#[tokio::test]
async fn missing_or_repeated_tool_call_ids_are_made_unique() {
    let body = [
        call_chunk(json!([
            { "index": 0, "id": "dup", "function": { "name": "read", "arguments": "{\"p\":1}" } },
            { "index": 1, "id": "dup", "function": { "name": "read", "arguments": "{\"p\":2}" } },
        ])),
        call_chunk(json!([
            { "index": 2, "id": "", "function": { "name": "list", "arguments": "" } },
            { "index": 3, "id": "call_2", "function": { "name": "stat", "arguments": "{}" } },
        ])),
        tool_calls_end(),
    ]
    .concat();
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    // The first "dup" keeps its id; the second and the id-less call get fresh `call_<n>` ids
    // that avoid the server's own "call_2".
    assert_eq!(
        call_summary(&reply.tool_calls),
        vec![
            ("dup".into(), "read".into(), json!({ "p": 1 })),
            ("call_3".into(), "read".into(), json!({ "p": 2 })),
            ("call_4".into(), "list".into(), json!({})),
            ("call_2".into(), "stat".into(), json!({})),
        ]
    );
}

#[tokio::test]
async fn a_tool_call_streamed_twice_is_returned_once() {
    let body = [
        // Streamed in pieces…
        call_chunk(json!([{ "index": 0, "id": "a", "type": "function",
            "function": { "name": "write", "arguments": "{\"path\":" } }])),
        call_chunk(json!([{ "index": 0, "function": { "arguments": "\"x\"}" } }])),
        // …repeated whole under the same index…
        call_chunk(json!([{ "index": 0, "id": "a", "type": "function",
            "function": { "name": "write", "arguments": "{\"path\":\"x\"}" } }])),
        // …and again under another index, spaced differently.
        call_chunk(json!([{ "index": 1, "id": "a", "type": "function",
            "function": { "name": "write", "arguments": "{ \"path\": \"x\" }" } }])),
        // The same tool and arguments under another id is a call of its own.
        call_chunk(json!([{ "index": 2, "id": "b", "type": "function",
            "function": { "name": "write", "arguments": "{\"path\":\"x\"}" } }])),
        tool_calls_end(),
    ]
    .concat();
    let server = ScriptedServer::start(vec![Turn::raw("text/event-stream", body)]).await;
    let reply = client(&server).complete(&ask("hi")).await.unwrap();
    assert_eq!(
        call_summary(&reply.tool_calls),
        vec![
            ("a".into(), "write".into(), json!({ "path": "x" })),
            ("b".into(), "write".into(), json!({ "path": "x" })),
        ]
    );
}

#[test]
fn a_recorded_stream_decodes_as_a_streamed_call_and_a_cut_one_is_an_error() {
    let client = client_with("http://127.0.0.1:9/v1".into(), Duration::from_secs(1), 0);
    let first = r#"data: {"choices":[{"index":0,"delta":{"content":"hel"}}]}"#;
    let last = r#"data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
    let body = format!("{first}\n\n{last}\n\ndata: [DONE]\n\n");
    let reply = client
        .decode_stream(body.as_bytes(), &crate::model::Unobserved)
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("hello"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.usage.map(|u| u.prompt_tokens), Some(3));
    let cut = format!("{first}\n\n");
    let err = client
        .decode_stream(cut.as_bytes(), &crate::model::Unobserved)
        .unwrap_err();
    assert!(matches!(err, ModelError::Connect(_)), "{err}");
}

#[tokio::test]
async fn every_endless_answer_shape_fails_with_the_cap_error_and_is_not_retried() {
    use clawbus_testkit::Flood;
    for flood in Flood::ALL {
        let server = ScriptedServer::start(vec![Turn::Flood(flood), Turn::text("unused")]).await;
        let capped = client_with(server.base_url(), Duration::from_secs(30), 2)
            .with_max_response_bytes("local", 1024);
        let err = capped.complete(&ask("hi")).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ModelError::Protocol(_)), "{flood:?}: {err:?}");
        assert!(
            text.contains("([providers.local] max_response_bytes = 1024); the call was stopped"),
            "{flood:?}: {text}"
        );
        assert_eq!(server.request_count(), 1, "{flood:?} is not retried");
    }
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted_from_every_error_and_retry() {
    let key = "sk-echoed-secret-0123456789";
    let echo = |status| Turn::HttpError {
        status,
        body: format!(r#"{{"error":{{"message":"Incorrect API key provided: Bearer {key}"}}}}"#),
        retry_after: Some(0),
    };
    let server = ScriptedServer::start(vec![echo(500), echo(401)]).await;
    let client = OpenAiClient::new(OpenAiConfig {
        base_url: server.base_url(),
        api_key: Some(key.into()),
        timeout: Duration::from_secs(10),
        max_retries: 2,
        backoff_base: Duration::from_millis(2),
    })
    .unwrap();
    let seen = RetrySeen::default();
    let err = client
        .complete_observed(&ask("hi"), &seen)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ModelError::Http { status: 401, .. }),
        "{err:?}"
    );
    assert!(!text.contains(key), "{text}");
    assert!(text.contains("Bearer [REDACTED:api_key]"), "{text}");
    let retries = seen.0.lock().unwrap().clone();
    assert_eq!(retries.len(), 1, "the 500 was retried once");
    assert!(!retries[0].contains(key), "{retries:?}");

    // With the configured secrets, the variable's name is shown.
    let server = ScriptedServer::start(vec![echo(401)]).await;
    let secrets = crate::secrets::Secrets::default().with_value("OPENAI_API_KEY", key);
    let client = OpenAiClient::new(OpenAiConfig {
        base_url: server.base_url(),
        api_key: Some(key.into()),
        ..OpenAiConfig::default()
    })
    .unwrap()
    .with_secrets(secrets);
    let text = client.complete(&ask("hi")).await.unwrap_err().to_string();
    assert!(text.contains("Bearer [REDACTED:OPENAI_API_KEY]"), "{text}");

    // A key cut by the 500-character truncation of the body leaves none of its head.
    let padded = format!("{}Bearer {key}", "x".repeat(485));
    let server = ScriptedServer::start(vec![Turn::HttpError {
        status: 401,
        body: padded,
        retry_after: None,
    }])
    .await;
    let client = OpenAiClient::new(OpenAiConfig {
        base_url: server.base_url(),
        api_key: Some(key.into()),
        ..OpenAiConfig::default()
    })
    .unwrap();
    let text = client.complete(&ask("hi")).await.unwrap_err().to_string();
    assert!(text.contains("Bearer [REDACTED:api_key]…"), "{text}");
    assert!(!text.contains("sk-ec"), "{text}");
}

/// Records the error text of each retry.
#[derive(Default)]
struct RetrySeen(std::sync::Mutex<Vec<String>>);

impl crate::model::ModelObserver for RetrySeen {
    fn text(&self, _: &str) {}
    fn retry(&self, _: u32, _: Duration, error: &ModelError) {
        self.0.lock().unwrap().push(error.to_string());
    }
}
