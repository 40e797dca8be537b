//! The OpenAI-compatible chat-completions client: streaming SSE, retries with backoff.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::accumulate::{ReplyAccumulator, short, truncate_chars};
use super::sse::SseParser;
use super::{
    ChatMessage, ChatModel, ChatRequest, ModelError, ModelObserver, ModelReply, Role, Unobserved,
};

/// Longest wait between two attempts, whatever the backoff or `Retry-After` says.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How much of an error body is kept in [`ModelError::Http`].
const ERROR_BODY_CHARS: usize = 500;

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
    http: reqwest::Client,
    cap: ResponseCap,
}

/// The most one call may stream back, and the provider it is configured on (for the message).
#[derive(Debug, Clone)]
struct ResponseCap {
    max_bytes: usize,
    provider: Option<String>,
}

impl ResponseCap {
    /// Fails once `acc` holds more content than the cap: the call is refused, not retried.
    fn check(&self, acc: &ReplyAccumulator, target: &str) -> Result<(), ModelError> {
        if acc.size() <= self.max_bytes {
            return Ok(());
        }
        Err(self.exceeded(target))
    }

    fn exceeded(&self, target: &str) -> ModelError {
        let setting = match &self.provider {
            Some(name) => format!("[providers.{name}] max_response_bytes"),
            None => "max_response_bytes".to_owned(),
        };
        ModelError::Protocol(format!(
            "{target}: the answer exceeded {} bytes of text and tool-call arguments ({setting} = {}); the call was stopped",
            self.max_bytes, self.max_bytes
        ))
    }

    /// The most raw body bytes read from an answer that is not an event stream: the content cap
    /// plus room for the JSON around it.
    fn raw_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(2).saturating_add(64 * 1024)
    }
}

/// One failed attempt: the error, and how long the server asked us to wait.
struct Failure {
    error: ModelError,
    retry_after: Option<Duration>,
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

impl OpenAiClient {
    /// A client for `cfg.base_url`; fails if the URL is malformed.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, ModelError> {
        let base = cfg.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let parsed = reqwest::Url::parse(&url).map_err(|e| {
            ModelError::Config(format!(
                "model base_url {:?} is not a valid URL: {e}",
                cfg.base_url
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ModelError::Config(format!(
                "model base_url {:?} must start with http:// or https://",
                cfg.base_url
            )));
        }
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| ModelError::Config(format!("cannot build HTTP client for {url}: {e}")))?;
        let cap = ResponseCap {
            max_bytes: crate::config::DEFAULT_MAX_RESPONSE_BYTES,
            provider: None,
        };
        Ok(Self {
            cfg,
            url,
            http,
            cap,
        })
    }

    /// Caps what one call may stream back (text plus tool-call arguments) at `max_bytes`, as
    /// `[providers.<provider>] max_response_bytes` says (default 4 MiB). Past it the call fails
    /// with an error naming the cap and the provider, and is not retried.
    pub fn with_max_response_bytes(mut self, provider: &str, max_bytes: usize) -> Self {
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

    fn target(&self, model: &str) -> String {
        format!("model {model:?} at {}", self.url)
    }

    async fn attempt(
        &self,
        body: &Value,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, Failure> {
        let mut request = self.http.post(&self.url).json(body);
        if let Some(key) = &self.cfg.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ModelError::Connect(format!("{target}: request failed: {}", chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            let error = ModelError::Http {
                status: status.as_u16(),
                body: truncate_chars(&text, ERROR_BODY_CHARS),
                target: target.to_owned(),
            };
            return Err(Failure { error, retry_after });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
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
            self.cap.check(&acc, target)?;
            let reply = acc.finish();
            if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
                observer.text(text);
            }
            return Ok(reply);
        }
        let mut parser = SseParser::new();
        let mut acc = ReplyAccumulator::default();
        let mut events = parser.push(&bytes);
        events.extend(parser.finish());
        for event in events {
            if apply_event(&mut acc, &event.data, target, observer, &self.cap)? {
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
        finish(acc, target).map_err(Failure::from)
    }
}

/// Reads a whole (non-streamed) body, refusing one larger than the cap allows.
async fn read_body(
    response: reqwest::Response,
    target: &str,
    cap: &ResponseCap,
) -> Result<Vec<u8>, ModelError> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ModelError::Connect(format!("{target}: body interrupted: {}", chain(&e)))
        })?;
        if body.len().saturating_add(chunk.len()) > cap.raw_bytes() {
            return Err(cap.exceeded(target));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads an SSE body to `[DONE]` (or to its end) and folds it into a reply.
async fn read_stream(
    response: reqwest::Response,
    target: &str,
    observer: &dyn ModelObserver,
    cap: &ResponseCap,
) -> Result<ModelReply, ModelError> {
    let mut stream = response.bytes_stream();
    let mut parser = SseParser::new();
    let mut acc = ReplyAccumulator::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ModelError::Connect(format!("{target}: stream interrupted: {}", chain(&e)))
        })?;
        for event in parser.push(&chunk) {
            if apply_event(&mut acc, &event.data, target, observer, cap)? {
                return Ok(acc.finish());
            }
        }
    }
    if let Some(event) = parser.finish() {
        apply_event(&mut acc, &event.data, target, observer, cap)?;
    }
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
        cap.check(acc, target)?;
        if let Some(delta) = acc.text().get(before..).filter(|d| !d.is_empty()) {
            observer.text(delta);
        }
    }
    Ok(false)
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
        let body = request_body(req);
        let target = self.target(&req.model);
        let mut attempt: u32 = 0;
        loop {
            debug!(model = %req.model, url = %self.url, attempt, "Model request started.");
            let failure = match tokio::time::timeout(
                self.cfg.timeout,
                self.attempt(&body, &target, observer),
            )
            .await
            {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(failure)) => failure,
                Err(_) => Failure::from(ModelError::TimedOut {
                    after: self.cfg.timeout,
                    target: target.clone(),
                }),
            };
            if !failure.error.is_retryable() || attempt >= self.cfg.max_retries {
                return Err(failure.error);
            }
            let backoff = self
                .cfg
                .backoff_base
                .saturating_mul(2u32.saturating_pow(attempt))
                .min(MAX_BACKOFF);
            let delay = failure.retry_after.map_or(backoff, |d| d.min(MAX_BACKOFF));
            let status = match &failure.error {
                ModelError::Http { status, .. } => Some(u64::from(*status)),
                _ => None,
            };
            attempt += 1;
            observer.retry(attempt, delay, &failure.error);
            warn!(
                model = %req.model, attempt, status, delay_ms = delay.as_millis() as u64,
                error = %failure.error, "Model request failed; retrying."
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// The JSON body of a streaming chat-completions request.
pub(crate) fn request_body(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(wire_message).collect();
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
                    "function": { "name": c.name, "arguments": c.arguments },
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

/// `Retry-After` in whole seconds (the HTTP-date form is ignored).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

/// An error and its sources on one line: reqwest's own message alone says little.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
