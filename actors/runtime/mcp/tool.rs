//! [`McpTool`]: one tool of an MCP server in an agent's registry.

use super::server::Server;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;
use clawbus_core::config::mcp_tool_name;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The longest tool name model APIs accept.
const MAX_TOOL_NAME: usize = 64;

/// A tool of an MCP server, offered as `mcp__<server>__<tool>` with the server's schema.
#[derive(Clone)]
pub struct McpTool {
    server: Arc<Server>,
    /// The name the server knows it by.
    tool: String,
    /// `mcp__<server>__<tool>`. Leaked once per distinct text ([`intern`]: the [`Tool`] trait
    /// hands out `'static` names), so listing the same tools again costs nothing.
    pub(super) name: &'static str,
    description: &'static str,
    schema: Value,
    read_only: bool,
}

impl McpTool {
    /// The registry entry of `tool` from `server`; `None` (logged) when its name cannot be a
    /// tool name (too long, or characters model APIs refuse).
    pub(crate) fn new(server: &Arc<Server>, tool: rmcp::model::Tool) -> Option<Self> {
        let name = mcp_tool_name(&server.name, &tool.name);
        let fits = name.len() <= MAX_TOOL_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !fits {
            tracing::warn!(server = %server.name, tool = %tool.name, "MCP tool name is not usable (more than 64 characters, or not a-z A-Z 0-9 _ -); it is not offered.");
            return None;
        }
        let description = format!(
            "{} (from MCP server \"{}\")",
            tool.description.as_deref().unwrap_or(tool.name.as_ref()),
            server.name
        );
        Some(Self {
            server: server.clone(),
            tool: tool.name.to_string(),
            name: intern(name),
            description: intern(description),
            schema: Value::Object((*tool.input_schema).clone()),
            read_only: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        })
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server.name
    }

    /// The tool's name on its server.
    pub fn tool(&self) -> &str {
        &self.tool
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn idempotent(&self) -> bool {
        self.read_only
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let Value::Object(args) = args else {
            return ToolOutput::error("invalid_arguments", "arguments must be a JSON object");
        };
        let source = format!("mcp:{}/{}", self.server.name, self.tool);
        match self.server.call(&self.tool, args).await {
            Ok(result) => {
                let text = render(&result);
                if result.is_error == Some(true) {
                    ToolError::new("mcp_tool_error", crate::untrusted::wrap(&source, &text)).into()
                } else {
                    ToolOutput::ok(crate::untrusted::wrap(&source, &text))
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.server.name, tool = %self.tool, agent = %ctx.agent, error = %self.server.log_text(&e), "MCP tool call failed.");
                let kind = match e {
                    super::McpError::Timeout { .. } => "timeout",
                    _ => "mcp_server_error",
                };
                ToolError::new(kind, e)
                    .suggest("try again later or use another tool; the server is restarted on the next call if it died")
                    .into()
            }
        }
    }
}

/// `text` as a `'static` string, leaked the first time it is seen. Grows only with the distinct
/// names and descriptions servers ever listed.
fn intern(text: String) -> &'static str {
    static SEEN: std::sync::Mutex<BTreeSet<&'static str>> = std::sync::Mutex::new(BTreeSet::new());
    let Ok(mut seen) = SEEN.lock() else {
        return Box::leak(text.into_boxed_str());
    };
    if let Some(s) = seen.get(text.as_str()) {
        return s;
    }
    let s: &'static str = Box::leak(text.into_boxed_str());
    seen.insert(s);
    s
}

/// The result as text: text parts as they are, an image as a note, a resource as its link
/// (and its text when embedded), structured content as JSON when there is nothing else.
fn render(result: &rmcp::model::CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or_default();
        let s = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default();
        match s("type") {
            "text" => parts.push(s("text").to_string()),
            "image" | "audio" => parts.push(format!(
                "[{} omitted: {}, {} bytes of base64]",
                s("type"),
                s("mimeType"),
                s("data").len()
            )),
            "resource" => {
                let r = &v["resource"];
                let uri = r["uri"].as_str().unwrap_or_default();
                match r["text"].as_str() {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!("[resource {uri} (binary, omitted)]")),
                }
            }
            "resource_link" => parts.push(format!("[link {}]", s("uri"))),
            other => parts.push(format!("[{other} content omitted]")),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}
