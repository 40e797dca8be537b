//! The CLI's connection to a running gateway: where it is, its token, JSON over HTTP.

use super::{EXIT_USAGE, Global};
use crate::config::DEFAULT_STATE_DIR;
use crate::gateway::token;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A gateway the CLI talks to.
pub struct GatewayClient {
    url: String,
    token: String,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

/// Prints `error: …` and yields the usage exit code.
pub fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

impl GatewayClient {
    /// Finds the gateway (`--url`, else the config's bind and port) and its token
    /// (`CLAWBUS_TOKEN`, else `<state-dir>/gateway.token`). `timeout` bounds every request.
    pub fn connect(global: &Global, timeout: Duration) -> Result<Self, ExitCode> {
        let env_token = std::env::var("CLAWBUS_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty());
        let (url, state_dir) = match (&global.url, &global.state_dir, &env_token) {
            (Some(url), Some(dir), _) => (url.clone(), dir.clone()),
            (Some(url), None, Some(_)) => (url.clone(), PathBuf::from(DEFAULT_STATE_DIR)),
            _ => {
                let cfg = global.load()?;
                let url = global.url.clone().unwrap_or_else(|| {
                    format!(
                        "http://{}",
                        std::net::SocketAddr::new(cfg.gateway.bind, cfg.gateway.port)
                    )
                });
                (url, cfg.state_dir)
            }
        };
        let token = match env_token {
            Some(t) => t.trim().to_string(),
            None => token::read(&token::token_path(&state_dir)).map_err(|e| {
                usage(format!(
                    "no token: CLAWBUS_TOKEN is unset and {} cannot be read ({e}); is `clawbus up` running with this --state-dir?",
                    token::token_path(&state_dir).display()
                ))
            })?,
        };
        let http = reqwest::Client::builder()
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

    /// GETs `path` (under the gateway URL) and decodes the JSON answer.
    pub fn get(&self, path: &str) -> Result<serde_json::Value, ExitCode> {
        self.call(self.http.get(format!("{}{path}", self.url)))
            .map(|(_, v)| v)
    }

    /// POSTs `body` to `path` and decodes the JSON answer.
    pub fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, ExitCode> {
        self.call(self.http.post(format!("{}{path}", self.url)).json(body))
            .map(|(_, v)| v)
    }

    /// POSTs `body` to `path`; a `409 Conflict` answer is returned with its status, not an error.
    pub fn post_with_status(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value), ExitCode> {
        self.call(self.http.post(format!("{}{path}", self.url)).json(body))
    }

    fn call(&self, req: reqwest::RequestBuilder) -> Result<(u16, serde_json::Value), ExitCode> {
        let url = self.url.clone();
        self.rt.block_on(async move {
            let resp = req.bearer_auth(&self.token).send().await.map_err(|e| {
                usage(format!(
                    "cannot reach the gateway at {url}: {e} (is `clawbus up` running?)"
                ))
            })?;
            let status = resp.status();
            let text = resp
                .text()
                .await
                .map_err(|e| usage(format!("reading the gateway's answer: {e}")))?;
            let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
            if !status.is_success() && status != reqwest::StatusCode::CONFLICT {
                let message = json
                    .as_ref()
                    .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                    .unwrap_or(text);
                return Err(usage(format!("gateway answered {status}: {message}")));
            }
            json.map(|j| (status.as_u16(), j))
                .ok_or_else(|| usage(format!("unexpected answer from the gateway: {text}")))
        })
    }
}
