//! A small Telegram Bot API client: `getUpdates` (long polling) and `sendMessage`.
//!
//! Every answer is `{ok: true, result}` or `{ok: false, error_code, description, parameters?:
//! {retry_after?, migrate_to_chat_id?}}`. The token is part of every URL
//! (`<base>/bot<token>/<method>`), so URLs are never logged and reqwest's errors are stripped of
//! theirs.

use crate::delivery::SendError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::Duration;

/// One update from `getUpdates` (only messages are asked for).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Update {
    /// The update's id: increasing; the next `offset` is the last one plus one.
    pub update_id: i64,
    /// A new message, when it is one.
    #[serde(default)]
    pub message: Option<Message>,
}

/// A message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Message {
    /// Its id in the chat.
    pub message_id: i64,
    /// The chat it was sent in.
    pub chat: Chat,
    /// Its sender (absent in channels).
    #[serde(default)]
    pub from: Option<User>,
    /// Its text (absent for photos, stickers …).
    #[serde(default)]
    pub text: Option<String>,
}

/// A chat.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Chat {
    /// The chat id (negative for groups).
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A user.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct User {
    /// The user id.
    pub id: i64,
    /// Whether it is a bot.
    #[serde(default)]
    pub is_bot: bool,
}

/// Why a Bot API call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ApiError {
    /// The API answered `ok: false`.
    #[error("Telegram API error {code}: {description}")]
    Api {
        /// `error_code` (an HTTP status: 400, 403, 429 …).
        code: u16,
        /// `description`.
        description: String,
        /// `parameters.retry_after`, in seconds (429).
        retry_after: Option<u64>,
    },
    /// The server could not be reached, or did not answer in time.
    #[error("Telegram API unreachable: {0}")]
    Http(#[source] reqwest::Error),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] std::sync::Arc<reqwest::Error>),
    /// The answer was not the API's JSON.
    #[error("Telegram API answer unreadable (HTTP {status}): {source}")]
    Decode {
        /// The HTTP status.
        status: u16,
        /// What was wrong.
        source: serde_json::Error,
    },
}

impl ApiError {
    /// How long the API asked to wait (429 `retry_after`).
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api { retry_after, .. } => retry_after.map(Duration::from_secs),
            _ => None,
        }
    }
}

impl From<ApiError> for SendError {
    fn from(e: ApiError) -> Self {
        let retry_after = e.retry_after();
        let transient = match &e {
            ApiError::Api { code, .. } => *code == 429 || *code >= 500,
            ApiError::Http(_) | ApiError::Client(_) => true,
            ApiError::Decode { status, .. } => *status >= 500,
        };
        if transient {
            SendError::Transient {
                reason: e.to_string(),
                retry_after,
            }
        } else {
            SendError::Permanent {
                reason: e.to_string(),
            }
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// The client of one bot.
#[derive(Clone)]
pub(crate) struct BotApi {
    client: clawbus_runtime::model::LazyClient,
    /// `<base_url>/bot<token>`: a secret, never logged.
    root: String,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BotApi")
    }
}

/// The most updates one `getUpdates` answer holds (Telegram's own maximum).
const UPDATES_PER_POLL: u32 = 100;
/// How long a `sendMessage` may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

impl BotApi {
    /// A client of the bot with `token` on the server at `base_url`.
    pub(crate) fn new(base_url: &str, token: &str) -> Self {
        Self {
            client: clawbus_runtime::model::LazyClient::shared(),
            root: format!("{}/bot{token}", base_url.trim_end_matches('/')),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let resp = self
            .client
            .get()
            .map_err(ApiError::Client)?
            .post(format!("{}/{method}", self.root))
            .json(&body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| ApiError::Http(e.without_url()))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ApiError::Http(e.without_url()))?;
        let answer: Answer =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode { status, source: e })?;
        if !answer.ok {
            return Err(ApiError::Api {
                code: answer.error_code.unwrap_or(status),
                description: answer.description.unwrap_or_default(),
                retry_after: answer.parameters.and_then(|p| p.retry_after),
            });
        }
        serde_json::from_value(answer.result).map_err(|e| ApiError::Decode { status, source: e })
    }

    /// The updates from `offset` on (confirming every earlier one), waiting up to `timeout`
    /// for one to arrive.
    pub(crate) async fn get_updates(
        &self,
        offset: Option<i64>,
        timeout: Duration,
    ) -> Result<Vec<Update>, ApiError> {
        let mut body = json!({
            "timeout": timeout.as_secs(),
            "limit": UPDATES_PER_POLL,
            "allowed_updates": ["message"],
        });
        if let Some(offset) = offset {
            body["offset"] = json!(offset);
        }
        // The HTTP request outlives the long poll by a margin.
        self.call("getUpdates", body, timeout + Duration::from_secs(10))
            .await
    }

    /// Sends `text` (at most 4,096 UTF-16 units) to `chat_id`.
    pub(crate) async fn send_message(&self, chat_id: i64, text: &str) -> Result<(), ApiError> {
        let body = json!({ "chat_id": chat_id, "text": text });
        self.call::<Value>("sendMessage", body, SEND_TIMEOUT)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, retry_after: Option<u64>) -> SendError {
        ApiError::Api {
            code,
            description: "x".into(),
            retry_after,
        }
        .into()
    }

    #[test]
    fn flood_control_and_server_errors_are_retried_other_refusals_are_not() {
        assert_eq!(
            api(429, Some(7)),
            SendError::Transient {
                reason: "Telegram API error 429: x".into(),
                retry_after: Some(Duration::from_secs(7)),
            }
        );
        assert!(matches!(api(502, None), SendError::Transient { .. }));
        assert!(matches!(api(403, None), SendError::Permanent { .. }));
        assert!(matches!(api(400, None), SendError::Permanent { .. }));
    }

    #[test]
    fn the_error_shape_of_the_bot_api_is_read() {
        let body = r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}"#;
        let answer: Answer = serde_json::from_str(body).unwrap();
        assert!(!answer.ok);
        assert_eq!(answer.error_code, Some(429));
        assert_eq!(answer.parameters.and_then(|p| p.retry_after), Some(5));
        let update: Update = serde_json::from_str(
            r#"{"update_id":7,"message":{"message_id":1,"date":0,"chat":{"id":-100,"type":"supergroup","title":"t"},"text":"hi"}}"#,
        )
        .unwrap();
        assert_eq!(
            update.message.map(|m| (m.chat.id, m.chat.kind)),
            Some((-100, "supergroup".into()))
        );
    }
}
