//! The file tools under `sandbox.workspace` in sandboxed sessions: `read` needs `ro` or `rw`,
//! `write` and `edit` need `rw`, so a model cannot do with a file tool what its sandbox forbids
//! its commands. Outside sandboxed sessions the tools are unchanged (workspace confinement only).

use super::Sandbox;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;
use clawbus_core::config::WorkspaceAccess;
use std::sync::Arc;

/// What a file tool does to the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads files (`read`).
    Read,
    /// Changes files (`write`, `edit`).
    Write,
}

/// A file tool that refuses what `sandbox.workspace` forbids in sandboxed sessions.
#[derive(Clone)]
pub(crate) struct WorkspaceGate {
    inner: Arc<dyn Tool>,
    sandbox: Sandbox,
    access: Access,
}

impl WorkspaceGate {
    /// `tool`, doing `access`, under `sandbox`.
    pub(crate) fn new(tool: impl Tool + 'static, sandbox: Sandbox, access: Access) -> Self {
        Self {
            inner: Arc::new(tool),
            sandbox,
            access,
        }
    }
}

#[async_trait]
impl Tool for WorkspaceGate {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn description(&self) -> &'static str {
        self.inner.description()
    }
    fn parameters(&self) -> serde_json::Value {
        self.inner.parameters()
    }
    fn available(&self) -> Result<(), String> {
        self.inner.available()
    }
    fn idempotent(&self) -> bool {
        self.inner.idempotent()
    }
    fn screen(&self, ctx: &ToolContext, args: &serde_json::Value) -> Option<ToolOutput> {
        self.inner.screen(ctx, args)
    }
    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        if self.sandbox.applies(&ctx.agent, &ctx.session) {
            let setting = self.sandbox.def().workspace.value;
            let allowed = match (setting, self.access) {
                (WorkspaceAccess::Rw, _) | (WorkspaceAccess::Ro, Access::Read) => true,
                (WorkspaceAccess::Ro, Access::Write) | (WorkspaceAccess::None, _) => false,
            };
            if !allowed {
                return ToolError::new(
                    "policy_denied",
                    format!(
                        "{} is not allowed in this session: sandbox.workspace = \"{setting}\"",
                        self.name()
                    ),
                )
                .into();
            }
        }
        self.inner.call(ctx, args).await
    }
}
