//! The older HTTP+SSE transport (protocol version 2024-11-05), for servers that answer 404 or 405
//! to Streamable HTTP's initialize POST: a GET of the configured URL opens an event stream whose
//! `endpoint` event names the URL to POST messages to; the server's messages come back as
//! `message` events on that stream. `rmcp` 3.11 has no client for it, so [`SseTransport`] is
//! one, plugged into the SDK as a [`Transport`].
//!
//! As over Streamable HTTP: the same client (redirects not followed), the same headers, events
//! bounded ([`super::bounded::MAX_LINE_BYTES`]: an event that grows past it ends the session). The
//! endpoint must be on the configured URL's origin (scheme, host and port); another one is
//! refused, so the headers never go anywhere the file does not name.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{ClientInitializeError, RoleClient};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use std::borrow::Cow;
use std::pin::Pin;
use std::time::Duration;

/// Why the HTTP+SSE transport failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SseError {
    /// The request failed (connection, timeout, body).
    #[error("HTTP+SSE: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered a status other than success.
    #[error("HTTP+SSE: {method} answered HTTP {status}")]
    Status {
        /// `GET` (the stream) or `POST` (a message).
        method: &'static str,
        status: StatusCode,
    },
    /// The GET was not answered with an event stream.
    #[error("HTTP+SSE: the GET answered content type {0:?}, not text/event-stream")]
    NotAnEventStream(Option<String>),
    /// The stream ended before naming the endpoint.
    #[error("HTTP+SSE: the event stream ended before an endpoint event")]
    NoEndpoint,
    /// The endpoint is not a URL.
    #[error("HTTP+SSE: the endpoint {0:?} is not a URL")]
    BadEndpoint(String),
    /// The endpoint is on another origin than the configured URL: refused.
    #[error(
        "HTTP+SSE: the endpoint {endpoint} is not on the configured URL's origin ({origin}); refused"
    )]
    OtherOrigin {
        /// The endpoint as resolved.
        endpoint: String,
        /// The configured URL's origin.
        origin: String,
    },
    /// One event grew past the bound.
    #[error("HTTP+SSE: an event from the server is longer than {0} bytes")]
    EventTooLarge(usize),
}

/// The HTTP status of a Streamable HTTP start that failed because its initialize POST was
/// answered 404 or 405 (a server that only speaks HTTP+SSE), else `None`.
pub(crate) fn not_streamable(e: &ClientInitializeError) -> Option<u16> {
    let ClientInitializeError::TransportError { error, .. } = e else {
        return None;
    };
    let Some(StreamableHttpError::<reqwest::Error>::UnexpectedServerResponse(text)) =
        error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    else {
        return None;
    };
    // The SDK's text for a failed POST: "HTTP 404 Not Found: <body>".
    let status = text.strip_prefix("HTTP ")?.get(..3)?;
    match status {
        "404" => Some(404),
        "405" => Some(405),
        _ => None,
    }
}

/// The client side of an HTTP+SSE session.
pub(crate) struct SseTransport {
    /// `None` once closed.
    events: Option<Events>,
    http: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    /// The longest a POST may take.
    timeout: Duration,
    /// The server's name, for log lines.
    server: String,
}

/// Opens the event stream at `url` (a GET with `headers`) and waits for its `endpoint` event;
/// events are bounded to `max` bytes, a POST to `post_timeout`.
pub(crate) async fn open(
    server: &str,
    http: reqwest::Client,
    url: &str,
    headers: HeaderMap,
    max: usize,
    post_timeout: Duration,
) -> Result<SseTransport, SseError> {
    let base = Url::parse(url).map_err(|_| SseError::BadEndpoint(url.to_string()))?;
    let response = http
        .get(base.clone())
        .headers(headers.clone())
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
        .send()
        .await?;
    let status = response.status();
    if !status.is_success() {
        return Err(SseError::Status {
            method: "GET",
            status,
        });
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let is_stream = content_type.as_deref().is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
    });
    if !is_stream {
        return Err(SseError::NotAnEventStream(content_type));
    }
    let mut events = Events::new(
        Box::pin(response.bytes_stream().map(|r| r.map_err(SseError::Http))),
        max,
    );
    let data = loop {
        match events.next().await? {
            Some((kind, data)) if kind == "endpoint" => break data,
            Some(_) => continue,
            None => return Err(SseError::NoEndpoint),
        }
    };
    let endpoint = same_origin(&base, &data)?;
    tracing::debug!(server, %endpoint, "MCP server's HTTP+SSE endpoint.");
    Ok(SseTransport {
        events: Some(events),
        http,
        endpoint,
        headers,
        timeout: post_timeout,
        server: server.to_string(),
    })
}

/// `endpoint` resolved against `base`, when it is on `base`'s origin.
fn same_origin(base: &Url, endpoint: &str) -> Result<Url, SseError> {
    let resolved = base
        .join(endpoint.trim())
        .map_err(|_| SseError::BadEndpoint(endpoint.to_string()))?;
    if resolved.origin() != base.origin() {
        return Err(SseError::OtherOrigin {
            endpoint: resolved.to_string(),
            origin: base.origin().ascii_serialization(),
        });
    }
    Ok(resolved)
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "HTTP+SSE".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .timeout(self.timeout)
            .json(&item);
        async move {
            let status = request.send().await?.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(SseError::Status {
                    method: "POST",
                    status,
                })
            }
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let events = self.events.as_mut()?;
            match events.next().await {
                Ok(Some((kind, data))) if kind == "message" => {
                    match serde_json::from_str(&data) {
                        Ok(message) => return Some(message),
                        // The text is not logged: it may hold what the server was sent.
                        Err(e) => {
                            tracing::warn!(server = %self.server, error = %e, "MCP server sent an event that is not a JSON-RPC message; skipped.")
                        }
                    }
                }
                Ok(Some((kind, _))) => {
                    tracing::debug!(server = %self.server, event = %kind, "MCP server sent an event that is not a message; skipped.")
                }
                Ok(None) => {
                    tracing::info!(server = %self.server, "MCP server closed its HTTP+SSE stream.");
                    self.events = None;
                }
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e, "MCP server's HTTP+SSE stream failed; the session ends.");
                    self.events = None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        // Dropping the response closes the stream, which ends the session on the server.
        self.events = None;
        Ok(())
    }
}

/// Server-sent events read from a byte stream, each at most `max` bytes. Every bit of state
/// is kept here between reads, so a [`Events::next`] dropped while it waits loses nothing (the
/// SDK polls `receive` in a `select!`).
struct Events {
    body: Pin<Box<dyn Stream<Item = Result<Bytes, SseError>> + Send>>,
    /// Bytes read and not yet taken as lines, from `at` on.
    buf: Vec<u8>,
    at: usize,
    /// The event being read: its type, its data, and its size so far.
    kind: Option<String>,
    data: String,
    size: usize,
    max: usize,
    /// Set once the stream ended: a CR at the very end then ends its line.
    ended: bool,
}

impl Events {
    fn new(body: Pin<Box<dyn Stream<Item = Result<Bytes, SseError>> + Send>>, max: usize) -> Self {
        Self {
            body,
            buf: Vec::new(),
            at: 0,
            kind: None,
            data: String::new(),
            size: 0,
            max,
            ended: false,
        }
    }

    /// The next event as (type, data); `None` when the stream ended.
    async fn next(&mut self) -> Result<Option<(String, String)>, SseError> {
        loop {
            if let Some(event) = self.take_event()? {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            // What is left belongs to the event being read.
            if self.size + self.buf.len() - self.at > self.max {
                return Err(SseError::EventTooLarge(self.max));
            }
            self.buf.drain(..self.at);
            self.at = 0;
            match self.body.next().await {
                None => self.ended = true,
                Some(chunk) => self.buf.extend_from_slice(&chunk?),
            }
        }
    }

    /// An event completed by the lines read so far.
    fn take_event(&mut self) -> Result<Option<(String, String)>, SseError> {
        while let Some(line) = self.take_line() {
            if self.size > self.max {
                return Err(SseError::EventTooLarge(self.max));
            }
            if line.is_empty() {
                self.size = 0;
                let kind = self.kind.take();
                let mut data = std::mem::take(&mut self.data);
                if data.is_empty() {
                    continue;
                }
                data.pop();
                return Ok(Some((kind.unwrap_or_else(|| "message".to_string()), data)));
            }
            let line = String::from_utf8_lossy(&line);
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (&*line, ""),
            };
            match field {
                "event" => self.kind = Some(value.to_string()),
                "data" => {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                // Comments (empty field), `id`, `retry` and unknown fields.
                _ => {}
            }
        }
        Ok(None)
    }

    /// One whole line (ended by CR LF, LF or CR), counted into the event's size.
    fn take_line(&mut self) -> Option<Vec<u8>> {
        let rest = &self.buf[self.at..];
        let end = rest.iter().position(|b| *b == b'\n' || *b == b'\r')?;
        let skip = if rest[end] == b'\r' {
            // A CR at the end of what was read may be the first half of CR LF.
            match rest.get(end + 1) {
                None if !self.ended => return None,
                None => 1,
                Some(b'\n') => 2,
                Some(_) => 1,
            }
        } else {
            1
        };
        let line = rest[..end].to_vec();
        self.at += end + skip;
        self.size += end + skip;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn events(chunks: &[&str], max: usize) -> Events {
        let chunks: Vec<Result<Bytes, SseError>> = chunks
            .iter()
            .map(|c| Ok(Bytes::copy_from_slice(c.as_bytes())))
            .collect();
        Events::new(Box::pin(futures::stream::iter(chunks)), max)
    }

    fn pair(kind: &str, data: &str) -> Option<(String, String)> {
        Some((kind.to_string(), data.to_string()))
    }

    #[tokio::test]
    async fn events_are_split_across_chunks_and_line_endings() {
        let mut e = events(
            &[
                ": a comment\r\nevent: endpoint\r",
                "\ndata: /messages/?session_id=1\r\n\r\n",
                "data: {\"a\":\ndata:1}\n\nid: 7\nevent: ping\ndata\n\nevent: x\n\n",
                "data: last\r\r",
            ],
            1024,
        );
        assert_eq!(
            e.next().await.unwrap(),
            pair("endpoint", "/messages/?session_id=1")
        );
        assert_eq!(e.next().await.unwrap(), pair("message", "{\"a\":\n1}"));
        // `data` with no value: an event with empty data; an event with no data is not sent.
        assert_eq!(e.next().await.unwrap(), pair("ping", ""));
        assert_eq!(e.next().await.unwrap(), pair("message", "last"));
        assert_eq!(e.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_event_over_the_bound_ends_the_stream_and_smaller_ones_pass() {
        let mut e = events(&["data: 12345\n\ndata: 12", "3456789\n\n"], 16);
        assert_eq!(e.next().await.unwrap(), pair("message", "12345"));
        assert!(matches!(e.next().await, Err(SseError::EventTooLarge(16))));
        // Many small events in one read are no large event.
        let mut e = events(&["data: 1234\n\n".repeat(10).as_str()], 16);
        for _ in 0..10 {
            assert_eq!(e.next().await.unwrap(), pair("message", "1234"));
        }
        // An endless line trips the bound without a newline.
        let mut e = events(&["data: 1234567890", "1234567890"], 16);
        assert!(matches!(e.next().await, Err(SseError::EventTooLarge(16))));
    }

    #[test]
    fn the_endpoint_must_be_on_the_configured_urls_origin() {
        let base = Url::parse("http://127.0.0.1:8000/sse").unwrap();
        assert_eq!(
            same_origin(&base, "/messages/?session_id=1")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8000/messages/?session_id=1"
        );
        assert!(same_origin(&base, "http://127.0.0.1:8000/m").is_ok());
        for other in [
            "http://127.0.0.1:8001/m",
            "https://127.0.0.1:8000/m",
            "http://localhost:8000/m",
            "http://evil.example/m",
            "//evil.example/m",
        ] {
            assert!(
                matches!(same_origin(&base, other), Err(SseError::OtherOrigin { .. })),
                "{other}"
            );
        }
    }
}
