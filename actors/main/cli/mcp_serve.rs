//! `clawbus mcp serve`: an MCP server on this process's stdio that hands work to the agents of a
//! running gateway, over its HTTP task API (the tools: [`crate::gateway::mcp::Bridge`], the same
//! as the gateway's own `/mcp`).

use super::Global;
use super::client::{GatewayApi, GatewayClient};
use crate::gateway::api::MAX_WAIT;
use crate::gateway::mcp::{Bridge, Exposed, TaskApi};
use rmcp::ServiceExt;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// Runs the server until the client closes stdin; exit 2 when the config or the gateway's
/// token cannot be had.
pub(super) fn run(global: &Global) -> ExitCode {
    let config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let agents = Exposed::of(&config);
    // A waiting `ask_<agent>` may take as long as the gateway waits, plus the answer's way back.
    let client = match GatewayClient::connect(global, MAX_WAIT + Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let bridge = Bridge::new(client.api(), agents);
    let served = client.block_on(async move {
        let service = bridge.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: mcp serve: {e}");
            ExitCode::from(super::EXIT_FAILED)
        }
    }
}

#[async_trait::async_trait]
impl TaskApi for GatewayApi {
    async fn get(&self, path: &str) -> Result<Value, String> {
        GatewayApi::get(self, path).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        GatewayApi::post(self, path, body).await
    }

    async fn stream(
        &self,
        path: &str,
        to: tokio::sync::mpsc::Sender<String>,
    ) -> Result<(), String> {
        GatewayApi::stream(self, path, to).await
    }
}
