//! The methods a connected client may call, and their dispatch. Each one does what the HTTP API
//! does for the same thing, through the same functions.

use super::frames::{ErrorCode, ErrorShape};
use super::openclaw::{self, cron as oc_cron, fields};
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
        pub(crate) enum Method {
            $(#[doc = $doc] $variant,)*
        }

        impl Method {
            /// Every method, as `hello-ok` advertises them.
            pub(crate) const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The method's name on the wire.
            pub(crate) fn as_str(self) -> &'static str {
                match self { $(Method::$variant => $name,)* }
            }

            /// The method a name stands for.
            pub(crate) fn parse(name: &str) -> Option<Self> {
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
    CronGet => "cron.get", "One cron job.";
    SystemPresence => "system-presence", "The instances present: this gateway.";
    ConfigGet => "config.get", "The gateway's config as OpenClaw clients read it (empty here).";
    PluginApprovalList => "plugin.approval.list", "Plugin approval requests (none here).";
    OpenclawApprovalList => "openclaw.approval.list", "System-agent approval requests (none here).";
    LogsTail => "logs.tail", "The gateway's recent log lines.";
    SessionsSubscribe => "sessions.subscribe", "Session events (every connection gets them here).";
    SessionsUnsubscribe => "sessions.unsubscribe", "Stop session events (a no-op here).";
    SessionsDescribe => "sessions.describe", "One session's row, or null.";
    QuestionList => "question.list", "Questions agents ask people (none here).";
    TaskSuggestionsList => "taskSuggestions.list", "Suggested tasks (none here).";
    CommandsList => "commands.list", "Slash commands (none here).";
    ModelsList => "models.list", "The models the agents use.";
    ApprovalGet => "approval.get", "One approval request, as OpenClaw's snapshot.";
    ApprovalResolve => "approval.resolve", "Answer an approval request (OpenClaw's unified form).";
    ChatStartup => "chat.startup", "A session's history as the Control UI opens it.";
    AgentIdentityGet => "agent.identity.get", "An agent's name as the Control UI shows it.";
    SessionsMessagesSubscribe => "sessions.messages.subscribe", "One session's messages (every connection gets them here).";
    SessionsMessagesUnsubscribe => "sessions.messages.unsubscribe", "Stop one session's messages (a no-op here).";
    SessionsResolve => "sessions.resolve", "A session by key or transcript id.";
    ModelsAuthStatus => "models.authStatus", "Model-provider credentials (none managed here).";
    UpdateStatus => "update.status", "Self-update state (none here).";
    TalkCatalog => "talk.catalog", "Voice providers (none here).";
    SessionsCatalogList => "sessions.catalog.list", "External session catalogs (none here).";
    DevicePairList => "device.pair.list", "Paired devices (none here: the token is the credential).";
    ProgressCardGet => "progressCard.get", "A session's progress card (none here).";
    SessionsBranchesList => "sessions.branches.list", "A session's transcript branches (none here).";
    SessionsCompanionState => "sessions.companion.state", "A session's companion exchanges (none here).";
    SessionsObserverVisibility => "sessions.observer.visibility", "Whether the UI is visible (accepted).";
    EnvironmentsList => "environments.list", "Worker environments (none here).";
    NodeList => "node.list", "Paired nodes (none here).";
    PluginsList => "plugins.list", "Plugins (none here).";
    ChannelsStatus => "channels.status", "OpenClaw messaging-channel accounts (none here).";
    SystemInfo => "system.info", "The machine the gateway runs on.";
    ChatMetadata => "chat.metadata", "The models a chat can use (the agents' models).";
    SkillsStatus => "skills.status", "An agent's skills with their requirements.";
    SkillsLibraryList => "skills.library.list", "OpenClaw's uploaded-skill library (none here).";
    SkillsProposalsList => "skills.proposals.list", "Skill workshop proposals (none here) and the installed skills.";
    SkillsSecurityVerdicts => "skills.securityVerdicts", "Registry verdicts on skills (none here).";
    SkillsSearch => "skills.search", "The skill registry's search (no registry here: no results).";
    PluginsCatalogBrowse => "plugins.catalog.browse", "The plugin catalog (empty here).";
    SkillsBins => "skills.bins", "The programs every agent's skills need (`{bins}`).";
    SessionsPatch => "sessions.patch", "Archive or unarchive a session (`{key, archived}`).";
    SessionsDelete => "sessions.delete", "Delete a session that is not running, and its transcript.";
    SessionsPatchMany => "sessions.patchMany", "Archive or unarchive several sessions (`{targets, patch}`), an outcome each.";
    SessionsCompact => "sessions.compact", "Compact a session between runs: summarise older turns, or keep the last `maxLines` messages.";
}

/// Reads a method's `params`, naming the method and the field that is wrong.
pub(super) fn params<T: DeserializeOwned>(method: Method, params: Value) -> Result<T, ErrorShape> {
    serde_json::from_value(params)
        .map_err(|e| ErrorShape::invalid(format!("{} params: {e}", method.as_str())))
}

/// Runs one method.
pub(crate) async fn call(
    state: &ApiState,
    method: Method,
    mut p: Value,
) -> Result<Value, ErrorShape> {
    if p.is_null() {
        p = json!({});
    }
    fields::strip(method.as_str(), &mut p);
    match method {
        Method::Connect => Err(ErrorShape::invalid(
            "connect: already connected (connect is the first request only)",
        )),
        Method::Health => {
            params::<Empty>(method, p)?;
            let reasons = health::not_ready(state).await;
            let rows = sessions::rows(state, None).await?;
            let store = state.config.state_dir.join("db");
            Ok(openclaw::status::health(
                &reasons,
                &status_input(state, &rows, Vec::new()),
                &store.display().to_string(),
            ))
        }
        Method::SystemPresence => Ok(openclaw::status::presence(state.clock.now_ms())),
        Method::ConfigGet => {
            Ok(json!({ "exists": true, "valid": true, "config": {}, "issues": [] }))
        }
        Method::PluginApprovalList | Method::OpenclawApprovalList => {
            params::<Empty>(method, p)?;
            Ok(json!([]))
        }
        Method::SessionsSubscribe | Method::SessionsUnsubscribe => {
            Ok(json!({ "ok": true, "subscribed": method == Method::SessionsSubscribe }))
        }
        Method::QuestionList => Ok(json!({ "questions": [] })),
        Method::TaskSuggestionsList => Ok(json!({ "suggestions": [] })),
        Method::CommandsList => Ok(json!({ "commands": [] })),
        Method::ModelsList => {
            let mut models: Vec<String> = state
                .config
                .agents
                .iter()
                .map(|a| a.model.to_string())
                .collect();
            models.sort();
            models.dedup();
            let rows: Vec<Value> = models
                .iter()
                .map(|m| {
                    let (provider, id) = m.split_once('/').unwrap_or(("", m));
                    json!({ "id": id, "name": id, "provider": provider })
                })
                .collect();
            Ok(json!({ "models": rows }))
        }
        Method::ApprovalGet => {
            let q: ApprovalRef = params(method, p)?;
            let rec = state
                .approvals
                .get(&q.id)
                .await
                .map_err(approvals::failure)?
                .ok_or_else(|| {
                    ErrorShape::new(ErrorCode::NotFound, format!("approval not found: {}", q.id))
                })?;
            Ok(json!({ "approval": openclaw::approvals::snapshot(&rec) }))
        }
        Method::ApprovalResolve => {
            let q: UnifiedResolve = params(method, p)?;
            if q.kind != "exec" {
                return Err(invalid(
                    method,
                    format!(
                        "kind: {:?} approvals do not exist here (expected \"exec\")",
                        q.kind
                    ),
                ));
            }
            let (allow, always) = q.decision.answer();
            let (rec, applied) = match state.approvals.resolve(&q.id, allow, always).await {
                Ok(rec) => (rec, true),
                Err(clawbus_runtime::approvals::ApprovalError::Settled { .. }) => {
                    let rec = state
                        .approvals
                        .get(&q.id)
                        .await
                        .map_err(approvals::failure)?;
                    let rec = rec.ok_or_else(|| {
                        ErrorShape::new(
                            ErrorCode::NotFound,
                            format!("approval not found: {}", q.id),
                        )
                    })?;
                    (rec, false)
                }
                Err(e) => return Err(approvals::failure(e).into()),
            };
            Ok(json!({ "applied": applied, "approval": openclaw::approvals::snapshot(&rec) }))
        }
        Method::SessionsDescribe => {
            let q: SessionRef = params(method, p)?;
            let rows = sessions::rows(state, q.agent_id.as_deref()).await?;
            let found = rows.iter().find(|r| r.key == q.key);
            Ok(json!({ "session": found.map(openclaw::sessions::row) }))
        }
        Method::LogsTail => {
            let q: LogsTail = params(method, p)?;
            let ring = crate::gateway::logs::LogRing::global();
            let tail = ring.tail(q.limit.unwrap_or(DEFAULT_LOG_LINES), q.cursor);
            Ok(json!({
                "file": "clawbus (stderr, recent lines in memory)",
                "cursor": tail.cursor,
                "size": ring.size(),
                "lines": tail.lines,
                "truncated": tail.truncated,
            }))
        }
        Method::Status => {
            params::<Empty>(method, p)?;
            status(state).await
        }
        Method::AgentsList => {
            params::<Empty>(method, p)?;
            Ok(openclaw::ui::agents_list(&state.config.agents))
        }
        Method::Agent => {
            let ask = openclaw::delivery::DeliveryAsk::take(&mut p);
            let routes = clawbus_core::config::ReplyRoutes::new(&state.config);
            let to = ask.resolve(&routes)?;
            runs::start(state, method, params(method, p)?, to).await
        }
        Method::ChatSend | Method::SessionsSend => {
            let to = openclaw::delivery::Resolved::NotAsked;
            runs::start(state, method, params(method, p)?, to).await
        }
        Method::AgentWait => runs::wait(state, params(method, p)?).await,
        Method::ChatAbort => runs::abort(state, params(method, p)?).await,
        Method::ChatHistory => runs::history(state, params(method, p)?).await,
        Method::SessionsList
        | Method::SessionsPatch
        | Method::SessionsPatchMany
        | Method::SessionsDelete
        | Method::SessionsCompact => super::session_calls::call(state, method, p).await,
        Method::TasksList => {
            let q: openclaw::tasks::ListParams = params(method, p)?;
            let statuses = q.statuses().map_err(|e| invalid(method, e))?;
            let limit = q.limit().map_err(|e| invalid(method, e))?;
            let records = tasks::list(state, q.state.as_deref(), q.agent_id.as_deref()).await?;
            let mut rows: Vec<Value> = records
                .iter()
                .filter(|r| {
                    let status = openclaw::tasks::status(r.state);
                    statuses.as_ref().is_none_or(|s| s.contains(&status))
                })
                .map(openclaw::tasks::summary)
                .filter(|row| {
                    q.session_key
                        .as_deref()
                        .is_none_or(|k| row["sessionKey"] == k)
                })
                .collect();
            let skip = rows.len().saturating_sub(limit.unwrap_or(usize::MAX));
            Ok(json!({ "tasks": rows.split_off(skip) }))
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
            let wanted = Some(q.state.unwrap_or(ApprovalState::Pending));
            let rows = approvals::list_requests(state, wanted).await?;
            Ok(Value::Array(
                rows.iter().map(openclaw::approvals::request).collect(),
            ))
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
        Method::CronList => {
            let q: oc_cron::ListParams = params(method, p)?;
            let all = state.cron.list().await.map_err(cron::failure)?;
            oc_cron::page(&all, &q).map_err(|e| invalid(method, e))
        }
        Method::CronGet => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            Ok(oc_cron::job(&job_view(state, &id).await?))
        }
        Method::CronStatus => {
            params::<Empty>(method, p)?;
            let jobs = state.cron.list().await.map_err(cron::failure)?;
            let next = jobs.iter().filter_map(|v| v.state.next_fire_ms).min();
            Ok(json!({ "enabled": true, "jobs": jobs.len(), "nextWakeAtMs": next }))
        }
        Method::CronAdd => {
            let q: oc_cron::AddParams = params(method, p)?;
            let default = agent_ids(state).into_iter().next().unwrap_or_default();
            let spec = q.spec(&default).map_err(|e| invalid(method, e))?;
            let job = state.cron.add(&spec).await.map_err(cron::failure)?;
            Ok(oc_cron::job(&job_view(state, &job.id).await?))
        }
        Method::CronUpdate => {
            let q: CronUpdate = params(method, p)?;
            let id = cron::parse_job_id(q.id()?)?;
            let base = clawbus_runtime::cron::JobSpec::of_job(&job_view(state, &id).await?.job);
            let spec = q.patch.apply(base).map_err(|e| invalid(method, e))?;
            state.cron.update(&id, &spec).await.map_err(cron::failure)?;
            Ok(oc_cron::job(&job_view(state, &id).await?))
        }
        Method::CronRemove => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            state.cron.remove(&id).await.map_err(cron::failure)?;
            Ok(json!({ "ok": true, "removed": true, "id": id }))
        }
        Method::CronRun => {
            let id = cron::parse_job_id(params::<JobRef>(method, p)?.id()?)?;
            let fired = cron::run_job(state, &id).await?;
            Ok(
                json!({ "ok": true, "enqueued": true, "ran": true, "runId": fired["task_id"], "jobId": id }),
            )
        }
        Method::CronRuns => {
            let q: RunsQuery = params(method, p)?;
            if q.scope.as_deref() == Some("all") && q.id.is_none() && q.job_id.is_none() {
                return all_runs(state, &q).await;
            }
            let id = cron::parse_job_id(id_or_alias(&q.id, &q.job_id, ("id", "jobId"))?)?;
            let view = job_view(state, &id).await?;
            let runs = state.cron.runs(&id).await.map_err(cron::failure)?;
            Ok(oc_cron::runs_page(&runs, &view.job.name, q.limit, q.offset))
        }
        Method::ChatStartup
        | Method::AgentIdentityGet
        | Method::SessionsMessagesSubscribe
        | Method::SessionsMessagesUnsubscribe
        | Method::SessionsResolve
        | Method::ModelsAuthStatus
        | Method::UpdateStatus
        | Method::TalkCatalog
        | Method::SessionsCatalogList
        | Method::DevicePairList
        | Method::ProgressCardGet
        | Method::SessionsBranchesList
        | Method::SessionsCompanionState
        | Method::SessionsObserverVisibility
        | Method::EnvironmentsList
        | Method::NodeList
        | Method::PluginsList
        | Method::ChannelsStatus
        | Method::SystemInfo => super::ui_calls::call(state, method, p).await,
        Method::ChatMetadata
        | Method::SkillsStatus
        | Method::SkillsLibraryList
        | Method::SkillsProposalsList
        | Method::SkillsSecurityVerdicts
        | Method::SkillsSearch
        | Method::PluginsCatalogBrowse
        | Method::SkillsBins => super::catalog_calls::call(state, method, p),
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
    let rows = sessions::rows(state, None).await?;
    let tasks = all.iter().map(|r| r.state).collect();
    Ok(openclaw::status::status(&status_input(state, &rows, tasks)))
}

fn status_input<'a>(
    state: &ApiState,
    rows: &'a [sessions::SessionRow],
    tasks: Vec<bus::TaskState>,
) -> openclaw::status::StatusInput<'a> {
    openclaw::status::StatusInput {
        agents: agent_ids(state),
        model: state.config.default_model.to_string(),
        sessions: rows,
        tasks,
        now_ms: state.clock.now_ms(),
    }
}

/// The configured agents' ids, the default (first) one first.
fn agent_ids(state: &ApiState) -> Vec<String> {
    state
        .config
        .agents
        .iter()
        .map(|a| a.id.to_string())
        .collect()
}

/// A job and its state; `NOT_FOUND` naming the id.
async fn job_view(
    state: &ApiState,
    id: &clawbus_runtime::cron::JobId,
) -> Result<clawbus_runtime::cron::JobView, ErrorShape> {
    state
        .cron
        .list()
        .await
        .map_err(cron::failure)?
        .into_iter()
        .find(|v| &v.job.id == id)
        .ok_or_else(|| ErrorShape::new(ErrorCode::NotFound, format!("no cron job \"{id}\"")))
}

/// An invalid-params error naming the method.
fn invalid(method: Method, e: String) -> ErrorShape {
    ErrorShape::invalid(format!("{} params: {e}", method.as_str()))
}

/// `{}`: a method without params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Empty {}

/// Lines `logs.tail` answers when the client names no `limit`.
const DEFAULT_LOG_LINES: usize = 200;

/// `{cursor?, limit?}` of `logs.tail`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsTail {
    #[serde(default)]
    cursor: Option<u64>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `{key, agentId?}` of `sessions.describe`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SessionRef {
    key: String,
    #[serde(default)]
    agent_id: Option<String>,
}

/// `cron.runs {scope: "all", agentId?}`: the runs of every job (of the agent), newest first.
async fn all_runs(state: &ApiState, q: &RunsQuery) -> Result<Value, ErrorShape> {
    let jobs = state.cron.list().await.map_err(cron::failure)?;
    let mut runs = Vec::new();
    for view in jobs
        .iter()
        .filter(|v| q.agent_id.as_deref().is_none_or(|a| v.job.agent == a))
    {
        runs.push((
            state.cron.runs(&view.job.id).await.map_err(cron::failure)?,
            view,
        ));
    }
    let named = runs
        .iter()
        .flat_map(|(rs, v)| rs.iter().map(|r| (r, v.job.name.as_str())))
        .collect();
    Ok(oc_cron::named_runs_page(named, q.limit, q.offset))
}

/// `{id | jobId | scope: "all", agentId?, limit?, offset?}` of `cron.runs`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunsQuery {
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
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

/// `{id, patch}`: OpenClaw's patch (see [`oc_cron::Patch`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CronUpdate {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
    patch: oc_cron::Patch,
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

/// `{id}` of `approval.get`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalRef {
    id: String,
}

/// `{id, kind, decision}` of `approval.resolve`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnifiedResolve {
    id: String,
    kind: String,
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
