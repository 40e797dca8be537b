//! The tools an agent may call, confined to its workspace.
//!
//! - [`Tool`]: one tool (name, description, JSON schema, `call`).
//! - [`ToolSet`]: the ordered set of tools one agent may use; [`ToolSet::invoke`] parses and validates
//!   the model's arguments, runs the tool and caps the output. It never fails: every problem becomes
//!   an error [`ToolOutput`] the model can read and recover from.
//! - [`confine()`]: the one function that turns a requested path into a real path inside the workspace
//!   (it lives in [`crate::workspace`]).
//! - [`Layer`], [`Removed`]: what the policy took away; the policy itself (which tools an agent is
//!   offered: profile → allow/deny → availability → channel) is [`crate::agent::tools`].
//! - `run_context`: the run a tool is called from (task, call chain, lane slot).
//! - The tools of agent cooperation that need only the bus: `agent_call`, `spawn`, `cron`;
//!   the session tools (`sessions_*`) are in `agent::tools` (they read the sessions).
//! - [`MemorySearchTool`] / [`MemoryGetTool`]: the memory tools over [`crate::memory`].
//! - Built-in tools: [`ReadTool`] (`read`), [`WriteTool`] (`write`), [`EditTool`] (`edit`),
//!   [`ExecTool`] (`exec`, see `exec`), [`MessageTool`] (`message`), the web tools ([`web`]) and
//!   [`BrowserTool`] (`browser`, a headless Chromium, see [`browser`]).
//!
//! Error outputs are JSON `{"error":{"type":…,"message":…,"retry_after_ms"?:…,"suggestion"?:…}}`
//! ([`ToolError`]). Types used so far: `unknown_tool`, `policy_denied`, `unavailable`,
//! `invalid_arguments`, `path_refused`, `not_found`, `is_directory`, `not_a_file`, `binary_file`,
//! `not_utf8`, `offset_out_of_range`, `no_match`, `ambiguous_match`, `command_refused`,
//! `approval_denied`, `approval_timeout`, `timeout`, `limit_exceeded` (with `limit`),
//! `sandbox_unavailable`, `io`, `internal`.

pub(crate) mod agent_call;
pub mod browser;
pub(crate) mod cron;
mod edit;
pub(crate) mod exec;
pub(crate) mod flow_run;
mod layer;
mod memory;
mod message;
mod output;
mod peers;
mod read;
pub(crate) mod run_context;
pub mod sandbox;
mod schema;
pub(crate) mod spawn;
pub mod web;
mod write;

#[cfg(test)]
pub(crate) mod tests;

pub use crate::workspace::{ConfineError, confine};
pub use browser::{BrowserTool, Browsers};
pub use edit::EditTool;
pub use exec::ExecTool;
pub use layer::{Layer, Removed};
pub use memory::{MemoryGetTool, MemorySearchTool};
pub use message::MessageTool;
pub use output::{SPILL_DIR, ToolError, ToolOutput};
pub use read::ReadTool;
pub use web::{WebFetchTool, WebSearchTool};
pub use write::WriteTool;

use async_trait::async_trait;
use clawbus_core::ids::{AgentId, Channel, SessionKey};
use futures::FutureExt;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use tracing::debug;

/// Why a tool that reaches other agents or sessions (`agent_call`, `sessions_send`,
/// `sessions_spawn`) is not offered where no daemon runs (`clawbus tools`, `clawbus prompt`).
pub(crate) const OFFLINE: &str = "offered when the daemon runs (`clawbus up`): it reaches other agents or sessions through the running daemon, which this offline listing does not start";

/// Who is calling a tool and where it may touch files.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The agent's workspace folder: absolute, canonical, and existing. File tools never leave it.
    pub workspace: PathBuf,
    /// The calling agent's id.
    pub agent: AgentId,
    /// The session key of the run.
    pub session: SessionKey,
    /// The channel the run came from (`api`, `cli`, `telegram` …), for per-channel policy.
    pub channel: Channel,
    /// The run calling the tool: its task, call chain and lane slot; `None` outside a run
    /// (tests, tools invoked directly).
    pub run: Option<std::sync::Arc<run_context::RunContext>>,
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
    /// Whether the tool can work here: `Err(why)` when its backend is not configured (no search
    /// provider, exec denied), so the policy leaves it out. Cheap and side-effect free.
    fn available(&self) -> Result<(), String> {
        Ok(())
    }
    /// Whether running the same call twice has the effect of running it once (it only reads).
    /// A call interrupted by a crash is run again on resume only when its tool is idempotent;
    /// otherwise the model is told that its effects are unknown.
    fn idempotent(&self) -> bool {
        false
    }
    /// A refusal decided on the arguments before the schema checks them (whom a call may
    /// reach): `Some(error)` refuses the call. Cheap and side-effect free.
    fn screen(&self, ctx: &ToolContext, args: &serde_json::Value) -> Option<ToolOutput> {
        let _ = (ctx, args);
        None
    }
}

/// Where tools that change while the daemon runs come from (MCP servers start lazily, restart,
/// and change their lists): [`ToolSet::current`] asks it before each run.
#[async_trait]
pub trait LiveTools: Send + Sync {
    /// Brings the sources up (a lazy server's first use) and returns the set as it stands now,
    /// built again when a source changed; `None` keeps the set as it is.
    async fn current(&self) -> Option<ToolSet>;
}

/// A tool set's schemas as a model request offers them, with the characters a token estimate
/// counts of them.
#[derive(Debug)]
struct OfferedSchemas {
    schemas: Arc<[crate::model::ToolSchema]>,
    chars: usize,
}

/// The ordered set of tools one agent may use, and what the policy removed.
#[derive(Clone, Default)]
pub struct ToolSet {
    /// In the order they are offered to the model; names are unique.
    tools: Vec<Arc<dyn Tool>>,
    /// Tools the policy removed: a call to one is refused as `policy_denied`.
    removed: Vec<Removed>,
    /// `[channels.<name>] deny_tools`, applied per run by [`ToolSet::for_channel`] and
    /// [`ToolSet::invoke`].
    channels: Arc<BTreeMap<String, Vec<String>>>,
    /// Secret values redacted from every output by [`ToolSet::invoke`] (see [`crate::secrets`]).
    secrets: Arc<crate::secrets::Secrets>,
    /// Where the set is built again from when its tools changed; `None`: it never changes.
    live: Option<Arc<dyn LiveTools>>,
    /// [`ToolSet::model_schemas`] and [`ToolSet::schema_chars`], built on first use and shared
    /// by the clones of this set; adding or removing a tool starts a new one.
    model_schemas: Arc<std::sync::OnceLock<OfferedSchemas>>,
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolSet {
    /// Every built-in tool with default settings: `read`, `write`, `edit`, `exec` (allowlist
    /// mode, nothing allowed), `memory_search`, `memory_get`, `message` (no bus: it refuses).
    /// Agents get theirs from [`crate::agent::tools::agent_tools`].
    pub(crate) fn builtin() -> Self {
        Self::default()
            .with(ReadTool)
            .with(WriteTool)
            .with(EditTool)
            .with(ExecTool::new("", Default::default(), None))
            .with(MemorySearchTool::default())
            .with(MemoryGetTool)
            .with(MessageTool::new(None))
    }

    /// Adds `tool` at the end, or replaces the tool of the same name in place.
    pub fn with(mut self, tool: impl Tool + 'static) -> Self {
        self.insert(Arc::new(tool));
        self
    }

    pub(crate) fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.model_schemas = Arc::default();
        self.removed.retain(|r| r.tool != tool.name());
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(slot) => *slot = tool,
            None => self.tools.push(tool),
        }
    }

    #[cfg(test)]
    /// The tools whose name `allowed` accepts, in the same order.
    pub(crate) fn filtered(&self, allowed: impl Fn(&str) -> bool) -> Self {
        Self {
            tools: self
                .tools
                .iter()
                .filter(|t| allowed(t.name()))
                .cloned()
                .collect(),
            removed: self.removed.clone(),
            channels: self.channels.clone(),
            secrets: self.secrets.clone(),
            live: self.live.clone(),
            model_schemas: Arc::default(),
        }
    }

    /// Sets the secret values [`ToolSet::invoke`] redacts from every output.
    pub fn with_secrets(mut self, secrets: Arc<crate::secrets::Secrets>) -> Self {
        self.secrets = secrets;
        self
    }

    /// Has [`ToolSet::current`] ask `live` for the set as it stands.
    pub fn with_live(mut self, live: Arc<dyn LiveTools>) -> Self {
        self.live = Some(live);
        self
    }

    /// The set as it stands now: built again by its [`LiveTools`] when its tools changed (an MCP
    /// server started, restarted or changed its list), else this set.
    pub async fn current(&self) -> Self {
        let fresh = match &self.live {
            Some(live) => live.current().await,
            None => None,
        };
        match fresh {
            Some(mut set) => {
                set.live = self.live.clone();
                set
            }
            None => self.clone(),
        }
    }

    /// Takes tool `name` out of the set, recording which layer removed it and why; a later call
    /// to it is refused as `policy_denied`. A name removed twice keeps its first reason.
    pub fn remove(&mut self, name: &str, layer: Layer, reason: impl Into<String>) {
        let before = self.tools.len();
        self.tools.retain(|t| t.name() != name);
        if self.tools.len() != before {
            self.model_schemas = Arc::default();
        }
        if !self.removed.iter().any(|r| r.tool == name) {
            self.removed.push(Removed {
                tool: name.to_string(),
                layer,
                reason: reason.into(),
            });
        }
    }

    /// Sets the per-channel deny lists (tool names or groups, by channel name).
    pub(crate) fn with_channel_policy(mut self, channels: BTreeMap<String, Vec<String>>) -> Self {
        self.channels = Arc::new(channels);
        self
    }

    /// The set offered to a run from `channel`: the channel's `deny_tools` removed.
    pub fn for_channel(&self, channel: &str) -> Self {
        let mut set = self.clone();
        for name in self.names() {
            if let Some(reason) = self.channel_denies(channel, name) {
                set.remove(name, Layer::Channel, reason);
            }
        }
        set
    }

    fn channel_denies(&self, channel: &str, tool: &str) -> Option<String> {
        let entries = self.channels.get(channel)?;
        clawbus_core::config::entry_for(entries, tool)
            .map(|e| format!("[channels.{channel}] deny_tools has {e:?}"))
    }

    /// What the policy removed, in the order it was removed.
    pub fn removed(&self) -> &[Removed] {
        &self.removed
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

    /// The schemas of [`ToolSet::schemas`] as a model request offers them: built once per set
    /// (a tool's schema is fixed), shared by every request and every clone of the set.
    pub fn model_schemas(&self) -> Arc<[crate::model::ToolSchema]> {
        self.offered().schemas.clone()
    }

    /// The characters of [`ToolSet::model_schemas`] a token estimate counts
    /// ([`crate::model::schema_chars`]): counted once per set, like the schemas.
    pub(crate) fn schema_chars(&self) -> usize {
        self.offered().chars
    }

    fn offered(&self) -> &OfferedSchemas {
        self.model_schemas.get_or_init(|| {
            let schemas: Arc<[crate::model::ToolSchema]> = self
                .schemas()
                .into_iter()
                .map(|(name, description, parameters)| crate::model::ToolSchema {
                    name,
                    description,
                    parameters,
                })
                .collect();
            let chars = crate::model::schema_chars(&schemas);
            OfferedSchemas { schemas, chars }
        })
    }

    /// The tool names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The tool called `name`, if the set has it.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Whether tool `name` may be run again after an interruption (see [`Tool::idempotent`]).
    /// Unknown tools are not.
    pub(crate) fn is_idempotent(&self, name: &str) -> bool {
        self.get(name).is_some_and(|t| t.idempotent())
    }

    /// Runs tool `name` with the model's raw argument text and caps the result at `max_chars`
    /// bytes, saving the whole result under the workspace when it is longer (see
    /// [`ToolOutput::capped`]). Never panics and never fails: a tool the policy removed (also
    /// for `ctx.channel`), an unknown tool, arguments that are not a JSON object (empty text
    /// counts as `{}`) or that fail the schema, and a tool that panics all come back as error
    /// outputs.
    pub async fn invoke(
        &self,
        ctx: &ToolContext,
        name: &str,
        raw_args: &str,
        max_chars: usize,
    ) -> ToolOutput {
        let mut out = self.run(ctx, name, raw_args).await;
        // Before the cap, so neither the model's part nor the saved full output holds a secret.
        if let std::borrow::Cow::Owned(clean) = self.secrets.redact(&out.text) {
            tracing::info!(tool = name, agent = %ctx.agent, "Secret values redacted from a tool output.");
            out.text = clean;
        }
        debug!(
            tool = name,
            agent = %ctx.agent,
            session = %ctx.session,
            is_error = out.is_error,
            bytes = out.text.len(),
            "Tool call finished."
        );
        if out.is_error || out.text.len() <= max_chars {
            return out;
        }
        let workspace = ctx.workspace.clone();
        blocking(name_static(self, name), move || {
            out.capped(max_chars, &workspace)
        })
        .await
    }

    async fn run(&self, ctx: &ToolContext, name: &str, raw_args: &str) -> ToolOutput {
        if let Some(denied) = self.denied(ctx, name) {
            tracing::info!(tool = name, agent = %ctx.agent, channel = %ctx.channel, layer = %denied.layer, reason = %denied.reason, "Tool call refused by policy.");
            return ToolError::new(
                "policy_denied",
                format!(
                    "tool {name:?} is not available here: removed by the {} layer ({})",
                    denied.layer, denied.reason
                ),
            )
            .suggest(format!("use one of: {}", self.available_names(ctx)))
            .into();
        }
        let Some(tool) = self.get(name) else {
            return ToolOutput::error(
                "unknown_tool",
                format!("no tool {name:?}; available: {}", self.available_names(ctx)),
            );
        };
        if let Err(why) = tool.available() {
            return ToolOutput::error("unavailable", format!("tool {name:?}: {why}"));
        }
        let args = if raw_args.trim().is_empty() {
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            match serde_json::from_str::<serde_json::Value>(raw_args) {
                Ok(v) => v,
                Err(e) => {
                    return invalid(
                        tool.as_ref(),
                        format!("arguments of {name:?} are not valid JSON: {e}"),
                    );
                }
            }
        };
        if !args.is_object() {
            let got = schema::kind(&args);
            return invalid(
                tool.as_ref(),
                format!("arguments of {name:?} must be a JSON object, got {got}"),
            );
        }
        if let Some(refused) = tool.screen(ctx, &args) {
            return refused;
        }
        if let Err(problem) = schema::validate(&tool.parameters(), &args) {
            return invalid(tool.as_ref(), format!("arguments of {name:?}: {problem}"));
        }
        match AssertUnwindSafe(tool.call(ctx, args)).catch_unwind().await {
            Ok(out) => out,
            Err(_) => {
                tracing::error!(tool = name, agent = %ctx.agent, "Tool panicked.");
                ToolOutput::error("internal", format!("tool {name:?} failed unexpectedly"))
            }
        }
    }

    /// Why a call to `name` is refused by policy, if it is.
    fn denied(&self, ctx: &ToolContext, name: &str) -> Option<Removed> {
        if let Some(r) = self.removed.iter().find(|r| r.tool == name) {
            return Some(r.clone());
        }
        self.get(name)?;
        self.channel_denies(ctx.channel.as_str(), name)
            .map(|reason| Removed {
                tool: name.to_string(),
                layer: Layer::Channel,
                reason,
            })
    }

    fn available_names(&self, ctx: &ToolContext) -> String {
        let names: Vec<&str> = self
            .names()
            .into_iter()
            .filter(|n| self.channel_denies(ctx.channel.as_str(), n).is_none())
            .collect();
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// The `'static` name of tool `name` for log fields, or `"tool"`.
fn name_static(set: &ToolSet, name: &str) -> &'static str {
    set.get(name).map_or("tool", |t| t.name())
}

/// An `invalid_arguments` error that tells the model which fields the tool takes.
fn invalid(tool: &dyn Tool, message: String) -> ToolOutput {
    let params = tool.parameters();
    let fields = |required: bool| -> Vec<String> {
        let req: Vec<&str> = params["required"]
            .as_array()
            .map(|r| r.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        params["properties"]
            .as_object()
            .map(|p| {
                p.keys()
                    .filter(|k| req.contains(&k.as_str()) == required)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let (required, optional) = (fields(true), fields(false));
    let mut suggestion = format!(
        "call {:?} again with a JSON object; required: {}",
        tool.name(),
        if required.is_empty() {
            "(none)".to_string()
        } else {
            required.join(", ")
        }
    );
    if !optional.is_empty() {
        suggestion.push_str(&format!("; optional: {}", optional.join(", ")));
    }
    ToolError::new("invalid_arguments", message)
        .suggest(suggestion)
        .into()
}

/// Deserialises schema-checked arguments into a tool's typed arguments, or an
/// `invalid_arguments` output.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolOutput> {
    serde_json::from_value(args)
        .map_err(|e| ToolOutput::error("invalid_arguments", format!("arguments of {tool:?}: {e}")))
}

/// Runs blocking file work off the async threads; a panic or cancellation becomes an error output.
pub(crate) async fn blocking(
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
