//! The `sessions_spawn` tool: start a subagent — a child run in a session of its own on the
//! `subagent` lane — and return at once; its outcome is announced into the parent's session.

use super::peers::Peers;
use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::ingress::{Duplicates, Ingress, IngressError, Request, Target};
use crate::origin::Origin;
use async_trait::async_trait;
use bus::{Bus, BusError, RequestId};
use clawbus_core::ids::AgentId;
use clawbus_core::ids::SessionKey;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// How deep subagents may nest (a subagent of a subagent is depth 2).
pub(crate) const MAX_DEPTH: u32 = 2;
/// Subagents one run may spawn.
pub(crate) const MAX_CHILDREN: u32 = 5;
/// How long a subagent may take when the model names no `timeout_s`.
const DEFAULT_TIMEOUT_S: u64 = 600;
/// The longest a subagent may take.
const MAX_TIMEOUT_S: u64 = 3600;

/// `sessions_spawn {task, label?, agent?, timeout_s?}`.
///
/// The child runs on the calling agent itself unless `agent` names one its file's `may_call`
/// lists.
///
/// The child runs in `agent:<agent>:subagent:<parent task>-<n>` on the `subagent` lane, with this run as
/// its parent and a deadline never later than the parent's. When it ends — with an answer, an
/// error, a timeout or a cancel, also after the process stopped and ran it again — its outcome
/// is delivered to the parent's session as a message, which wakes the parent.
#[derive(Clone, Debug)]
pub(crate) struct SpawnTool {
    peers: Peers,
}

impl SpawnTool {
    /// Agent `me`'s tool spawning on `bus` children of itself or of the agents of `may_call`
    /// among `agents`.
    pub(crate) fn new(
        bus: Option<Arc<dyn Bus>>,
        me: AgentId,
        agents: Vec<AgentId>,
        may_call: Vec<AgentId>,
    ) -> Self {
        Self {
            peers: Peers::new(bus, me, agents, may_call),
        }
    }

    /// Itself and the agents it may call, for the schema.
    fn agents(&self) -> Vec<&str> {
        let mut names = vec![self.peers.me().as_str()];
        names.extend(self.peers.callees());
        names
    }
}

#[derive(Deserialize)]
struct Args {
    task: String,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    timeout_s: Option<u64>,
}

#[async_trait]
impl Tool for SpawnTool {
    fn name(&self) -> &'static str {
        "sessions_spawn"
    }

    fn description(&self) -> &'static str {
        "Start a subagent on a task and go on without waiting: it works in a session of its own, \
         and its result arrives in this conversation as a message when it is done. Give it a \
         self-contained task. At most 5 per turn; subagents may spawn their own only one level \
         deeper."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "task": { "type": "string", "description": "What the subagent should do, self-contained." },
                "label": { "type": "string", "description": "A short name for it, shown with its result." },
                "agent": {
                    "type": "string",
                    "enum": self.agents(),
                    "description": "Which agent runs it (default: yourself)."
                },
                "timeout_s": { "type": "integer", "minimum": 1, "description": "Seconds it may take (default 600, at most 3600)." }
            },
            "required": ["task"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        self.peers.available()
    }

    fn screen(&self, _ctx: &ToolContext, args: &serde_json::Value) -> Option<ToolOutput> {
        self.peers.reach(args.get("agent")?.as_str()?).err()
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("sessions_spawn", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let (Some(bus), Some(run)) = (&self.peers.bus, &ctx.run) else {
            return ToolOutput::error(
                "unavailable",
                "sessions_spawn works only inside an agent's run on the bus",
            );
        };
        if args.task.trim().is_empty() {
            return ToolOutput::error("invalid_arguments", "\"task\" is empty");
        }
        let agent = match args.agent.as_deref() {
            None => self.peers.me(),
            Some(name) => match self.peers.reach(name) {
                Ok(agent) => agent,
                Err(out) => return out,
            },
        };
        if run.depth >= MAX_DEPTH {
            return ToolOutput::error(
                "depth_limit",
                format!(
                    "this run is a subagent {} levels deep; subagents nest at most {MAX_DEPTH} deep: do the work yourself",
                    run.depth
                ),
            );
        }
        let n = run.spawned.fetch_add(1, Ordering::SeqCst);
        if n >= MAX_CHILDREN {
            return ToolOutput::error(
                "fanout_limit",
                format!(
                    "a run may start at most {MAX_CHILDREN} subagents; this one has started {n}"
                ),
            );
        }
        // The same spawn of the same task (a turn resumed after a stop) is the same request.
        let request_id = match RequestId::parse(&format!("spawn-{}-{n}", run.task_id)) {
            Ok(id) => id,
            Err(e) => return ToolOutput::error("internal", e),
        };
        // Stable across a resume of the parent's turn, unique per spawn.
        let child = format!("{}-{n}", run.task_id.simple());
        let session = match SessionKey::parse(&format!("agent:{agent}:subagent:{child}")) {
            Ok(key) => key,
            Err(e) => return ToolOutput::error("internal", e),
        };
        let timeout_ms = args
            .timeout_s
            .unwrap_or(DEFAULT_TIMEOUT_S)
            .clamp(1, MAX_TIMEOUT_S)
            * 1000;
        let now = run.clock.now_ms();
        let deadline = run
            .deadline_ms
            .map_or(now + timeout_ms, |d| d.min(now + timeout_ms));
        let label = args.label.clone().unwrap_or_else(|| "subagent".into());
        let origin = Origin {
            channel: clawbus_core::ids::Channel::Subagent,
            chat_type: "spawn".into(),
            peer: label.clone(),
            session_key: Some(session.clone()),
            lane: clawbus_core::config::SUBAGENT_LANE.into(),
            parent_task: Some(run.task_id),
            notify_session: Some(run.session.clone()),
            depth: run.depth + 1,
            ..Origin::api()
        };
        let req = Request {
            deadline_ms: Some(deadline),
            duplicates: Duplicates::SameWork,
            ..Request::new(
                Target::Agent(agent.clone()),
                request_id.clone(),
                args.task,
                format!("agent:{}", ctx.agent),
                origin,
            )
        };
        match Ingress::new(bus.clone()).submit(req).await {
            Ok(admission) => {
                tracing::info!(agent = %ctx.agent, child = %admission.task.task_id, session = %session, label, "Subagent spawned.");
                announce_child(bus.as_ref(), run.task_id, &admission.task, "subagent").await;
                ToolOutput::ok(
                    json!({
                        "child_task_id": admission.task.task_id,
                        "session": session,
                        "label": label,
                        "status": "started",
                        "note": "its result will arrive in this conversation as a message"
                    })
                    .to_string(),
                )
            }
            Err(IngressError::Bus(e @ BusError::Conflict { .. })) => {
                ToolOutput::error("request_id_conflict", e)
            }
            Err(e) => ToolOutput::error("unavailable", format!("the bus refused the spawn: {e}")),
        }
    }
}

/// Puts a child on its parent's events (a `progress` note `{child: {task_id, request_id, topic,
/// kind}}`), so the parent's stream shows the work it started.
pub(super) async fn announce_child(
    bus: &dyn Bus,
    parent: uuid::Uuid,
    child: &bus::TaskRecord,
    kind: &str,
) {
    let note = json!({
        "child": {
            "task_id": child.task_id,
            "request_id": child.request_id,
            "topic": child.envelope.topic,
            "kind": kind,
        }
    });
    if let Err(e) = bus
        .emit(parent, bus::events::TaskEventKind::Progress { note })
        .await
    {
        tracing::debug!(parent = %parent, error = %e, "Child not announced on the parent's events.");
    }
}
