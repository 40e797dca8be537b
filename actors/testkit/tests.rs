use std::time::Duration;

use serde_json::{Value, json};

use super::{ScriptedServer, Turn};

async fn post(server: &ScriptedServer, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn exhausted_script_names_the_request_number() {
    let server = ScriptedServer::start(vec![Turn::text("one")]).await;
    let body = json!({ "model": "m", "messages": [] });
    assert_eq!(post(&server, body.clone()).await.status(), 200);
    let second = post(&server, body).await;
    assert_eq!(second.status(), 500);
    assert_eq!(
        second.text().await.unwrap(),
        "scripted server: no turn left for request #2"
    );
    assert_eq!(
        server.request_count(),
        2,
        "the unanswered request is recorded too"
    );
}

#[tokio::test]
async fn stream_request_gets_sse_with_usage_chunk_and_done() {
    let server = ScriptedServer::start(vec![Turn::text_chunks(vec!["a", "b"])]).await;
    let body = json!({ "model": "m", "messages": [], "stream": true,
                       "stream_options": { "include_usage": true } });
    let response = post(&server, body).await;
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(content_type, "text/event-stream");
    let events = sse_data(&response.text().await.unwrap());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let usage = chunks.last().unwrap();
    assert_eq!(
        usage["choices"],
        json!([]),
        "usage-only chunk as OpenAI sends it"
    );
    assert!(usage["usage"]["completion_tokens"].as_u64().is_some());
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(chunks[2]["choices"][0]["delta"]["content"], json!("b"));
    assert_eq!(chunks[0]["object"], json!("chat.completion.chunk"));
}

#[tokio::test]
async fn stream_without_include_usage_has_no_usage_chunk() {
    let server = ScriptedServer::start(vec![Turn::text("x")]).await;
    let body = json!({ "model": "m", "messages": [], "stream": true });
    let text = post(&server, body).await.text().await.unwrap();
    assert!(!text.contains("\"usage\""), "{text}");
}

#[tokio::test]
async fn non_stream_request_gets_one_json_completion() {
    let turn = Turn::tool_call("read", json!({ "path": "a" }));
    let server = ScriptedServer::start(vec![turn]).await;
    let response = post(&server, json!({ "model": "m", "messages": [] })).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["object"], json!("chat.completion"));
    let call = &answer["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], json!("read"));
    assert_eq!(call["function"]["arguments"], json!("{\"path\":\"a\"}"));
    assert_eq!(answer["choices"][0]["finish_reason"], json!("tool_calls"));
}

#[tokio::test]
async fn split_args_sends_fragments_of_n_chars() {
    let turn = Turn::tool_call("t", Value::String("abcdefg".into())).split_args(3);
    let server = ScriptedServer::start(vec![turn]).await;
    let text = post(
        &server,
        json!({ "model": "m", "messages": [], "stream": true }),
    )
    .await;
    let fragments: Vec<String> = sse_data(&text.text().await.unwrap())
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .cloned()
        })
        .filter_map(|a| a.as_str().map(str::to_owned))
        .filter(|a| !a.is_empty())
        .collect();
    assert_eq!(fragments, vec!["abc", "def", "g"]);
}

#[tokio::test]
async fn responder_computes_each_answer_and_records_requests() {
    let server = ScriptedServer::with_responder(|req| {
        let n = req["messages"].as_array().map_or(0, Vec::len);
        Turn::text(format!("{n} messages"))
    })
    .await;
    for n in 0..3 {
        let messages: Vec<Value> = (0..n)
            .map(|_| json!({ "role": "user", "content": "x" }))
            .collect();
        let answer: Value = post(&server, json!({ "model": "m", "messages": messages }))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(
            answer["choices"][0]["message"]["content"],
            json!(format!("{n} messages"))
        );
    }
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        server.requests()[2]["messages"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        server.max_concurrency(),
        1,
        "requests were sent one after another"
    );
}

#[tokio::test]
async fn hanging_requests_count_as_in_flight_together() {
    let server = ScriptedServer::start(vec![Turn::hang(), Turn::hang()]).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let url = format!("{}/chat/completions", server.base_url());
    let send = |c: reqwest::Client| {
        let url = url.clone();
        async move { c.post(url).json(&json!({ "model": "m" })).send().await }
    };
    let (a, b) = tokio::join!(send(client.clone()), send(client));
    assert!(
        a.unwrap_err().is_timeout() && b.unwrap_err().is_timeout(),
        "hang never answers"
    );
    assert_eq!(server.max_concurrency(), 2);
}
