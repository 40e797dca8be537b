//! What the HTTP model clients share: the retry loop with its backoff, `Retry-After`, the
//! response-size cap, error bodies, reading a whole body under the cap, and the redaction of
//! secret values (the client's own key first) from every error a call returns, retries or logs.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use tracing::{debug, warn};

use super::LazyClient;
use super::accumulate::truncate_chars;
use super::{ModelError, ModelObserver, ModelReply};
use crate::secrets::Secrets;

/// Longest wait between two attempts, whatever the backoff or `Retry-After` says.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How much of an error body is kept in [`ModelError::Http`].
pub(crate) const ERROR_BODY_CHARS: usize = 500;

/// How a client retries: the limit on one attempt, how many retries, the first backoff.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Limit for one attempt, covering connect, headers and the whole streamed body.
    pub timeout: Duration,
    /// Attempts after the first one, for retryable failures only.
    pub max_retries: u32,
    /// First wait between attempts; doubles each retry, capped at [`MAX_BACKOFF`].
    pub backoff_base: Duration,
}

/// One failed attempt: the error, and how long the server asked us to wait.
pub(crate) struct Failure {
    /// What went wrong.
    pub error: ModelError,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

/// Runs `attempt` until it succeeds, fails for good, or the retries are spent. Each attempt runs
/// under `policy.timeout`; a retryable failure waits `backoff_base * 2^n` (capped at 30 s), or
/// what the server's `Retry-After` asked (capped the same), and tells `observer`. Every error is
/// redacted with `secrets` before it is told, logged or returned: a server may echo the key.
pub(crate) async fn with_retries<F, Fut>(
    policy: RetryPolicy,
    model: &str,
    target: &str,
    observer: &dyn ModelObserver,
    secrets: &Secrets,
    mut attempt: F,
) -> Result<ModelReply, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<ModelReply, Failure>>,
{
    let mut n: u32 = 0;
    loop {
        debug!(%model, %target, attempt = n, "Model request started.");
        let mut failure = match tokio::time::timeout(policy.timeout, attempt()).await {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(failure)) => failure,
            Err(_) => Failure::from(ModelError::TimedOut {
                after: policy.timeout,
                target: target.to_owned(),
            }),
        };
        failure.error = failure.error.redacted(secrets);
        if !failure.error.is_retryable() || n >= policy.max_retries {
            return Err(failure.error);
        }
        let backoff = policy
            .backoff_base
            .saturating_mul(2u32.saturating_pow(n))
            .min(MAX_BACKOFF);
        let delay = failure.retry_after.map_or(backoff, |d| d.min(MAX_BACKOFF));
        let status = match &failure.error {
            ModelError::Http { status, .. } => Some(u64::from(*status)),
            _ => None,
        };
        n += 1;
        observer.retry(n, delay, &failure.error);
        warn!(
            %model, attempt = n, status, delay_ms = delay.as_millis() as u64,
            error = %failure.error, "Model request failed; retrying."
        );
        tokio::time::sleep(delay).await;
    }
}

/// Sends `request`; a non-success status becomes a [`Failure`] carrying the (truncated) body and
/// the server's `Retry-After`. The error body is read under the cap (a body that never ends fails
/// with the cap's error) and only its first [`ERROR_BODY_CHARS`] characters are kept.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    target: &str,
    cap: &ResponseCap,
) -> Result<reqwest::Response, Failure> {
    let response = request
        .send()
        .await
        .map_err(|e| ModelError::Connect(format!("{target}: request failed: {}", chain(&e))))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    // A UTF-8 character is at most 4 bytes: this many bytes hold the characters kept.
    let keep = ERROR_BODY_CHARS.saturating_mul(4).saturating_add(4);
    let head = match read_capped(response, target, cap, keep, Overrun::ErrorBody).await {
        Ok(head) => head,
        // An interrupted error body still says what the status says.
        Err(ModelError::Connect(_)) => Vec::new(),
        Err(e) => return Err(Failure::from(e)),
    };
    let error = ModelError::Http {
        status: status.as_u16(),
        body: truncate_chars(&String::from_utf8_lossy(&head), ERROR_BODY_CHARS),
        target: target.to_owned(),
    };
    Err(Failure { error, retry_after })
}

/// The `Content-Type` of `response`, lowercased; empty when absent.
pub(crate) fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// The most one call may stream back, and the provider it is configured on (for the message).
#[derive(Debug, Clone)]
pub(crate) struct ResponseCap {
    /// Bytes of text plus tool-call arguments.
    pub max_bytes: usize,
    /// The `[providers.<name>]` that set it, when one did.
    pub provider: Option<String>,
}

impl Default for ResponseCap {
    fn default() -> Self {
        Self {
            max_bytes: clawbus_core::config::DEFAULT_MAX_RESPONSE_BYTES,
            provider: None,
        }
    }
}

impl ResponseCap {
    /// Fails once `size` bytes of content exceed the cap: the call is refused, not retried.
    pub(crate) fn check_size(&self, size: usize, target: &str) -> Result<(), ModelError> {
        if size <= self.max_bytes {
            return Ok(());
        }
        Err(self.exceeded(target))
    }

    /// The error of an answer past the cap.
    pub(crate) fn exceeded(&self, target: &str) -> ModelError {
        self.overrun(target, Overrun::Content)
    }

    /// The error of an answer whose `what` went past what the cap allows. Every one names the
    /// setting and its value, and is a [`ModelError::Protocol`]: refused, not retried.
    pub(crate) fn overrun(&self, target: &str, what: Overrun) -> ModelError {
        let setting = match &self.provider {
            Some(name) => format!("[providers.{name}] max_response_bytes"),
            None => "max_response_bytes".to_owned(),
        };
        let (max, raw) = (self.max_bytes, self.raw_bytes());
        let passed = match what {
            Overrun::Content => {
                format!("the answer exceeded {max} bytes of text and tool-call arguments")
            }
            Overrun::Stream(too_large) => too_large.to_string(),
            Overrun::Body => format!("the answer's body passed {raw} bytes"),
            Overrun::ErrorBody => format!("the error answer's body passed {raw} bytes"),
        };
        ModelError::Protocol(format!(
            "{target}: {passed} ({setting} = {max}); the call was stopped"
        ))
    }

    /// The most raw body bytes read from an answer that is not an event stream, from an error
    /// answer, or in one line or one event of a stream: the content cap plus room for the JSON
    /// around it.
    pub(crate) fn raw_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(2).saturating_add(64 * 1024)
    }

    /// An event-stream parser that holds at most [`raw_bytes`](Self::raw_bytes) of one line and
    /// of one event.
    pub(crate) fn parser(&self) -> super::sse::SseParser {
        super::sse::SseParser::with_limit(self.raw_bytes())
    }
}

/// What went past the cap, for [`ResponseCap::overrun`]'s message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Overrun {
    /// The text and tool-call arguments.
    Content,
    /// One line or one event of the event stream.
    Stream(super::sse::SseTooLarge),
    /// A whole (non-streamed) body.
    Body,
    /// The body of an error answer.
    ErrorBody,
}

/// Reads a whole (non-streamed) body, refusing one larger than the cap allows.
pub(crate) async fn read_body(
    response: reqwest::Response,
    target: &str,
    cap: &ResponseCap,
) -> Result<Vec<u8>, ModelError> {
    read_capped(response, target, cap, usize::MAX, Overrun::Body).await
}

/// Reads a body to its end, keeping its first `keep` bytes; fails with the cap's error once more
/// than [`ResponseCap::raw_bytes`] arrived, whatever was kept.
async fn read_capped(
    response: reqwest::Response,
    target: &str,
    cap: &ResponseCap,
    keep: usize,
    what: Overrun,
) -> Result<Vec<u8>, ModelError> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    let mut read = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ModelError::Connect(format!("{target}: body interrupted: {}", chain(&e)))
        })?;
        read = read.saturating_add(chunk.len());
        if read > cap.raw_bytes() {
            return Err(cap.overrun(target, what));
        }
        let room = keep.saturating_sub(body.len()).min(chunk.len());
        body.extend_from_slice(&chunk[..room]);
    }
    Ok(body)
}

/// `Retry-After` in whole seconds (the HTTP-date form is ignored).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

/// An error and its sources on one line: reqwest's own message alone says little.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// `base_url` + `/path`, checked to be an http(s) URL, and the process's shared HTTP client
/// (built on its first request, see [`LazyClient::shared`]).
pub(crate) fn endpoint(base_url: &str, path: &str) -> Result<(String, LazyClient), ModelError> {
    let base = base_url.trim_end_matches('/');
    let url = format!("{base}/{path}");
    let parsed = reqwest::Url::parse(&url).map_err(|e| {
        ModelError::Config(format!(
            "model base_url {base_url:?} is not a valid URL: {e}"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ModelError::Config(format!(
            "model base_url {base_url:?} must start with http:// or https://"
        )));
    }
    Ok((url, LazyClient::shared()))
}

/// The built client of `lazy`, or the configuration error naming `url`.
pub(crate) fn client<'a>(
    lazy: &'a LazyClient,
    url: &str,
) -> Result<&'a reqwest::Client, ModelError> {
    lazy.get()
        .map_err(|e| ModelError::Config(format!("cannot build HTTP client for {url}: {e}")))
}

/// The name a client's own key is redacted under when no configured variable holds it.
pub(crate) const OWN_KEY: &str = "api_key";

/// `secrets` plus the client's own `key` (under [`OWN_KEY`] unless a configured variable already
/// holds it).
pub(crate) fn own_key(secrets: Secrets, key: Option<&str>) -> Secrets {
    match key {
        Some(key) => secrets.with_value(OWN_KEY, key),
        None => secrets,
    }
}
