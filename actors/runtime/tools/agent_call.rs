//! The `agent_call` tool: post a task to another agent over the bus, and wait for its answer or
//! have it delivered to this session later.

use super::peers::Peers;
use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::coordinator::{self, WaitEdge, WaitError};
use crate::ingress::{Duplicates, Ingress, IngressError, Request, Target, Waited};
use crate::origin::Origin;
use async_trait::async_trait;
use bus::{Bus, BusError, Outcome, RequestId, TaskRecord};
use clawbus_core::ids::AgentId;
use clawbus_core::ids::SessionKey;
use clawbus_core::task::TaskResult;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How long a waiting call waits when the model names no `timeout_s`.
const DEFAULT_TIMEOUT_S: u64 = 300;
/// The longest a waiting call may wait.
const MAX_TIMEOUT_S: u64 = 3600;

/// `agent_call {agent, task, wait?, timeout_s?, request_id?}`.
///
/// The task goes to `agent.<agent>` in a session of its own
/// (`agent:<agent>:agent:<caller>:<request_id>`) on the `subagent` lane, with this run as its
/// parent and the chain of
/// waiting agents on its envelope. A waiting call gives its lane slot up while it waits, so it
/// never starves the lane, and fails at once when its wait would close a cycle: the call chain
/// refuses one inside this tree before posting, the task coordinator's wait-for graph any other
/// (see [`crate::coordinator::graph`]). A call that does not wait returns the task id; the answer is
/// delivered to this session as a message when the task ends.
///
/// It reaches only the agents its file's `may_call` lists (never itself); the schema offers just
/// those. A call is idempotent by its request id, so a turn resumed after a crash runs an
/// interrupted call again: it joins the task it had posted and waits for (or reads) its answer.
#[derive(Clone, Debug)]
pub(crate) struct AgentCallTool {
    peers: Peers,
}

impl AgentCallTool {
    /// Agent `me`'s tool posting on `bus` to the agents of `may_call` among `agents`.
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

    /// The refusal of a call to `name`: itself, or an agent `may_call` does not list.
    fn refuse(&self, name: &str) -> Option<ToolOutput> {
        if name == self.peers.me().as_str() {
            return Some(
                super::ToolError::new(
                    "invalid_arguments",
                    format!("agent_call cannot call agent \"{name}\": that is you"),
                )
                .suggest("do the work yourself, or start a subagent with sessions_spawn")
                .into(),
            );
        }
        self.peers.reach(name).err()
    }
}

#[derive(Deserialize)]
struct Args {
    agent: String,
    task: String,
    #[serde(default = "yes")]
    wait: bool,
    #[serde(default)]
    timeout_s: Option<u64>,
    #[serde(default)]
    request_id: Option<String>,
}

fn yes() -> bool {
    true
}

/// A stable request id for a call the model gave none: the same call in the same task (a turn
/// resumed after a stop) is the same request, answered once.
fn derived_request_id(parent: uuid::Uuid, agent: &str, task: &str) -> String {
    format!(
        "call-{parent}-{}",
        bus::store::fingerprint(&json!([agent, task]))
    )
}

/// The answer of an ended task as the tool's output.
fn answer(agent: &str, record: &TaskRecord) -> ToolOutput {
    match &record.outcome {
        Some(Outcome::Succeeded { result }) => {
            ToolOutput::ok(TaskResult::text_of(result).unwrap_or_default().to_string())
        }
        Some(other) => ToolOutput::error(
            "call_failed",
            format!(
                "agent \"{agent}\" ended task {} {}: {}",
                record.task_id,
                other.state().as_str(),
                record.error().unwrap_or_default()
            ),
        ),
        None => ToolOutput::error(
            "call_failed",
            format!("task {} has no outcome yet", record.task_id),
        ),
    }
}

#[async_trait]
impl Tool for AgentCallTool {
    fn name(&self) -> &'static str {
        "agent_call"
    }

    fn description(&self) -> &'static str {
        "Ask another agent to do a task and get its answer. With wait (the default) this call \
         returns the other agent's final answer; without it, it returns at once and the answer \
         arrives later in this conversation as a message. Calls that would wait in a circle \
         (an agent that is waiting on you) are refused."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "enum": self.peers.callees(),
                    "description": "The agent to ask."
                },
                "task": { "type": "string", "description": "What it should do, self-contained." },
                "wait": { "type": "boolean", "description": "Wait for the answer (default true)." },
                "timeout_s": { "type": "integer", "minimum": 1, "description": "Seconds to wait at most (default 300, at most 3600)." },
                "request_id": { "type": "string", "description": "An idempotency key: the same key is answered once." }
            },
            "required": ["agent", "task"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        if self.peers.callees().is_empty() {
            return Err("may_call in the agent's file names no agent".into());
        }
        self.peers.available()
    }

    /// The same call with the same request id joins the task it posted before.
    fn idempotent(&self) -> bool {
        true
    }

    fn screen(&self, _ctx: &ToolContext, args: &serde_json::Value) -> Option<ToolOutput> {
        self.refuse(args.get("agent")?.as_str()?)
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("agent_call", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let (Some(bus), Some(run)) = (&self.peers.bus, &ctx.run) else {
            return ToolOutput::error(
                "unavailable",
                "agent_call works only inside an agent's run on the bus",
            );
        };
        if let Some(refused) = self.refuse(&args.agent) {
            return refused;
        }
        let callee = match self.peers.reach(&args.agent) {
            Ok(callee) => callee,
            Err(out) => return out,
        };
        if args.task.trim().is_empty() {
            return ToolOutput::error("invalid_arguments", "\"task\" is empty");
        }
        // The fast path: a cycle inside this tree is refused before anything is posted.
        if args.wait && run.call_chain.iter().any(|a| *a == *args.agent) {
            let start = run
                .call_chain
                .iter()
                .position(|a| *a == *args.agent)
                .unwrap_or(0);
            let mut cycle: Vec<&str> = run.call_chain[start..]
                .iter()
                .map(AgentId::as_str)
                .collect();
            cycle.push(&args.agent);
            return ToolOutput::error(
                "deadlock",
                format!(
                    "waiting on agent \"{}\" would close the cycle {}: it is already waiting on this call's chain",
                    args.agent,
                    cycle.join(" → ")
                ),
            );
        }
        let request_id = match args.request_id.as_deref() {
            Some(given) => RequestId::parse(given),
            None => RequestId::parse(&derived_request_id(run.task_id, &args.agent, &args.task)),
        };
        let request_id = match request_id {
            Ok(id) => id,
            Err(e) => return ToolOutput::error("invalid_arguments", e),
        };
        let timeout = Duration::from_secs(
            args.timeout_s
                .unwrap_or(DEFAULT_TIMEOUT_S)
                .clamp(1, MAX_TIMEOUT_S),
        );
        let now = run.clock.now_ms();
        // A child's deadline is never later than its parent's.
        let deadline = run
            .deadline_ms
            .map_or(now + timeout.as_millis() as u64, |d| {
                d.min(now + timeout.as_millis() as u64)
            });
        let session = SessionKey::peer(callee, "agent", ctx.agent.as_str(), request_id.as_str());
        let origin = Origin {
            channel: clawbus_core::ids::Channel::Agent,
            chat_type: ctx.agent.to_string(),
            peer: request_id.to_string(),
            session_key: Some(session),
            parent_task: Some(run.task_id),
            call_chain: if args.wait {
                run.call_chain.clone()
            } else {
                Vec::new()
            },
            notify_session: (!args.wait).then(|| run.session.clone()),
            // Work spawned by another run: the subagent lane, so a lane full of waiting callers
            // can never hold up their callees.
            lane: clawbus_core::config::SUBAGENT_LANE.into(),
            ..Origin::api()
        };
        let req = Request {
            deadline_ms: Some(deadline),
            duplicates: Duplicates::SameWork,
            ..Request::new(
                Target::Agent(callee.clone()),
                request_id.clone(),
                args.task.clone(),
                format!("agent:{}", ctx.agent),
                origin,
            )
        };
        let ingress = Ingress::new(bus.clone());
        let admission = match ingress.submit(req).await {
            Ok(a) => a,
            Err(IngressError::Bus(e @ BusError::Conflict { .. })) => {
                return ToolOutput::error("request_id_conflict", e);
            }
            Err(e) => {
                return ToolOutput::error("unavailable", format!("the bus refused the call: {e}"));
            }
        };
        tracing::info!(agent = %ctx.agent, callee = %args.agent, task_id = %admission.task.task_id, wait = args.wait, duplicate = admission.duplicate, "Agent call posted.");
        super::spawn::announce_child(bus.as_ref(), run.task_id, &admission.task, "call").await;
        if !args.wait {
            return ToolOutput::ok(
                json!({
                    "task_id": admission.task.task_id,
                    "request_id": request_id,
                    "status": "accepted",
                    "note": "the answer will arrive in this conversation as a message"
                })
                .to_string(),
            );
        }
        if admission.task.state.is_terminal() {
            return answer(&args.agent, &admission.task);
        }
        // The coordinator's wait-for graph is the authority: it sees cycles across trees too
        // (a call that joins an existing task by its request id).
        let edge = WaitEdge {
            waiter: run.task_id,
            waiter_agent: ctx.agent.to_string(),
            callee: admission.task.task_id,
            callee_agent: args.agent.clone(),
        };
        match coordinator::register_wait(bus.as_ref(), &edge).await {
            Ok(()) => {}
            Err(WaitError::Deadlock(cycle)) => {
                if !admission.duplicate {
                    // Posted for this wait only: nobody else will ask for its answer.
                    let reason = format!("its caller refused to wait: {cycle}");
                    if let Err(e) = bus.cancel(&request_id, &reason).await {
                        tracing::warn!(task_id = %admission.task.task_id, error = %e, "Could not cancel the call that closed a cycle.");
                    }
                }
                return ToolOutput::error("deadlock", cycle);
            }
            Err(e) => return ToolOutput::error("unavailable", e),
        }
        // Waiting holds no lane slot: the callee (or anyone) may use it meanwhile.
        run.slot.release().await;
        let waited = ingress.wait(&request_id, timeout, &admission.task).await;
        coordinator::end_wait(bus.as_ref(), &edge).await;
        if let Err(e) = run.slot.reacquire().await {
            return ToolOutput::error(
                "unavailable",
                format!("could not take the lane slot back: {e}"),
            );
        }
        match waited {
            Ok(Waited::Ended(record)) => answer(&args.agent, &record),
            Ok(Waited::Pending(_)) => ToolOutput::error(
                "timeout",
                format!(
                    "agent \"{}\" did not answer within {}s (task {})",
                    args.agent,
                    timeout.as_secs(),
                    admission.task.task_id
                ),
            ),
            Err(e) => {
                ToolOutput::error("unavailable", format!("waiting for the answer failed: {e}"))
            }
        }
    }
}
