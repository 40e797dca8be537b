//! The OpenAI-compatible chat-completions client: streaming SSE, retries with backoff.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

use super::accumulate::{ReplyAccumulator, short};
use super::http::{
    Failure, Overrun, ResponseCap, RetryPolicy, chain, client, content_type, endpoint, own_key,
    read_body, send, with_retries,
};
use super::params::{ModelParams, ToolChoice, merge_extra};
use crate::secrets::Secrets;

use super::{
    ChatMessage, ChatModel, ChatRequest, ModelError, ModelObserver, ModelReply, Role, Unobserved,
};

/// Settings of an [`OpenAiClient`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL up to the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Limit for one attempt, covering connect, headers and the whole streamed body.
    pub timeout: Duration,
    /// Attempts after the first one, for retryable failures only.
    pub max_retries: u32,
    /// First wait between attempts; doubles each retry, capped at 30 s.
    pub backoff_base: Duration,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".to_owned(),
            api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 2,
            backoff_base: Duration::from_millis(500),
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key itself.
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .finish()
    }
}

/// A client for any OpenAI-compatible `/chat/completions` endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    cfg: OpenAiConfig,
    url: String,
    http: super::LazyClient,
    cap: ResponseCap,
    params: ModelParams,
    /// Whether its models accept images; without, images are left out of requests.
    images: bool,
    default_max_tokens: Option<u32>,
    /// Redacted from every error: the key, and what [`OpenAiClient::with_secrets`] added.
    secrets: Secrets,
}

impl OpenAiClient {
    /// A client for `cfg.base_url`; fails if the URL is malformed.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, ModelError> {
        let (url, http) = endpoint(&cfg.base_url, "chat/completions")?;
        Ok(Self {
            secrets: own_key(Secrets::default(), cfg.api_key.as_deref()),
            cfg,
            url,
            http,
            cap: ResponseCap::default(),
            params: ModelParams::default(),
            images: false,
            default_max_tokens: None,
        })
    }

    /// Redacts the values of `secrets` (and always the client's own key) from every error the
    /// client returns, tells or logs, as tool output is redacted: a server may echo what it was
    /// sent.
    pub fn with_secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = own_key(secrets, self.cfg.api_key.as_deref());
        self
    }

    /// Whether its models accept images (`[providers.x] images`); where not, the images of
    /// messages are left out of requests (their text stays).
    pub(crate) fn with_images(mut self, images: bool) -> Self {
        self.images = images;
        self
    }

    /// Sends `params` (an agent's `[model_params]`) with every request.
    pub(crate) fn with_params(mut self, params: ModelParams) -> Self {
        self.params = params;
        self
    }

    /// `max_tokens` sent when the agent's parameters name none (`[providers.x] max_tokens`).
    pub(crate) fn with_default_max_tokens(mut self, max_tokens: Option<u32>) -> Self {
        self.default_max_tokens = max_tokens;
        self
    }

    /// Caps what one call may stream back (text plus tool-call arguments) at `max_bytes`, as
    /// `[providers.<provider>] max_response_bytes` says (default 4 MiB). Past it the call fails
    /// with an error naming the cap and the provider, and is not retried.
    pub(crate) fn with_max_response_bytes(mut self, provider: &str, max_bytes: usize) -> Self {
        self.cap = ResponseCap {
            max_bytes,
            provider: Some(provider.to_owned()),
        };
        self
    }

    /// The full endpoint URL this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Folds a whole recorded event stream (the bytes of a `/chat/completions` SSE answer) into
    /// a reply through the same parsing, accumulation and checks as a streamed call, without the
    /// network: for replaying recorded streams and measuring the client's own cost.
    pub fn decode_stream(
        &self,
        body: &[u8],
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let target = self.target("recorded");
        let mut parser = self.cap.parser();
        let overrun = |e| self.cap.overrun(&target, Overrun::Stream(e));
        let mut events = parser.try_push(body).map_err(overrun)?;
        events.extend(parser.try_finish().map_err(overrun)?);
        let mut acc = ReplyAccumulator::default();
        for event in events {
            if apply_event(&mut acc, &event.data, &target, observer, &self.cap)? {
                return Ok(acc.finish());
            }
        }
        check_complete(&acc, &target)?;
        finish(acc, &target)
    }

    fn target(&self, model: &str) -> String {
        format!("model {model:?} at {}", self.url)
    }

    async fn attempt(
        &self,
        body: &Value,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, Failure> {
        let mut request = client(&self.http, &self.url)?.post(&self.url).json(body);
        if let Some(key) = &self.cfg.api_key {
            request = request.bearer_auth(key);
        }
        let response = send(request, target, &self.cap).await?;
        let status = response.status();
        let content_type = content_type(&response);
        if content_type.contains("event-stream") {
            return read_stream(response, target, observer, &self.cap)
                .await
                .map_err(Failure::from);
        }
        // Not announced as SSE: a server that ignored `stream: true` answers one JSON object.
        let bytes = read_body(response, target, &self.cap).await?;
        let text = String::from_utf8_lossy(&bytes);
        if text.trim_start().starts_with('{') {
            let payload: Value = serde_json::from_str(&text).map_err(|e| {
                ModelError::Protocol(format!(
                    "{target}: invalid JSON answer ({e}): {}",
                    short(&text)
                ))
            })?;
            let mut acc = ReplyAccumulator::default();
            acc.apply(&payload)
                .map_err(|e| ModelError::Protocol(format!("{target}: server error: {e}")))?;
            self.cap.check_size(acc.size(), target)?;
            let reply = acc.finish();
            if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
                observer.text(text);
            }
            return Ok(reply);
        }
        let mut parser = self.cap.parser();
        let mut acc = ReplyAccumulator::default();
        let overrun = |e| Failure::from(self.cap.overrun(target, Overrun::Stream(e)));
        let mut events = parser.try_push(&bytes).map_err(overrun)?;
        events.extend(parser.try_finish().map_err(overrun)?);
        let mut done = false;
        for event in events {
            if apply_event(&mut acc, &event.data, target, observer, &self.cap)? {
                done = true;
                break;
            }
        }
        if acc.chunks() == 0 {
            // Neither an event stream nor a completion: say what came instead.
            let shown = if content_type.is_empty() {
                "no Content-Type".to_owned()
            } else {
                format!("Content-Type {content_type:?}")
            };
            return Err(Failure::from(ModelError::Protocol(format!(
                "{target}: answered {status} with {shown}, not an event stream or a JSON completion; the body starts: {:?}",
                short(text.trim_start())
            ))));
        }
        if !done {
            check_complete(&acc, target)?;
        }
        finish(acc, target).map_err(Failure::from)
    }
}

/// Reads an SSE body to `[DONE]` (or to its end) and folds it into a reply.
async fn read_stream(
    response: reqwest::Response,
    target: &str,
    observer: &dyn ModelObserver,
    cap: &ResponseCap,
) -> Result<ModelReply, ModelError> {
    let mut stream = response.bytes_stream();
    let mut parser = cap.parser();
    let mut acc = ReplyAccumulator::default();
    let overrun = |e| cap.overrun(target, Overrun::Stream(e));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ModelError::Connect(format!("{target}: stream interrupted: {}", chain(&e)))
        })?;
        for event in parser.try_push(&chunk).map_err(overrun)? {
            if apply_event(&mut acc, &event.data, target, observer, cap)? {
                return Ok(acc.finish());
            }
        }
    }
    if let Some(event) = parser.try_finish().map_err(overrun)? {
        if apply_event(&mut acc, &event.data, target, observer, cap)? {
            return Ok(acc.finish());
        }
    }
    check_complete(&acc, target)?;
    finish(acc, target)
}

/// Applies one SSE data payload; `Ok(true)` on `[DONE]`.
fn apply_event(
    acc: &mut ReplyAccumulator,
    data: &str,
    target: &str,
    observer: &dyn ModelObserver,
    cap: &ResponseCap,
) -> Result<bool, ModelError> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(true);
    }
    if data.is_empty() {
        return Ok(false);
    }
    let payloads: Vec<Value> = match serde_json::from_str(data) {
        Ok(payload) => vec![payload],
        // Lenient: a server that forgot the blank line between events joined several of them.
        Err(e) => data
            .lines()
            .filter(|l| !l.trim().is_empty() && l.trim() != "[DONE]")
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|_| {
                ModelError::Protocol(format!(
                    "{target}: invalid JSON chunk ({e}): {}",
                    short(data)
                ))
            })?,
    };
    for payload in &payloads {
        let before = acc.text().len();
        acc.apply(payload)
            .map_err(|e| ModelError::Protocol(format!("{target}: server error in stream: {e}")))?;
        cap.check_size(acc.size(), target)?;
        if let Some(delta) = acc.text().get(before..).filter(|d| !d.is_empty()) {
            observer.text(delta);
        }
    }
    Ok(false)
}

/// For a stream that ended without `[DONE]`: complete only if a `finish_reason` arrived.
/// Otherwise the connection was most likely cut mid-answer, which is a retryable
/// [`ModelError::Connect`]. A stream without any chunk is left to [`finish`] to name.
fn check_complete(acc: &ReplyAccumulator, target: &str) -> Result<(), ModelError> {
    if acc.chunks() == 0 || acc.has_finish_reason() {
        return Ok(());
    }
    Err(ModelError::Connect(format!(
        "{target}: stream ended after {} chunk(s) without [DONE] or a finish_reason; the answer is incomplete",
        acc.chunks()
    )))
}

fn finish(acc: ReplyAccumulator, target: &str) -> Result<ModelReply, ModelError> {
    if acc.chunks() == 0 {
        return Err(ModelError::Protocol(format!(
            "{target}: stream ended without any chunk"
        )));
    }
    Ok(acc.finish())
}

#[async_trait]
impl ChatModel for OpenAiClient {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        self.complete_observed(req, &Unobserved).await
    }

    async fn complete_observed(
        &self,
        req: &ChatRequest,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let body = self.body(req);
        let target = self.target(&req.model);
        let policy = RetryPolicy {
            timeout: self.cfg.timeout,
            max_retries: self.cfg.max_retries,
            backoff_base: self.cfg.backoff_base,
        };
        with_retries(policy, &req.model, &target, observer, &self.secrets, || {
            self.attempt(&body, &target, observer)
        })
        .await
    }
}

impl OpenAiClient {
    /// The request body: the conversation, then the agent's parameters, then `extra`.
    pub(crate) fn body(&self, req: &ChatRequest) -> Value {
        let req = &*req.for_images(self.images);
        let mut body = request_body(req);
        let p = &self.params;
        let set = |body: &mut Value, key: &str, value: Value| body[key] = value;
        if let Some(t) = p.temperature {
            set(&mut body, "temperature", json!(t));
        }
        if let Some(t) = p.top_p {
            set(&mut body, "top_p", json!(t));
        }
        if let Some(n) = p.max_tokens.or(self.default_max_tokens) {
            set(&mut body, "max_tokens", json!(n));
        }
        if let Some(stop) = &p.stop {
            set(&mut body, "stop", stop.to_json());
        }
        if let Some(seed) = p.seed {
            set(&mut body, "seed", json!(seed));
        }
        if let Some(effort) = p.reasoning_effort {
            set(&mut body, "reasoning_effort", json!(effort.as_str()));
        }
        if !req.tools.is_empty() {
            if let Some(choice) = &p.tool_choice {
                let wire = match super::params::tool_choice_for(choice, req) {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::Required => json!("required"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Tool(name) => {
                        json!({ "type": "function", "function": { "name": name } })
                    }
                };
                set(&mut body, "tool_choice", wire);
            }
            if let Some(parallel) = p.parallel_tool_calls {
                set(&mut body, "parallel_tool_calls", json!(parallel));
            }
        }
        merge_extra(&mut body, &p.extra);
        body
    }
}

/// The JSON body of a streaming chat-completions request.
pub(crate) fn request_body(req: &ChatRequest) -> Value {
    let messages = wire_messages(&req.messages);
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
    }
    body
}

/// A tool call's arguments as sent back in the history: the model's text when it is JSON, else
/// `{}` (the call's result already told the model what was wrong). Servers that parse the history
/// (llama-server) answer a request holding invalid arguments with an error, so a cut-off or
/// malformed call would make every later request of the session fail.
fn wire_arguments(arguments: &str) -> &str {
    if serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok() {
        arguments
    } else {
        "{}"
    }
}

/// The messages on the wire. A `tool` message carries text only, so the images of tool results
/// follow as one `user` message of `image_url` parts, after the last of the consecutive tool
/// results (the API wants every result of an assistant turn right after it).
fn wire_messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut images: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, images: &mut Vec<Value>| {
        if !images.is_empty() {
            out.push(json!({ "role": "user", "content": std::mem::take(images) }));
        }
    };
    for m in messages {
        if m.role != Role::Tool {
            flush(&mut out, &mut images);
        }
        let mut v = wire_message(m);
        if m.images.is_empty() {
            out.push(v);
            continue;
        }
        let parts = m
            .images
            .iter()
            .map(|i| json!({ "type": "image_url", "image_url": { "url": i.data_url() } }));
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            images.push(json!({ "type": "text", "text": format!("The image of tool call {id}:") }));
            images.extend(parts);
        } else {
            let mut content =
                vec![json!({ "type": "text", "text": m.content.as_deref().unwrap_or_default() })];
            content.extend(parts);
            v["content"] = Value::Array(content);
        }
        out.push(v);
    }
    flush(&mut out, &mut images);
    out
}

fn wire_message(m: &ChatMessage) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut v = json!({ "role": role, "content": m.content });
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": wire_arguments(&c.arguments) },
                })
            })
            .collect();
        v["tool_calls"] = Value::Array(calls);
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}
