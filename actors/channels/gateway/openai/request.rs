//! The body of `POST /v1/chat/completions`, as the OpenAI SDKs send it. Fields clawbus does not
//! use (`temperature`, `max_tokens`, `stream_options`, …) are accepted and ignored: the agent's
//! own configuration decides them.

use serde::Deserialize;

/// A chat completion request.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    /// The agent: `agent:<id>` or `<id>`.
    pub model: String,
    /// The conversation; the last user message is the task.
    pub messages: Vec<ChatMessage>,
    /// Answer as server-sent `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Names the session (when no `X-Clawbus-Session` header does).
    #[serde(default)]
    pub user: Option<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    /// A system prompt (the agent has its own; ignored).
    System,
    /// A developer prompt (ignored like `system`).
    Developer,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
    /// A legacy function result.
    Function,
}

/// One message of `messages`.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its content: text, or parts.
    #[serde(default)]
    pub content: Option<Content>,
}

/// A message's content.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    /// Plain text.
    Text(String),
    /// Content parts; the `text` ones are joined.
    Parts(Vec<ContentPart>),
}

/// One content part (`{type: "text", text}`; other kinds carry no text).
#[derive(Debug, Deserialize)]
pub(crate) struct ContentPart {
    /// The part's text, for `type: "text"`.
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    /// The text of the content.
    pub(crate) fn text(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl ChatRequest {
    /// The text of the last user message.
    pub(crate) fn last_user_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.as_ref())
            .map(Content::text)
    }
}
