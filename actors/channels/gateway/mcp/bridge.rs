//! The MCP server's tools over the gateway's task API: each agent of `[mcp.serve] agents` is a
//! tool `ask_<agent>` (`{task, session?, request_id?, wait?}` → the agent's final text), posted
//! to `POST /v1/agents/<id>/tasks` like `clawbus post`, so ingress, dedup and the coordinator
//! treat it as any other task; `list_agents`, `task_status` and `task_result` complete the set.
//! A waiting call whose client asked for progress gets a notification per task event (queued,
//! started, model calls, tool calls, …; not each text delta) until the task ends.
//!
//! The same server runs on stdio (`clawbus mcp serve`, over HTTP to a running gateway) and on
//! the gateway's `/mcp` (in-process): [`TaskApi`] is the difference.

use super::TaskApi;
use super::segment;
use crate::gateway::api::{MAX_WAIT, TaskView};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::sync::Arc;

/// The prefix of an agent's tool: `ask_<agent>`.
const ASK: &str = "ask_";

/// One exposed agent.
#[derive(Debug, Clone)]
pub struct Exposed {
    /// Its id.
    pub id: String,
    /// What it does (its agent file's `description`).
    pub description: Option<String>,
}

impl Exposed {
    /// The agents of `[mcp.serve] agents`, with their descriptions.
    pub fn of(config: &clawbus_core::config::Config) -> Vec<Self> {
        config
            .mcp
            .serve_agents
            .iter()
            .map(|id| Self {
                id: id.clone(),
                description: config.agent(id).and_then(|a| a.description.clone()),
            })
            .collect()
    }
}

/// The MCP server: the exposed agents and the gateway's task API they run on.
#[derive(Clone)]
pub struct Bridge<A> {
    api: A,
    agents: Arc<Vec<Exposed>>,
}

impl<A> Bridge<A> {
    /// A server exposing `agents` over `api`.
    pub fn new(api: A, agents: Vec<Exposed>) -> Self {
        Self {
            api,
            agents: Arc::new(agents),
        }
    }
}

/// A tool's input schema from its JSON.
fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    })
}

fn tools(agents: &[Exposed]) -> Vec<Tool> {
    let task_id = schema(json!({
        "type": "object",
        "properties": { "task_id": { "type": "string", "description": "The id a task was given." } },
        "required": ["task_id"],
    }));
    let mut tools: Vec<Tool> = agents
        .iter()
        .map(|a| {
            let about = a.description.as_deref().unwrap_or("a clawbus agent");
            Tool::new(
                format!("{ASK}{}", a.id),
                format!(
                    "Hand a task to the clawbus agent \"{}\" ({about}) and get its final answer. With wait: false, the task id comes back at once, for task_result later.",
                    a.id
                ),
                schema(json!({
                    "type": "object",
                    "properties": {
                        "task": { "type": "string", "description": "What the agent should do." },
                        "session": { "type": "string", "description": "A named session, for a multi-turn conversation." },
                        "request_id": { "type": "string", "description": "Idempotency key: the same id again never runs the task twice." },
                        "wait": { "type": "boolean", "description": "Wait for the answer (default true)." },
                    },
                    "required": ["task"],
                })),
            )
        })
        .collect();
    tools.push(Tool::new(
        "list_agents",
        "The clawbus agents this server exposes: id, model and description.",
        schema(json!({ "type": "object", "properties": {} })),
    ));
    tools.push(Tool::new(
        "task_status",
        "A task's state (queued, running, succeeded, failed, cancelled, timed_out) as JSON.",
        task_id.clone(),
    ));
    tools.push(Tool::new(
        "task_result",
        "A finished task's final answer; an error while it is still queued or running.",
        task_id,
    ));
    tools
}

/// A tool error the client shows to its user.
fn refused(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

fn answered(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// A string argument.
fn arg<'a>(args: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// The final answer of a finished task, or why there is none.
fn outcome(view: &TaskView) -> CallToolResult {
    match (view.state.as_str(), &view.result) {
        ("succeeded", Some(r)) => answered(clawbus_core::task::TaskResult::shown(r)),
        ("succeeded", None) => answered(""),
        ("queued" | "running", _) => refused(format!(
            "task {} is still {}; call task_result with this task_id later",
            view.task_id, view.state
        )),
        (state, _) => refused(format!(
            "task {} {state}: {}",
            view.task_id,
            view.error.as_deref().unwrap_or("no error text")
        )),
    }
}

impl<A: TaskApi> Bridge<A> {
    fn exposed(&self, id: &str) -> bool {
        self.agents.iter().any(|a| a.id == id)
    }

    /// `ask_<agent>`; with `progress`, a waiting call posts without waiting and follows the
    /// task's events, one notification each, then answers from its record.
    async fn ask(
        &self,
        agent: &str,
        args: &serde_json::Map<String, Value>,
        progress: Option<(ProgressToken, &Peer<RoleServer>)>,
    ) -> CallToolResult {
        let Some(task) = arg(args, "task").filter(|t| !t.trim().is_empty()) else {
            return refused("task: missing or empty (expected the message for the agent)");
        };
        let wait = args.get("wait").and_then(Value::as_bool).unwrap_or(true);
        let body = json!({
            "text": task,
            "request_id": arg(args, "request_id"),
            "session": arg(args, "session"),
            "wait": wait && progress.is_none(),
            "timeout_ms": MAX_WAIT.as_millis() as u64,
        });
        let answer = match self
            .api
            .post(&format!("/v1/agents/{}/tasks", segment(agent)), &body)
            .await
        {
            Ok((409, v)) => {
                return refused(
                    v["error"]["message"]
                        .as_str()
                        .unwrap_or("the request id is taken by another task"),
                );
            }
            Ok((_, v)) => v,
            Err(e) => return refused(e),
        };
        let view = match serde_json::from_value::<TaskView>(answer) {
            Ok(v) => v,
            Err(e) => return refused(format!("unexpected answer from the gateway: {e}")),
        };
        if !wait {
            return answered(
                json!({ "task_id": view.task_id, "state": view.state, "duplicate": view.duplicate })
                    .to_string(),
            );
        }
        let Some((token, peer)) = progress else {
            return outcome(&view);
        };
        if let Err(e) = self.follow(&view.task_id, token, peer).await {
            return refused(format!("following task {}: {e}", view.task_id));
        }
        match self
            .api
            .get(&format!("/v1/tasks/{}", segment(&view.task_id)))
            .await
        {
            Ok(v) => match serde_json::from_value::<TaskView>(v) {
                Ok(view) => outcome(&view),
                Err(e) => refused(format!("unexpected answer from the gateway: {e}")),
            },
            Err(e) => refused(e),
        }
    }

    /// Sends a progress notification per event of task `task_id` (text deltas left out) until
    /// its terminal event; stops early, without error, when the client is gone.
    async fn follow(
        &self,
        task_id: &str,
        token: ProgressToken,
        peer: &Peer<RoleServer>,
    ) -> Result<(), String> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
        let api = self.api.clone();
        let path = format!("/v1/tasks/{}/events", segment(task_id));
        let reader = tokio::spawn(async move { api.stream(&path, tx).await });
        let mut step = 0.0;
        while let Some(data) = rx.recv().await {
            let Ok(event) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            let kind = event["event"]["type"].as_str().unwrap_or("event");
            if kind == "delta" {
                continue;
            }
            step += 1.0;
            let message = match event["event"]["name"].as_str() {
                Some(name) => format!("{kind} {name}"),
                None => kind.to_string(),
            };
            let note = ProgressNotificationParam::new(token.clone(), step).with_message(message);
            if peer.notify_progress(note).await.is_err() {
                break;
            }
        }
        drop(rx);
        reader.await.map_err(|e| e.to_string())?
    }

    /// The task `task_id` names, when it belongs to an exposed agent.
    async fn task(
        &self,
        args: &serde_json::Map<String, Value>,
    ) -> Result<TaskView, CallToolResult> {
        let Some(id) = arg(args, "task_id").filter(|t| !t.is_empty()) else {
            return Err(refused(
                "task_id: missing (expected the id a task was given)",
            ));
        };
        let answer = self
            .api
            .get(&format!("/v1/tasks/{}", segment(id)))
            .await
            .map_err(refused)?;
        let view = serde_json::from_value::<TaskView>(answer)
            .map_err(|e| refused(format!("unexpected answer from the gateway: {e}")))?;
        match &view.agent {
            Some(a) if self.exposed(a) => Ok(view),
            _ => Err(refused(format!(
                "no task {id:?} among the exposed agents' tasks"
            ))),
        }
    }

    async fn list_agents(&self) -> CallToolResult {
        let rows = match self.api.get("/v1/agents").await {
            Ok(v) => v,
            Err(e) => return refused(e),
        };
        let exposed: Vec<&Value> = rows["agents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|r| r["id"].as_str().is_some_and(|id| self.exposed(id)))
                    .collect()
            })
            .unwrap_or_default();
        answered(json!({ "agents": exposed }).to_string())
    }
}

impl<A: TaskApi> ServerHandler for Bridge<A> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("clawbus", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each ask_<agent> tool hands a task to a clawbus agent and returns its final answer.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: tools(&self.agents),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| (token, &context.peer));
        let args = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        let result = match name {
            "list_agents" => self.list_agents().await,
            "task_status" => match self.task(&args).await {
                Ok(view) => answered(json!(view).to_string()),
                Err(e) => e,
            },
            "task_result" => match self.task(&args).await {
                Ok(view) => outcome(&view),
                Err(e) => e,
            },
            _ => match name.strip_prefix(ASK).filter(|a| self.exposed(a)) {
                Some(agent) => self.ask(agent, &args, progress).await,
                None => {
                    return Err(ErrorData::invalid_params(
                        format!("no tool {name:?} (see tools/list)"),
                        None,
                    ));
                }
            },
        };
        Ok(result.into())
    }
}
