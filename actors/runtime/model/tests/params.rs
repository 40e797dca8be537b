use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::model::{
    AnthropicClient, AnthropicConfig, ChatMessage, ChatModel, ChatRequest, ModelParams,
    OpenAiClient, OpenAiConfig, ReasoningEffort, Stop, ToolCall, ToolChoice, ToolSchema,
};
use clawbus_testkit::{AnthropicServer, AnthropicTurn, AnthropicUsage, ScriptedServer, Turn};

fn params(tool_choice: ToolChoice) -> ModelParams {
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(40));
    extra.insert("metadata".into(), json!({"user_id": "u-1"}));
    ModelParams {
        temperature: Some(0.25),
        top_p: Some(0.5),
        max_tokens: Some(321),
        stop: Some(Stop::Many(vec!["END".into(), "###".into()])),
        seed: Some(7),
        tool_choice: Some(tool_choice),
        parallel_tool_calls: Some(false),
        reasoning_effort: Some(ReasoningEffort::High),
        extra,
    }
}

fn tools() -> Vec<ToolSchema> {
    vec![ToolSchema {
        name: "read".into(),
        description: "reads".into(),
        parameters: json!({"type": "object"}),
    }]
}

/// The first round of a turn, and the round after its tool result.
pub(crate) fn rounds() -> (ChatRequest, ChatRequest) {
    let first = ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::system("s"), ChatMessage::user("go")],
        tools: tools().into(),
    };
    let mut later = first.clone();
    let call = ToolCall {
        id: "c1".into(),
        name: "read".into(),
        arguments: "{}".into(),
    };
    later
        .messages
        .push(ChatMessage::assistant(None, vec![call]));
    later.messages.push(ChatMessage::tool("c1", "ok"));
    (first, later)
}

pub(crate) fn without(body: &Value, keys: &[&str]) -> Value {
    let mut b = body.clone();
    for k in keys {
        b.as_object_mut().unwrap().remove(*k);
    }
    b
}

#[tokio::test]
async fn openai_body_carries_every_param_and_required_only_on_the_first_round() {
    let server = ScriptedServer::start(vec![Turn::text("a"), Turn::text("b")]).await;
    let client = OpenAiClient::new(OpenAiConfig {
        base_url: server.base_url(),
        max_retries: 0,
        ..OpenAiConfig::default()
    })
    .unwrap()
    .with_default_max_tokens(Some(999))
    .with_params(params(ToolChoice::Required));
    let (first, later) = rounds();
    client.complete(&first).await.unwrap();
    client.complete(&later).await.unwrap();
    let sent = server.requests();
    let knobs = |b: &Value| {
        without(
            b,
            &["messages", "model", "stream", "stream_options", "tools"],
        )
    };
    assert_eq!(
        knobs(&sent[0]),
        json!({
            "temperature": 0.25, "top_p": 0.5, "max_tokens": 321, "stop": ["END", "###"],
            "seed": 7, "reasoning_effort": "high", "tool_choice": "required",
            "parallel_tool_calls": false, "top_k": 40, "metadata": {"user_id": "u-1"},
        })
    );
    assert_eq!(sent[1]["tool_choice"], json!("auto"), "after a tool result");
}

#[tokio::test]
async fn openai_named_tool_choice_and_provider_default_max_tokens() {
    let server = ScriptedServer::start(vec![Turn::text("a"), Turn::text("b")]).await;
    let client = OpenAiClient::new(OpenAiConfig {
        base_url: server.base_url(),
        max_retries: 0,
        ..OpenAiConfig::default()
    })
    .unwrap()
    .with_default_max_tokens(Some(999))
    .with_params(ModelParams {
        tool_choice: Some(ToolChoice::Tool("read".into())),
        stop: Some(Stop::One("END".into())),
        ..ModelParams::default()
    });
    let (first, later) = rounds();
    client.complete(&first).await.unwrap();
    client.complete(&later).await.unwrap();
    let sent = server.requests();
    assert_eq!(
        sent[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "read"}})
    );
    assert_eq!(sent[0]["max_tokens"], json!(999));
    assert_eq!(sent[0]["stop"], json!("END"));
    assert!(sent[0].get("temperature").is_none());
    assert_eq!(sent[1]["tool_choice"], json!("auto"));
}

#[tokio::test]
async fn anthropic_body_maps_every_param_and_required_only_on_the_first_round() {
    let usage = AnthropicUsage::default();
    let server = AnthropicServer::start(vec![
        AnthropicTurn::text(&["a"], usage),
        AnthropicTurn::text(&["b"], usage),
    ])
    .await
    .unwrap();
    let client = AnthropicClient::new(AnthropicConfig {
        base_url: server.base_url(),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
        ..AnthropicConfig::default()
    })
    .unwrap()
    .with_params(params(ToolChoice::Required));
    let (first, later) = rounds();
    client.complete(&first).await.unwrap();
    client.complete(&later).await.unwrap();
    let sent = server.requests();
    let knobs = |b: &Value| without(b, &["messages", "model", "stream", "system", "tools"]);
    assert_eq!(
        knobs(&sent[0].body),
        json!({
            "temperature": 0.25, "top_p": 0.5, "max_tokens": 321,
            "stop_sequences": ["END", "###"],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "top_k": 40, "metadata": {"user_id": "u-1"},
        }),
        "seed and reasoning_effort have no Messages API field"
    );
    assert_eq!(
        sent[1].body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
}

#[test]
fn anthropic_tool_choice_by_name_and_none() {
    let client = |choice| {
        AnthropicClient::new(AnthropicConfig::default())
            .unwrap()
            .with_params(ModelParams {
                tool_choice: Some(choice),
                ..ModelParams::default()
            })
    };
    let (first, later) = rounds();
    let named = client(ToolChoice::Tool("read".into()));
    assert_eq!(
        named.body(&first)["tool_choice"],
        json!({"type": "tool", "name": "read"})
    );
    assert_eq!(named.body(&later)["tool_choice"], json!({"type": "auto"}));
    let none = client(ToolChoice::None);
    assert_eq!(none.body(&later)["tool_choice"], json!({"type": "none"}));
    assert_eq!(none.body(&first)["max_tokens"], json!(4096), "the default");
}
