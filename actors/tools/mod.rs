//! The tools an agent may call, confined to its workspace.
//!
//! - [`Tool`]: one tool (name, description, JSON schema, `call`).
//! - [`ToolSet`]: the ordered set of tools one agent may use; [`ToolSet::invoke`] parses and validates
//!   the model's arguments, runs the tool and caps the output. It never fails: every problem becomes
//!   an error [`ToolOutput`] the model can read and recover from.
//! - [`confine`]: the one function that turns a requested path into a real path inside the workspace.
//! - Built-in tools: [`ReadTool`] (`read`), [`WriteTool`] (`write`).
//!
//! Error outputs are JSON `{"error":{"type":…,"message":…}}`. Types used so far: `unknown_tool`,
//! `invalid_arguments`, `path_refused`, `not_found`, `is_directory`, `not_a_file`, `binary_file`,
//! `not_utf8`, `offset_out_of_range`, `io`, `internal`.

mod confine;
mod read;
mod schema;
mod write;

#[cfg(test)]
mod tests;

pub use confine::{ConfineError, confine};
pub use read::ReadTool;
pub use write::WriteTool;

use async_trait::async_trait;
use futures::FutureExt;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use tracing::debug;

/// Who is calling a tool and where it may touch files.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The agent's workspace folder: absolute, canonical, and existing. File tools never leave it.
    pub workspace: PathBuf,
    /// The calling agent's id, for logs.
    pub agent: String,
    /// The session key of the run, for logs.
    pub session: String,
    /// The channel the run came from (`api`, `cli`, `telegram` …), for per-channel policy.
    pub channel: String,
}

/// What a tool answers: text for the model, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text handed back to the model as the tool result.
    pub text: String,
    /// True when the call failed; `text` is then `{"error":{"type":…,"message":…}}`.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed result the model can act on: `{"error":{"type":kind,"message":message}}`.
    /// The message must be short and hold no secrets; full causes go to the log.
    pub fn error(kind: &str, message: impl fmt::Display) -> Self {
        // Built by hand so the key order stays `type`, `message` whatever serde_json features are on.
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        Self {
            text: format!(
                r#"{{"error":{{"type":{},"message":{}}}}}"#,
                quote(kind),
                quote(&message.to_string())
            ),
            is_error: true,
        }
    }

    /// Cuts `text` to at most `max_bytes` bytes of UTF-8, at a char boundary, and appends
    /// `\n[truncated: N of M bytes shown]`. Text that fits is left alone.
    pub fn truncated(mut self, max_bytes: usize) -> Self {
        let total = self.text.len();
        if total <= max_bytes {
            return self;
        }
        let mut cut = max_bytes;
        while !self.text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.truncate(cut);
        self.text
            .push_str(&format!("\n[truncated: {cut} of {total} bytes shown]"));
        self
    }
}

/// One tool an agent can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`read`).
    fn name(&self) -> &'static str;
    /// What it does, written for the model.
    fn description(&self) -> &'static str;
    /// Its arguments as a JSON schema (an object schema). [`ToolSet::invoke`] validates arguments
    /// against it before `call`, for the subset: `type` (object, string, integer, number, boolean,
    /// array), `properties`, `required`, `additionalProperties: false`, `minimum`, `enum`, `items`.
    fn parameters(&self) -> serde_json::Value;
    /// Runs the tool. Arguments have passed the schema. Must not panic; failures are
    /// [`ToolOutput::error`].
    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput;
}

/// The ordered set of tools one agent may use.
#[derive(Clone, Default)]
pub struct ToolSet {
    /// In the order they are offered to the model; names are unique.
    tools: Vec<Arc<dyn Tool>>,
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolSet {
    /// Every built-in tool: `read`, `write`.
    pub fn builtin() -> Self {
        Self::default().with(ReadTool).with(WriteTool)
    }

    /// Adds `tool` at the end, or replaces the tool of the same name in place.
    pub fn with(mut self, tool: impl Tool + 'static) -> Self {
        let tool: Arc<dyn Tool> = Arc::new(tool);
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(slot) => *slot = tool,
            None => self.tools.push(tool),
        }
        self
    }

    /// The tools whose name `allowed` accepts, in the same order.
    pub fn filtered(&self, allowed: impl Fn(&str) -> bool) -> Self {
        Self {
            tools: self
                .tools
                .iter()
                .filter(|t| allowed(t.name()))
                .cloned()
                .collect(),
        }
    }

    /// `(name, description, parameters schema)` of each tool, for the model request.
    pub fn schemas(&self) -> Vec<(String, String, serde_json::Value)> {
        self.tools
            .iter()
            .map(|t| {
                (
                    t.name().to_string(),
                    t.description().to_string(),
                    t.parameters(),
                )
            })
            .collect()
    }

    /// The tool names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The tool called `name`, if the set has it.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Runs tool `name` with the model's raw argument text and caps the result at `max_chars`
    /// bytes (see [`ToolOutput::truncated`]). Never panics and never fails: an unknown tool,
    /// arguments that are not a JSON object (empty text counts as `{}`) or that fail the schema,
    /// and a tool that panics all come back as error outputs.
    pub async fn invoke(
        &self,
        ctx: &ToolContext,
        name: &str,
        raw_args: &str,
        max_chars: usize,
    ) -> ToolOutput {
        let out = self.run(ctx, name, raw_args).await;
        debug!(
            tool = name,
            agent = %ctx.agent,
            session = %ctx.session,
            is_error = out.is_error,
            bytes = out.text.len(),
            "Tool call finished."
        );
        out.truncated(max_chars)
    }

    async fn run(&self, ctx: &ToolContext, name: &str, raw_args: &str) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            let names = self.names();
            let available = if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            };
            return ToolOutput::error(
                "unknown_tool",
                format!("no tool {name:?}; available: {available}"),
            );
        };
        let args = if raw_args.trim().is_empty() {
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            match serde_json::from_str::<serde_json::Value>(raw_args) {
                Ok(v) => v,
                Err(e) => {
                    return ToolOutput::error(
                        "invalid_arguments",
                        format!("arguments of {name:?} are not valid JSON: {e}"),
                    );
                }
            }
        };
        if !args.is_object() {
            return ToolOutput::error(
                "invalid_arguments",
                format!(
                    "arguments of {name:?} must be a JSON object, got {}",
                    schema::kind(&args)
                ),
            );
        }
        if let Err(problem) = schema::validate(&tool.parameters(), &args) {
            return ToolOutput::error(
                "invalid_arguments",
                format!("arguments of {name:?}: {problem}"),
            );
        }
        match AssertUnwindSafe(tool.call(ctx, args)).catch_unwind().await {
            Ok(out) => out,
            Err(_) => {
                tracing::error!(tool = name, agent = %ctx.agent, "Tool panicked.");
                ToolOutput::error("internal", format!("tool {name:?} failed unexpectedly"))
            }
        }
    }
}

/// Deserialises schema-checked arguments into a tool's typed arguments, or an
/// `invalid_arguments` output.
fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolOutput> {
    serde_json::from_value(args)
        .map_err(|e| ToolOutput::error("invalid_arguments", format!("arguments of {tool:?}: {e}")))
}

/// Runs blocking file work off the async threads; a panic or cancellation becomes an error output.
async fn blocking(
    tool: &'static str,
    work: impl FnOnce() -> ToolOutput + Send + 'static,
) -> ToolOutput {
    match tokio::task::spawn_blocking(work).await {
        Ok(out) => out,
        Err(e) => {
            tracing::error!(tool, error = %e, "Blocking tool work did not finish.");
            ToolOutput::error("internal", format!("tool {tool:?} failed unexpectedly"))
        }
    }
}
