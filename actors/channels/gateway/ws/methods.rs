//! The methods a connected client may call, and their dispatch. Each one does what the HTTP API
//! does for the same thing, through the same functions.

use super::frames::ErrorShape;
use super::runs;
use crate::gateway::api::{self, ApiState, TaskView};
use crate::gateway::sessions::Cancelled;
use crate::gateway::{approvals, cron, health, sessions, tasks};
use clawbus_runtime::approvals::ApprovalState;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

macro_rules! methods {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// A method of the protocol that this gateway serves.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Method {
            $(#[doc = $doc] $variant,)*
        }

        impl Method {
            /// Every method, as `hello-ok` advertises them.
            pub const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The method's name on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $(Method::$variant => $name,)* }
            }

            /// The method a name stands for.
            pub fn parse(name: &str) -> Option<Self> {
                match name { $($name => Some(Method::$variant),)* _ => None }
            }
        }
    };
}

methods! {
    Connect => "connect", "The handshake (first frame only).";
    Health => "health", "Whether the daemon can accept work.";
    Status => "status", "Agents, tasks by state, connections.";
    AgentsList => "agents.list", "The agents.";
    Agent => "agent", "Start a run; answers `{runId, status: \"accepted\"}` at once.";
    AgentWait => "agent.wait", "Wait for a run's end.";
    ChatSend => "chat.send", "Send a chat message to a session (a run).";
    ChatHistory => "chat.history", "A session's transcript.";
    ChatAbort => "chat.abort", "Stop a session's running runs.";
    SessionsList => "sessions.list", "The sessions.";
    SessionsSend => "sessions.send", "Send a message to a session (a run).";
    CronList => "cron.list", "The cron jobs.";
    CronStatus => "cron.status", "The scheduler: job count and next wake.";
    CronAdd => "cron.add", "Add a cron job.";
    CronUpdate => "cron.update", "Change a cron job.";
    CronRemove => "cron.remove", "Remove a cron job.";
    CronRun => "cron.run", "Fire a cron job now.";
    CronRuns => "cron.runs", "A cron job's last runs.";
    FlowsList => "flows.list", "The flows of `flows.d/`.";
    FlowsRun => "flows.run", "Start a run of a flow: `{name, inputs?, requestId?}`.";
    FlowsGet => "flows.get", "One flow run with its nodes: `{id}`.";
    FlowsCancel => "flows.cancel", "Cancel a flow run: `{id}`.";
    FlowsRuns => "flows.runs", "The flow runs.";
    TasksList => "tasks.list", "The tasks in the store.";
    TasksGet => "tasks.get", "One task.";
    TasksCancel => "tasks.cancel", "Cancel a task and what it started.";
    ExecApprovalList => "exec.approval.list", "Approval requests.";
    ExecApprovalResolve => "exec.approval.resolve", "Answer an approval request.";
}

/// Reads a method's `params`, naming the method and the field that is wrong.
pub(super) fn params<T: DeserializeOwned>(method: Method, params: Value) -> Result<T, ErrorShape> {
    serde_json::from_value(params)
        .map_err(|e| ErrorShape::invalid(format!("{} params: {e}", method.as_str())))
}

/// Runs one method.
pub async fn call(state: &ApiState, method: Method, p: Value) -> Result<Value, ErrorShape> {
    match method {
        Method::Connect => Err(ErrorShape::invalid(
            "connect: already connected (connect is the first request only)",
        )),
        Method::Health => {
            let reasons = health::not_ready(state).await;
            Ok(json!({ "ok": reasons.is_empty(), "reasons": reasons, "ts": state.clock.now_ms() }))
        }
        Method::Status => status(state).await,
        Method::AgentsList => Ok(json!({
            "defaultId": state.config.agents.first().map(|a| a.id.to_string()),
            "mainKey": "main",
            "agents": api::agent_rows(&state.config),
        })),
        Method::Agent | Method::ChatSend | Method::SessionsSend => {
            runs::start(state, method, params(method, p)?).await
        }
        Method::AgentWait => runs::wait(state, params(method, p)?).await,
        Method::ChatAbort => runs::abort(state, params(method, p)?).await,
        Method::ChatHistory => runs::history(state, params(method, p)?),
        Method::SessionsList => {
            let q: AgentFilter = params(method, p)?;
            let rows = sessions::rows(state, q.agent_id.as_deref())?;
            Ok(json!({ "sessions": rows }))
        }
        Method::TasksList => {
            let q: TaskFilter = params(method, p)?;
            let rows = tasks::list_rows(state, q.state.as_deref(), q.agent_id.as_deref()).await?;
            Ok(json!({ "tasks": rows }))
        }
        Method::TasksGet => {
            let q: TaskRef = params(method, p)?;
            let rec = api::task_by_id(state, q.id()?).await?;
            Ok(json!(TaskView::of(&rec, false)))
        }
        Method::TasksCancel => {
            let q: TaskRef = params(method, p)?;
            let (rec, cancelled) = match sessions::cancel_task(state, q.id()?).await? {
                Cancelled::Now(rec) => (rec, true),
                Cancelled::AlreadyEnded(rec) => (rec, false),
            };
            Ok(json!({ "cancelled": cancelled, "task": TaskView::of(&rec, false) }))
        }
        Method::ExecApprovalList => {
            let q: ApprovalFilter = params(method, p)?;
            Ok(json!({ "approvals": approvals::list_requests(state, q.state)? }))
        }
        Method::ExecApprovalResolve => {
            let q: Resolve = params(method, p)?;
            let (allow, always) = q.decision.answer();
            let rec = state
                .approvals
                .resolve(&q.id, allow, always)
                .await
                .map_err(approvals::failure)?;
            Ok(json!({ "ok": true, "approval": rec }))
        }
        Method::CronList => Ok(json!({ "jobs": state.cron.list().map_err(cron::failure)? })),
        Method::CronStatus => {
            let jobs = state.cron.list().map_err(cron::failure)?;
            let next = jobs.iter().filter_map(|v| v.state.next_fire_ms).min();
            Ok(json!({ "enabled": true, "jobs": jobs.len(), "nextWakeAtMs": next }))
        }
        Method::CronAdd => {
            let spec: clawbus_runtime::cron::JobSpec = params(method, p)?;
            Ok(json!(state.cron.add(&spec).map_err(cron::failure)?))
        }
        Method::CronUpdate => {
            let q: CronUpdate = params(method, p)?;
            let id = cron::parse_job_id(q.id()?)?;
            Ok(json!(cron::change_job(state, &id, q.patch)?))
        }
        Method::CronRemove => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            state.cron.remove(&id).map_err(cron::failure)?;
            Ok(json!({ "ok": true, "removed": id }))
        }
        Method::CronRun => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            Ok(cron::run_job(state, &id).await?)
        }
        Method::CronRuns => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            Ok(json!({ "runs": state.cron.runs(&id).map_err(cron::failure)? }))
        }
        Method::FlowsList
        | Method::FlowsRun
        | Method::FlowsGet
        | Method::FlowsCancel
        | Method::FlowsRuns => flow_call(state, method, p).await,
    }
}

/// `{name, inputs?, requestId?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FlowStart {
    name: String,
    #[serde(default)]
    inputs: std::collections::BTreeMap<String, Value>,
    request_id: Option<String>,
}

/// `{id}` of a flow run.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowRunRef {
    id: String,
}

/// The flow methods: the answers of `/v1/flows` and `/v1/flow-runs`.
async fn flow_call(state: &ApiState, method: Method, p: Value) -> Result<Value, ErrorShape> {
    use super::super::flows::{failure, view};
    use clawbus_runtime::flow::FlowError;
    let now = state.clock.now_ms();
    match method {
        Method::FlowsRun => {
            let q: FlowStart = params(method, p)?;
            let s = state
                .flows
                .start_named(&q.name, &q.inputs, q.request_id)
                .await
                .map_err(failure)?;
            let mut v = view(&s.run, now);
            v["duplicate"] = json!(s.duplicate);
            Ok(v)
        }
        Method::FlowsGet => {
            let q: FlowRunRef = params(method, p)?;
            match state.flows.get(&q.id).map_err(failure)? {
                Some(run) => Ok(view(&run, now)),
                None => Err(failure(FlowError::UnknownRun(q.id)).into()),
            }
        }
        Method::FlowsCancel => {
            let q: FlowRunRef = params(method, p)?;
            let run = state
                .flows
                .cancel(&q.id, "cancelled over the WebSocket gateway")
                .await
                .map_err(failure)?;
            Ok(view(&run, now))
        }
        Method::FlowsRuns => {
            let runs = state.flows.runs().map_err(failure)?;
            Ok(json!({ "runs": runs.iter().map(|r| view(r, now)).collect::<Vec<_>>() }))
        }
        _ => Ok(json!({ "flows": super::super::flows::rows(state) })),
    }
}

async fn status(state: &ApiState) -> Result<Value, ErrorShape> {
    let all = state.bus.tasks().await.map_err(api::Failure::bus)?;
    let mut by_state = serde_json::Map::new();
    for r in &all {
        let n = by_state
            .entry(r.state.as_str())
            .or_insert(Value::from(0u64));
        *n = Value::from(n.as_u64().unwrap_or(0) + 1);
    }
    Ok(json!({
        "ok": !state.shutdown.is_shutdown(),
        "version": env!("CARGO_PKG_VERSION"),
        "agents": state.config.agents.len(),
        "tasks": by_state,
    }))
}

/// `{agentId?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentFilter {
    #[serde(default)]
    agent_id: Option<String>,
}

/// `{state?, agentId?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskFilter {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
}

/// The id given as `id` or else as `alias`; an invalid-request error naming both fields
/// (`names`: the id's wire name, then the alias's) when neither is.
fn id_or_alias<'a>(
    id: &'a Option<String>,
    alias: &'a Option<String>,
    names: (&str, &str),
) -> Result<&'a str, ErrorShape> {
    id.as_deref().or(alias.as_deref()).ok_or_else(|| {
        let (id, alias) = names;
        ErrorShape::invalid(format!("params: missing field \"{id}\" (or \"{alias}\")"))
    })
}

/// `{taskId}` (or `runId`, the same id).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskRef {
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
}

impl TaskRef {
    fn id(&self) -> Result<&str, ErrorShape> {
        id_or_alias(&self.task_id, &self.run_id, ("taskId", "runId"))
    }
}

/// `{id}` (or `jobId`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobRef {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
}

impl JobRef {
    fn id(&self) -> Result<&str, ErrorShape> {
        id_or_alias(&self.id, &self.job_id, ("id", "jobId"))
    }
}

/// `{id, patch}`: the flat fields of `PATCH /v1/cron/{id}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CronUpdate {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
    patch: clawbus_runtime::cron::FlatSpec,
}

impl CronUpdate {
    fn id(&self) -> Result<&str, ErrorShape> {
        id_or_alias(&self.id, &self.job_id, ("id", "jobId"))
    }
}

/// `{state?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalFilter {
    #[serde(default)]
    state: Option<ApprovalState>,
}

/// `{id, decision}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resolve {
    id: String,
    decision: Decision,
}

/// An answer, in OpenClaw's words (`allow-once`, `allow-always`, `deny`) or the HTTP API's.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Decision {
    Allow,
    AllowOnce,
    AllowAlways,
    Deny,
}

impl Decision {
    /// `(allow, always)`.
    fn answer(self) -> (bool, bool) {
        match self {
            Self::Allow | Self::AllowOnce => (true, false),
            Self::AllowAlways => (true, true),
            Self::Deny => (false, false),
        }
    }
}
