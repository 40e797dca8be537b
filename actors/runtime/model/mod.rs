//! Chat-completion clients.
//!
//! - [`ChatModel`]: the one trait the agent loop calls.
//! - [`OpenAiClient`]: an OpenAI-compatible `/chat/completions` client that streams SSE, accumulates
//!   tool-call deltas, tolerates "compatible" servers and retries with backoff.
//! - [`AnthropicClient`]: Anthropic's native Messages API (`/v1/messages`), streamed, with prompt
//!   caching breakpoints on the stable prefix.
//! - [`ModelParams`]: an agent's `[model_params]`, sent by both HTTP clients.
//! - [`FallbackModel`]: a primary model and its fallbacks, each behind its provider's
//!   [`Breaker`] (shared per provider through [`Breakers`]).
//! - [`ScriptedModel`]: the built-in `scripted/<name>` provider, driven by regex rules, so
//!   everything runs with no key and no network.
//! - [`sse`]: the incremental Server-Sent Events parser used by the client.

mod accumulate;
mod anthropic;
mod breaker;
mod fallback;
mod http;
mod lazy;
mod openai;
mod params;
mod schema_chars;
mod scripted;
pub mod sse;

#[cfg(test)]
pub(crate) mod tests;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use anthropic::{AnthropicClient, AnthropicConfig, RUNTIME_HEADING};
pub use breaker::{BREAKER_GAUGE, Breaker, BreakerPolicy, BreakerState, BreakerStatus, Breakers};
pub use fallback::{Candidate, FallbackModel, Fallover, FalloverReason, Skipped};
pub use lazy::LazyClient;
pub use openai::{OpenAiClient, OpenAiConfig};
pub use params::{
    ModelParams, RESERVED_BODY_KEYS, ReasoningEffort, Stop, ToolChoice, after_tool_result,
};
pub(crate) use schema_chars::schema_chars;
pub use scripted::{RulesError, ScriptedModel};

/// Who wrote a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The human (or upstream agent) side.
    User,
    /// The model's own turns, text and/or tool calls.
    Assistant,
    /// The result of one tool call, paired by `tool_call_id`.
    Tool,
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Author of the message.
    pub role: Role,
    /// Text; `None` for an assistant turn that only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls the assistant made in this turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `Tool` message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Images that go with the text (a tool's screenshot), sent to models that accept images.
    /// Never written to a transcript or journal: an image goes with the turn that made it, and
    /// the text names where it was saved.
    #[serde(skip)]
    pub images: Vec<ImagePart>,
}

/// An image part of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePart {
    /// Its type (`image/png`).
    pub media_type: String,
    /// Its bytes, base64 (standard alphabet, padded).
    pub data: String,
}

impl ImagePart {
    /// A PNG of `bytes`.
    pub fn png(bytes: &[u8]) -> Self {
        use base64::Engine as _;
        Self {
            media_type: "image/png".into(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// As a `data:` URL (what OpenAI's `image_url` takes).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::plain(Role::System, text.into())
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::plain(Role::User, text.into())
    }

    /// An assistant turn: its text (if any) and the tool calls it made.
    pub fn assistant(text: Option<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: text,
            tool_calls: calls,
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    /// The result of tool call `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            images: Vec::new(),
        }
    }

    /// This message with `images` added.
    pub fn with_images(mut self, images: Vec<ImagePart>) -> Self {
        self.images.extend(images);
        self
    }

    fn plain(role: Role, text: String) -> Self {
        Self {
            role,
            content: Some(text),
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }
}

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Id the tool result must quote back (`tool_call_id`).
    pub id: String,
    /// Name of the tool to run.
    pub name: String,
    /// Arguments as raw JSON text, exactly as the model sent it (it may be invalid JSON; the
    /// agent loop reports that back to the model). `"{}"` when the model sent nothing.
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name, as the model will call it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One chat-completion request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// Model name as the provider knows it (without the `provider/` prefix).
    pub model: String,
    /// The whole conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call; empty means none are offered. Shared: a turn offers the same
    /// tools on every call, and an agent's tool set builds them once.
    pub tools: std::sync::Arc<[ToolSchema]>,
}

impl ChatRequest {
    /// `req` for a model that takes no images: a copy without them when it holds any, else
    /// `req` itself (no copy).
    pub(crate) fn for_images(&self, accepted: bool) -> std::borrow::Cow<'_, Self> {
        if accepted || self.messages.iter().all(|m| m.images.is_empty()) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut bare = self.clone();
        for m in &mut bare.messages {
            m.images.clear();
        }
        std::borrow::Cow::Owned(bare)
    }
}

/// Token counts reported by the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens the model generated.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those read from the provider's prompt cache, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Of the prompt tokens, those written to the provider's prompt cache, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelReply {
    /// Assistant text, `None` when the model sent none.
    pub text: Option<String>,
    /// Tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, … when the provider said so.
    pub finish_reason: Option<String>,
    /// Token usage when the provider reported it.
    pub usage: Option<Usage>,
    /// The `provider/model` that answered, set by a [`FallbackModel`] (which may have moved past
    /// its primary); `None` from a single client, whose caller knows its model.
    pub model: Option<String>,
    /// The model name the provider's answer gave (`model` of the response), when it gave one:
    /// it may differ from the name requested (`llama-server` answers with its own).
    pub served_model: Option<String>,
}

impl ModelReply {
    /// Whether the answer was cut off by the output-token limit (`finish_reason: "length"`;
    /// Anthropic's `max_tokens` stop reason is mapped to it).
    pub fn is_truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// One attempt took longer than the configured timeout (no retries left).
    #[error("{target}: no complete answer within {after:?}")]
    TimedOut {
        /// The per-attempt timeout that fired.
        after: Duration,
        /// Which model at which URL, for the message.
        target: String,
    },
    /// The server answered a non-success HTTP status.
    #[error("{target}: HTTP {status}: {body}")]
    Http {
        /// HTTP status code.
        status: u16,
        /// Response body, truncated to 500 characters.
        body: String,
        /// Which model at which URL, for the message.
        target: String,
    },
    /// The connection could not be made or broke before the answer was complete.
    #[error("{0}")]
    Connect(String),
    /// The server answered something that is not a chat completion.
    #[error("{0}")]
    Protocol(String),
    /// The scripted model could not produce a reply.
    #[error("{0}")]
    Script(String),
    /// The client configuration is unusable (e.g. a malformed base URL).
    #[error("{0}")]
    Config(String),
    /// Every model of a [`FallbackModel`] was skipped: each provider's circuit breaker is open.
    #[error("every model was skipped, its provider's circuit breaker open: {}", fallback::skipped_list(.skipped))]
    CircuitOpen {
        /// The models skipped, in the order they would have been tried.
        skipped: Vec<Skipped>,
    },
}

impl ModelError {
    /// This error with every secret value of `secrets` replaced by `[REDACTED:<NAME>]` in the
    /// text that came from outside (a body, a message, a URL): a provider may echo the key it
    /// was sent. The clients apply it to every error before it is told, logged or returned.
    pub fn redacted(self, secrets: &crate::secrets::Secrets) -> Self {
        let clean = |text: String| match secrets.redact_cut(&text) {
            std::borrow::Cow::Owned(clean) => clean,
            std::borrow::Cow::Borrowed(_) => text,
        };
        match self {
            Self::TimedOut { after, target } => Self::TimedOut {
                after,
                target: clean(target),
            },
            Self::Http {
                status,
                body,
                target,
            } => Self::Http {
                status,
                body: clean(body),
                target: clean(target),
            },
            Self::Connect(text) => Self::Connect(clean(text)),
            Self::Protocol(text) => Self::Protocol(clean(text)),
            Self::Script(text) => Self::Script(clean(text)),
            Self::Config(text) => Self::Config(clean(text)),
            Self::CircuitOpen { skipped } => Self::CircuitOpen { skipped },
        }
    }

    /// Whether trying the same request again may succeed: HTTP 429 and 5xx, connection failures,
    /// and the timeout of a single attempt.
    /// A 5xx that says the request itself is invalid ([`ModelError::is_invalid_request`]) is not
    /// retried: the same request would fail the same way.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Self::TimedOut { .. } | Self::Connect(_) => true,
            Self::Http { .. } if self.is_invalid_request() => false,
            Self::Http { status, .. } => *status == 429 || *status >= 500,
            Self::Protocol(_) | Self::Script(_) | Self::Config(_) | Self::CircuitOpen { .. } => {
                false
            }
        }
    }

    /// Whether the next model of a [`FallbackModel`] should be tried after this error (the
    /// provider's own retries already spent): a rate limit (429), overload or other server error
    /// (5xx, 529), a timeout (408 or one attempt's limit) or a connection failure. Authentication
    /// (401, 403) and invalid requests (400, 404, 422, other 4xx) do not fall over: the next model
    /// would most likely fail the same way, and the mistake must be seen, not hidden. Neither do
    /// protocol, script and configuration errors.
    pub(crate) fn falls_over(&self) -> bool {
        match self {
            Self::TimedOut { .. } | Self::Connect(_) | Self::CircuitOpen { .. } => true,
            Self::Http { .. } if self.is_invalid_request() => false,
            Self::Http { status, .. } => matches!(*status, 408 | 429) || *status >= 500,
            Self::Protocol(_) | Self::Script(_) | Self::Config(_) => false,
        }
    }
}

impl ModelError {
    /// Whether the server said the request itself is invalid, so sending it again cannot help:
    /// a 4xx other than 401, 403, 408 and 429, or a 5xx whose body says so (an error `type` of
    /// `invalid_request_error`, or a message like llama-server's 500 "Failed to parse tool call
    /// arguments as JSON").
    pub(crate) fn is_invalid_request(&self) -> bool {
        let Self::Http { status, body, .. } = self else {
            return false;
        };
        match *status {
            401 | 403 | 408 | 429 => false,
            400..=499 => true,
            _ => {
                let body = body.to_ascii_lowercase();
                INVALID_REQUEST_MARKERS.iter().any(|m| body.contains(m))
            }
        }
    }
}

/// What a 5xx body says when the server blames the request, lowercased.
const INVALID_REQUEST_MARKERS: &[&str] = &[
    "invalid_request_error",
    "failed to parse tool call arguments",
    "failed to parse messages",
    "invalid request",
];

/// Sees a model call as it happens: text as it streams, retries as they are decided.
pub trait ModelObserver: Send + Sync {
    /// A piece of the assistant's text, in order.
    fn text(&self, delta: &str);
    /// The call failed and will be tried again after `delay`.
    fn retry(&self, attempt: u32, delay: Duration, error: &ModelError);
    /// A [`FallbackModel`] moved from one model to the next; the last one told is the one that
    /// answered (or failed for good). Ignored unless overridden.
    fn fell_over(&self, event: &Fallover<'_>) {
        let _ = event;
    }
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl ModelObserver for Unobserved {
    fn text(&self, _: &str) {}
    fn retry(&self, _: u32, _: Duration, _: &ModelError) {}
}

/// A chat-completion backend.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends the conversation and returns the model's whole reply.
    async fn complete(&self, req: &ChatRequest) -> Result<ModelReply, ModelError>;

    /// Like [`ChatModel::complete`], telling `observer` the text as it streams. Backends that do
    /// not stream report the whole text at once.
    async fn complete_observed(
        &self,
        req: &ChatRequest,
        observer: &dyn ModelObserver,
    ) -> Result<ModelReply, ModelError> {
        let reply = self.complete(req).await?;
        if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
            observer.text(text);
        }
        Ok(reply)
    }
}
