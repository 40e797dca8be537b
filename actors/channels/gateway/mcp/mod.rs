//! MCP server: clawbus agents as MCP tools ([`Bridge`]), on the gateway's `/mcp` (Streamable
//! HTTP, behind the bearer token, request bodies bounded by `[gateway] max_body`) and on stdio
//! (`clawbus mcp serve`). Either way a call becomes a request to the gateway's own task API
//! ([`TaskApi`]): `/mcp` sends it in-process through the same router (same token check,
//! ingress, dedup and coordinator paths as `POST /v1/agents/<id>/tasks`), the stdio server over
//! HTTP to a running gateway.

mod bridge;

pub use bridge::{Bridge, Exposed};

use super::api::ApiState;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, header};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use std::sync::Arc;

/// The gateway's task API as the MCP tools use it. Errors are text for the tool's caller.
#[async_trait::async_trait]
pub trait TaskApi: Clone + Send + Sync + 'static {
    /// GETs `path` and decodes the JSON answer.
    async fn get(&self, path: &str) -> Result<Value, String>;
    /// POSTs `body` to `path`; a `409 Conflict` answer comes back with its status.
    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String>;
    /// Reads the server-sent events at `path` until the stream ends (or `to` is dropped),
    /// sending each event's data to `to`.
    async fn stream(&self, path: &str, to: tokio::sync::mpsc::Sender<String>)
    -> Result<(), String>;
}

/// One path segment (an id, a session key) percent-encoded, so `/`, `?` or `#` in it stay part
/// of it.
pub fn segment(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The gateway's own router, called in-process with its token.
#[derive(Clone)]
struct InProcess {
    app: Router,
    token: Arc<String>,
    /// The largest answer read back (the gateway's body bound).
    max_body: usize,
}

impl InProcess {
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<axum::response::Response, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        let body = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        let req = req.body(body).map_err(|e| e.to_string())?;
        let mut app = self.app.clone();
        match tower_service::Service::call(&mut app, req).await {
            Ok(resp) => Ok(resp),
            Err(never) => match never {},
        }
    }

    async fn json(&self, resp: axum::response::Response) -> Result<(u16, Value), String> {
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), self.max_body)
            .await
            .map_err(|e| format!("reading the gateway's answer: {e}"))?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() && status != axum::http::StatusCode::CONFLICT {
            let message = v["error"]["message"].as_str().unwrap_or("(no details)");
            return Err(format!("gateway answered {status}: {message}"));
        }
        Ok((status.as_u16(), v))
    }
}

#[async_trait::async_trait]
impl TaskApi for InProcess {
    async fn get(&self, path: &str) -> Result<Value, String> {
        let resp = self.send(Method::GET, path, None).await?;
        self.json(resp).await.map(|(_, v)| v)
    }

    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        let resp = self.send(Method::POST, path, Some(body)).await?;
        self.json(resp).await
    }

    async fn stream(
        &self,
        path: &str,
        to: tokio::sync::mpsc::Sender<String>,
    ) -> Result<(), String> {
        let resp = self.send(Method::GET, path, None).await?;
        if !resp.status().is_success() {
            return Err(format!("gateway answered {} for {path}", resp.status()));
        }
        let mut parser = clawbus_runtime::model::sse::SseParser::new();
        let mut body = resp.into_body().into_data_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("the event stream broke off: {e}"))?;
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

/// `/mcp`: the Streamable HTTP MCP server over `app` (the gateway's router without it), behind
/// the bearer token. Hosts: loopback and the configured bind address (DNS rebinding guard).
pub(crate) fn routes(state: &ApiState, app: Router) -> Router<ApiState> {
    let gateway = &state.config.gateway;
    let api = InProcess {
        app,
        token: state.token.clone(),
        max_body: gateway.max_body,
    };
    let agents = Exposed::of(&state.config);
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !gateway.bind.is_unspecified() {
        hosts.push(gateway.bind.to_string());
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(gateway.max_body);
    // Open sessions (and their SSE streams) end when the system shuts down.
    let cancel = config.cancellation_token.clone();
    let mut shutdown = state.shutdown.clone();
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            shutdown.recv().await;
            cancel.cancel();
        });
    }
    let service = StreamableHttpService::new(
        move || Ok(Bridge::new(api.clone(), agents.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new().route_service("/mcp", service)
}
