//! Anthropic's native Messages API (`POST {base_url}/v1/messages`), streamed.
//!
//! The key goes in `x-api-key`, the API version in `anthropic-version`. The system prompt is the
//! top-level `system`, split before its runtime line so the stable part carries a
//! `cache_control` breakpoint, as does the last tool definition: the layered prompt then hits the
//! prompt cache, and the cache read/write tokens land in [`Usage`](super::Usage). Retries, the
//! backoff and `retry-after` (429, 529 overloaded, 5xx) are those of the OpenAI client.

mod request;
mod stream;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

pub use request::RUNTIME_HEADING;

use super::accumulate::short;
use super::http::{
    Failure, Overrun, ResponseCap, RetryPolicy, chain, content_type, endpoint, own_key, read_body,
    send, with_retries,
};
use super::params::ModelParams;
use super::{ChatModel, ChatRequest, ModelError, ModelObserver, ModelReply, Unobserved};
use crate::secrets::Secrets;
use stream::{MessageAccumulator, Step};

/// The `anthropic-version` header sent with every request.
pub(super) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Settings of an [`AnthropicClient`].
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL without the version segment, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<String>,
    /// Limit for one attempt, covering connect, headers and the whole streamed body.
    pub timeout: Duration,
    /// Attempts after the first one, for retryable failures only.
    pub max_retries: u32,
    /// First wait between attempts; doubles each retry, capped at 30 s.
    pub backoff_base: Duration,
    /// `max_tokens` when the agent's parameters name none (the API requires one).
    pub max_tokens: u32,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.anthropic.com".to_owned(),
            api_key: None,
            timeout: Duration::from_secs(120),
            max_retries: 2,
            backoff_base: Duration::from_millis(500),
            max_tokens: 4096,
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key itself.
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_base", &self.backoff_base)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// A client for Anthropic's Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    cfg: AnthropicConfig,
    url: String,
    http: crate::model::LazyClient,
    cap: ResponseCap,
    params: ModelParams,
    /// Whether its models accept images; without, images are left out of requests.
    images: bool,
    /// Redacted from every error: the key, and what [`AnthropicClient::with_secrets`] added.
    secrets: Secrets,
}

impl AnthropicClient {
    /// A client for `cfg.base_url`; fails if the URL is malformed.
    pub fn new(cfg: AnthropicConfig) -> Result<Self, ModelError> {
        let (url, http) = endpoint(&cfg.base_url, "v1/messages")?;
        Ok(Self {
            secrets: own_key(Secrets::default(), cfg.api_key.as_deref()),
            cfg,
            url,
            http,
            cap: ResponseCap::default(),
            params: ModelParams::default(),
            images: true,
        })
    }

    /// Whether its models accept images (`[providers.x] images`); where not, the images of
    /// messages are left out of requests (their text stays).
    pub(crate) fn with_images(mut self, images: bool) -> Self {
        self.images = images;
        self
    }

    /// Sends `params` (an agent's `[model_params]`) with every request. `seed` and
    /// `reasoning_effort` have no Messages API equivalent and are not sent.
    pub(crate) fn with_params(mut self, params: ModelParams) -> Self {
        self.params = params;
        self
    }

    /// Caps what one call may stream back (text plus tool inputs) at `max_bytes`, as
    /// `[providers.<provider>] max_response_bytes` says; past it the call fails, not retried.
    pub(crate) fn with_max_response_bytes(mut self, provider: &str, max_bytes: usize) -> Self {
        self.cap = ResponseCap {
            max_bytes,
            provider: Some(provider.to_owned()),
        };
        self
    }

    /// Redacts the values of `secrets` (and always the client's own key) from every error the
    /// client returns, tells or logs: a server may echo what it was sent.
    pub fn with_secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = own_key(secrets, self.cfg.api_key.as_deref());
        self
    }

    /// The full endpoint URL this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON body this client sends for `req`.
    pub fn body(&self, req: &ChatRequest) -> Value {
        let req = req.for_images(self.images);
        request::request_body(&req, &self.params, self.cfg.max_tokens)
    }

    /// Folds a whole recorded event stream (the bytes of a `/v1/messages` SSE answer) into a
    /// reply through the same parsing and accumulation as a streamed call, without the network:
    /// for replaying recorded streams and measuring the client's own cost.
    pub fn decode_stream(
        &self,
        body: &[u8],
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let target = format!("recorded stream of {}", self.url);
        let mut acc = MessageAccumulator::default();
        let mut parser = self.cap.parser();
        let overrun = |e| self.cap.overrun(&target, Overrun::Stream(e));
        let mut events = parser.try_push(body).map_err(overrun)?;
        events.extend(parser.try_finish().map_err(overrun)?);
        for event in events {
            if self.apply_data(&mut acc, &event.data, &target, observer)? {
                break;
            }
        }
        finish(acc, &target)
    }

    async fn attempt(
        &self,
        body: &Value,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, Failure> {
        let mut request = super::http::client(&self.http, &self.url)?
            .post(&self.url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(body);
        if let Some(key) = &self.cfg.api_key {
            request = request.header("x-api-key", key);
        }
        let response = send(request, target, &self.cap).await?;
        let mut acc = MessageAccumulator::default();
        if content_type(&response).contains("event-stream") {
            self.read_stream(response, &mut acc, target, observer)
                .await?;
        } else {
            // A server that ignored `stream: true` answers the whole message as JSON.
            let bytes = read_body(response, target, &self.cap).await?;
            let text = String::from_utf8_lossy(&bytes);
            let payload: Value = serde_json::from_str(&text).map_err(|e| {
                ModelError::Protocol(format!(
                    "{target}: neither an event stream nor a JSON message ({e}): {}",
                    short(text.trim_start())
                ))
            })?;
            self.apply(&mut acc, &payload, target, observer)?;
        }
        finish(acc, target).map_err(Failure::from)
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        acc: &mut MessageAccumulator,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<(), ModelError> {
        let mut body = response.bytes_stream();
        let mut parser = self.cap.parser();
        let overrun = |e| self.cap.overrun(target, Overrun::Stream(e));
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ModelError::Connect(format!("{target}: stream interrupted: {}", chain(&e)))
            })?;
            for event in parser.try_push(&chunk).map_err(overrun)? {
                if self.apply_data(acc, &event.data, target, observer)? {
                    return Ok(());
                }
            }
        }
        if let Some(event) = parser.try_finish().map_err(overrun)? {
            self.apply_data(acc, &event.data, target, observer)?;
        }
        Ok(())
    }

    /// Applies one SSE `data:` payload; `Ok(true)` at `message_stop`.
    fn apply_data(
        &self,
        acc: &mut MessageAccumulator,
        data: &str,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let payload: Value = serde_json::from_str(data).map_err(|e| {
            ModelError::Protocol(format!(
                "{target}: invalid JSON event ({e}): {}",
                short(data)
            ))
        })?;
        self.apply(acc, &payload, target, observer)?;
        Ok(acc.stopped())
    }

    fn apply(
        &self,
        acc: &mut MessageAccumulator,
        payload: &Value,
        target: &str,
        observer: &dyn ModelObserver,
    ) -> Result<(), ModelError> {
        let step = acc
            .apply(payload)
            .map_err(|e| ModelError::Protocol(format!("{target}: server error in stream: {e}")))?;
        self.cap.check_size(acc.size(), target)?;
        if let Step::Text(delta) = step {
            if !delta.is_empty() {
                observer.text(delta);
            }
        }
        Ok(())
    }
}

/// The reply of a finished stream. One cut short (started, no `message_stop`, no `stop_reason`)
/// is a [`ModelError::Connect`], tried again like a dropped connection; any other incomplete
/// stream is a [`ModelError::Protocol`].
fn finish(acc: MessageAccumulator, target: &str) -> Result<ModelReply, ModelError> {
    let cut = acc.cut_short();
    acc.finish().map_err(|e| {
        let message = format!("{target}: {e}");
        if cut {
            ModelError::Connect(message)
        } else {
            ModelError::Protocol(message)
        }
    })
}

#[async_trait]
impl ChatModel for AnthropicClient {
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError> {
        self.complete_observed(req, &Unobserved).await
    }

    async fn complete_observed(
        &self,
        req: &ChatRequest,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let body = self.body(req);
        let target = format!("model {:?} at {}", req.model, self.url);
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
