//! The CLI's connection to a running gateway: where it is, its token, JSON over HTTP.

use super::{EXIT_UNAVAILABLE, EXIT_USAGE, Global};
use crate::config::DEFAULT_STATE_DIR;
use crate::gateway::token;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A gateway the CLI talks to.
pub(super) struct GatewayClient {
    url: String,
    token: String,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

/// Prints `error: …` and yields the usage exit code.
pub(super) fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

impl GatewayClient {
    /// Finds the gateway (`--url`, else the config's bind and port) and its token
    /// (`CLAWBUS_TOKEN`, else `<state-dir>/gateway.token`). `timeout` bounds every request.
    pub(super) fn connect(global: &Global, timeout: Duration) -> Result<Self, ExitCode> {
        let env_token = std::env::var("CLAWBUS_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty());
        if let Some(url) = &global.url {
            check_url(url)?;
        }
        let (url, state_dir, config_token) = match (&global.url, &global.state_dir, &env_token) {
            (Some(url), Some(dir), _) => (url.clone(), dir.clone(), None),
            (Some(url), None, Some(_)) => (url.clone(), PathBuf::from(DEFAULT_STATE_DIR), None),
            _ => {
                let cfg = global.load()?;
                let url = global.url.clone().unwrap_or_else(|| {
                    format!(
                        "http://{}",
                        std::net::SocketAddr::new(cfg.gateway.bind, cfg.gateway.port)
                    )
                });
                // The daemon takes its token from `gateway.token_env` when that variable is set.
                let config_token = cfg
                    .gateway
                    .token_env
                    .as_deref()
                    .and_then(|name| std::env::var(name).ok())
                    .filter(|t| !t.trim().is_empty());
                (url, cfg.state_dir, config_token)
            }
        };
        let token = match env_token.or(config_token) {
            Some(t) => t.trim().to_string(),
            None => token::read(&token::token_path(&state_dir)).map_err(|e| {
                usage(format!(
                    "no token: CLAWBUS_TOKEN is unset and {} cannot be read ({e}); is `clawbus up` running with this --state-dir?",
                    token::token_path(&state_dir).display()
                ))
            })?,
        };
        let http = client_for(&url)
            .timeout(timeout)
            .build()
            .map_err(|e| usage(format!("http client: {e}")))?;
        let rt = super::runtime()?;
        Ok(Self {
            url: url.trim_end_matches('/').to_string(),
            token,
            http,
            rt,
        })
    }

    /// The gateway's base URL (`http://host:port`).
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// The gateway token presented.
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    /// Runs a future to completion on the client's runtime.
    pub(super) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// GETs `path` (under the gateway URL) and decodes the JSON answer.
    pub(super) fn get(&self, path: &str) -> Result<serde_json::Value, ExitCode> {
        self.call(self.http.get(format!("{}{path}", self.url)))
            .map(|(_, v)| v)
    }

    /// POSTs `body` to `path` and decodes the JSON answer.
    pub(super) fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, ExitCode> {
        self.call(self.http.post(format!("{}{path}", self.url)).json(body))
            .map(|(_, v)| v)
    }

    /// DELETEs `path` and decodes the JSON answer.
    pub(super) fn delete(&self, path: &str) -> Result<serde_json::Value, ExitCode> {
        self.call(self.http.delete(format!("{}{path}", self.url)))
            .map(|(_, v)| v)
    }

    /// POSTs `body` to `path`; a `409 Conflict` answer is returned with its status, not an error.
    pub(super) fn post_with_status(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value), ExitCode> {
        self.call(self.http.post(format!("{}{path}", self.url)).json(body))
    }

    /// Reads the server-sent events at `path` until the server ends the stream, handing each
    /// event's data to `on_event`. No overall timeout: a task may run for long.
    pub(super) fn stream(&self, path: &str, on_event: impl FnMut(&str)) -> Result<(), ExitCode> {
        self.stream_opened(path, || {}, on_event)
    }

    /// [`GatewayClient::stream`], calling `on_open` once the gateway has accepted the stream
    /// (its answer's head is in, before any event).
    pub(super) fn stream_opened(
        &self,
        path: &str,
        on_open: impl FnOnce(),
        mut on_event: impl FnMut(&str),
    ) -> Result<(), ExitCode> {
        use futures::StreamExt;
        let url = format!("{}{path}", self.url);
        self.rt.block_on(async move {
            let http = client_for(&url)
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| usage(format!("http client: {e}")))?;
            let resp = http
                .get(&url)
                .bearer_auth(&self.token)
                .send()
                .await
                .map_err(|e| {
                    usage(format!(
                        "cannot reach the gateway at {}: {} (is `clawbus up` running?)",
                        self.url,
                        causes(&e)
                    ))
                })?;
            let status = resp.status();
            if !status.is_success() {
                let text = resp.text().await.unwrap_or_default();
                let message = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                    .unwrap_or(text);
                return Err(usage(format!("gateway answered {status}: {message}")));
            }
            on_open();
            let mut parser = crate::model::sse::SseParser::new();
            let mut body = resp.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk
                    .map_err(|e| usage(format!("the event stream broke off: {}", causes(&e))))?;
                for event in parser.push(&chunk) {
                    on_event(&event.data);
                }
            }
            if let Some(event) = parser.finish() {
                on_event(&event.data);
            }
            Ok(())
        })
    }

    fn call(&self, req: reqwest::RequestBuilder) -> Result<(u16, serde_json::Value), ExitCode> {
        self.rt
            .block_on(send(&self.url, &self.token, req))
            .map_err(|e| {
                if e.status == Some(503) {
                    eprintln!("error: {e} (nothing was accepted; try again)");
                    ExitCode::from(EXIT_UNAVAILABLE)
                } else {
                    usage(e)
                }
            })
    }

    /// The gateway's URL, token and HTTP client, for async callers on the client's runtime
    /// ([`GatewayClient::block_on`]).
    pub(super) fn api(&self) -> GatewayApi {
        GatewayApi {
            url: self.url.clone(),
            token: self.token.clone(),
            http: self.http.clone(),
        }
    }
}

/// The async side of a [`GatewayClient`]: errors come back as text, not printed.
#[derive(Clone)]
pub(super) struct GatewayApi {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl GatewayApi {
    /// GETs `path` and decodes the JSON answer.
    pub(super) async fn get(&self, path: &str) -> Result<serde_json::Value, String> {
        let req = self.http.get(format!("{}{path}", self.url));
        send(&self.url, &self.token, req)
            .await
            .map(|(_, v)| v)
            .map_err(|e| e.to_string())
    }

    /// POSTs `body` to `path`; a `409 Conflict` answer comes back with its status.
    pub(super) async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value), String> {
        let req = self.http.post(format!("{}{path}", self.url)).json(body);
        send(&self.url, &self.token, req)
            .await
            .map_err(|e| e.to_string())
    }

    /// Reads the server-sent events at `path` until the server ends the stream (or `to` is
    /// dropped), sending each event's data to `to`.
    pub(super) async fn stream(
        &self,
        path: &str,
        to: tokio::sync::mpsc::Sender<String>,
    ) -> Result<(), String> {
        use futures::StreamExt;
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("cannot reach the gateway at {}: {}", self.url, causes(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("gateway answered {status} for {path}"));
        }
        let mut parser = crate::model::sse::SseParser::new();
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("the event stream broke off: {}", causes(&e)))?;
            for event in parser.push(&chunk) {
                if to.send(event.data).await.is_err() {
                    return Ok(());
                }
            }
        }
        if let Some(event) = parser.finish() {
            let _unread = to.send(event.data).await;
        }
        Ok(())
    }
}

/// Sends `req` with the token and decodes the JSON answer; any status but success and `409`
/// is an error carrying the gateway's message.
/// Why a call to the gateway got no usable answer: its status when it answered one.
struct Refused {
    status: Option<u16>,
    message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Self {
            status: None,
            message,
        }
    }
}

async fn send(
    url: &str,
    token: &str,
    req: reqwest::RequestBuilder,
) -> Result<(u16, serde_json::Value), Refused> {
    let resp = req.bearer_auth(token).send().await.map_err(|e| {
        format!(
            "cannot reach the gateway at {url}: {} (is `clawbus up` running?)",
            causes(&e)
        )
    })?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("reading the gateway's answer: {e}"))?;
    let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    if !status.is_success() && status != reqwest::StatusCode::CONFLICT {
        let message = json
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .filter(|m| !m.is_empty())
            .unwrap_or(if text.trim().is_empty() {
                "(no details)".to_string()
            } else {
                text
            });
        return Err(Refused {
            status: Some(status.as_u16()),
            message: format!("gateway answered {status}: {message}"),
        });
    }
    json.map(|j| (status.as_u16(), j))
        .ok_or_else(|| format!("unexpected answer from the gateway: {text}").into())
}

/// `--url` must be an http(s) URL with a host.
/// A client builder for `url`: over plain `http://` (the usual loopback gateway) no TLS root is
/// loaded, since no TLS connection is made (loading the machine's roots is most of what a CLI call
/// would cost); over `https://` the platform's roots as usual.
fn client_for(url: &str) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    if url.starts_with("http://") {
        builder.tls_certs_only(std::iter::empty())
    } else {
        builder
    }
}

fn check_url(url: &str) -> Result<(), ExitCode> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        _ => Err(usage(format!(
            "--url {url:?}: not an http(s) URL (expected e.g. http://127.0.0.1:18789)"
        ))),
    }
}

/// An error and its causes, `outer: inner: …` (reqwest's own text leaves out why it failed).
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// One path segment (an id, a session key) percent-encoded, so `/`, `?` or `#` in it stay part
/// of it.
pub(super) fn segment(raw: &str) -> String {
    crate::gateway::mcp::segment(raw)
}
