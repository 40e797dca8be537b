//! Image parts (a tool's screenshot) in the request bodies: OpenAI's tool messages take text
//! only, so the images follow the run of tool results as one user message; Anthropic's
//! `tool_result` takes image blocks. A provider that takes no images gets the text alone, and
//! images are never written to a transcript.

use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{
    AnthropicClient, AnthropicConfig, ChatMessage, ChatRequest, ImagePart, OpenAiClient,
    OpenAiConfig, ToolCall,
};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake";

fn conversation() -> ChatRequest {
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "browser".into(),
        arguments: "{}".into(),
    };
    ChatRequest {
        model: "m".into(),
        messages: vec![
            ChatMessage::system("sys"),
            ChatMessage::user("look"),
            ChatMessage::assistant(None, vec![call("c1"), call("c2")]),
            ChatMessage::tool("c1", "saved screenshots/t1-1.png")
                .with_images(vec![ImagePart::png(PNG)]),
            ChatMessage::tool("c2", "no errors"),
            ChatMessage::assistant(Some("seen".into()), vec![]),
        ],
        tools: std::sync::Arc::default(),
    }
}

fn openai() -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig {
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: None,
        timeout: Duration::from_secs(1),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
    })
    .unwrap()
}

fn anthropic() -> AnthropicClient {
    AnthropicClient::new(AnthropicConfig {
        base_url: "http://127.0.0.1:9".into(),
        api_key: None,
        timeout: Duration::from_secs(1),
        max_retries: 0,
        backoff_base: Duration::from_millis(1),
        max_tokens: 100,
    })
    .unwrap()
}

fn data_url() -> String {
    format!("data:image/png;base64,{}", ImagePart::png(PNG).data)
}

#[test]
fn openai_sends_tool_images_as_a_user_message_after_the_tool_results() {
    let body = openai().with_images(true).body(&conversation());
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant"
        ],
        "{body}"
    );
    let tool = &body["messages"][3];
    assert_eq!(
        tool["content"], "saved screenshots/t1-1.png",
        "the text stays"
    );
    assert_eq!(tool["tool_call_id"], "c1");
    assert_eq!(
        body["messages"][5]["content"],
        json!([
            { "type": "text", "text": "The image of tool call c1:" },
            { "type": "image_url", "image_url": { "url": data_url() } }
        ])
    );
}

#[test]
fn anthropic_sends_tool_images_as_image_blocks_of_the_tool_result() {
    let body = anthropic().body(&conversation());
    let results: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{body}");
    assert_eq!(
        results[0]["content"],
        json!([
            { "type": "text", "text": "saved screenshots/t1-1.png" },
            { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": ImagePart::png(PNG).data } }
        ])
    );
    assert_eq!(results[1]["content"], "no errors", "without images: text");
}

#[test]
fn a_provider_without_images_gets_the_text_alone() {
    let expected = {
        let mut bare = conversation();
        bare.messages[3].images.clear();
        bare
    };
    let open = openai().body(&conversation());
    assert_eq!(
        open,
        openai().body(&expected),
        "openai is text-only by default"
    );
    assert!(!open.to_string().contains("image_url"), "{open}");
    let ant = anthropic().with_images(false).body(&conversation());
    assert_eq!(ant, anthropic().body(&expected));
    assert!(!ant.to_string().contains("\"image\""), "{ant}");
}

#[test]
fn images_are_never_written_to_a_transcript() {
    let m = ChatMessage::tool("c1", "saved").with_images(vec![ImagePart::png(PNG)]);
    let written = serde_json::to_string(&m).unwrap();
    assert!(!written.contains("images") && !written.contains(&ImagePart::png(PNG).data));
    let read: ChatMessage = serde_json::from_str(&written).unwrap();
    assert_eq!(read, ChatMessage::tool("c1", "saved"));
}
