//! The HTTP API: tasks in, task records out.

use super::answer::TaskAnswer;
use super::token;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bus::{Bus, BusError, RequestId, TaskRecord};
use clawbus_core::config::Config;
use clawbus_core::config::retry::MAX_ATTEMPTS;
use clawbus_core::ids::{AgentId, SessionName};
use clawbus_runtime::ingress::{Request, Target};
use clawbus_runtime::origin::Origin;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The longest a caller may wait on one HTTP request.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// How long `wait: true` waits when the caller names no timeout.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// What the handlers share: one allocation, so that the copy axum hands each handler and
/// middleware of a request is one reference count, not one per field.
#[derive(Clone)]
pub struct ApiState(Arc<ApiShared>);

impl ApiState {
    /// The state the handlers share.
    pub fn new(shared: ApiShared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for ApiState {
    type Target = ApiShared;

    fn deref(&self) -> &ApiShared {
        &self.0
    }
}

/// The parts of [`ApiState`].
pub struct ApiShared {
    /// The bus tasks are submitted to.
    pub bus: Arc<dyn Bus>,
    /// The loaded configuration.
    pub config: Arc<Config>,
    /// The bearer token callers must present.
    pub token: Arc<String>,
    /// The metrics registry served at `GET /metrics`.
    pub metrics: clawbus_runtime::metrics::Metrics,
    /// The model providers' circuit breakers, shown by `GET /v1/status`.
    pub breakers: Arc<clawbus_runtime::model::Breakers>,
    /// The session index.
    pub sessions: clawbus_runtime::session::index::SessionIndex,
    /// Live sessions and their state.
    pub live: clawbus_runtime::session::LiveSessions,
    /// Approval requests, listed and answered under `/v1/approvals`.
    pub approvals: clawbus_runtime::approvals::Approvals,
    /// The routing table, consulted at ingress for channel messages.
    pub router: Arc<clawbus_runtime::router::Router>,
    /// The one clock (deadlines).
    pub clock: Arc<dyn bus::Clock>,
    /// The database's write probe: `/healthz` answers 503 while it keeps a write error.
    pub storage: clawbus_runtime::system::StorageProbe,
    /// Fires when the system shuts down: `/healthz` then answers 503.
    pub shutdown: clawbus_runtime::system::Shutdown,
    /// The cron scheduler, managed under `/v1/cron`.
    pub cron: Arc<clawbus_runtime::cron::Scheduler>,
    /// The flow engine, under `/v1/flows` and `/v1/flow-runs`.
    pub flows: clawbus_runtime::flow::Flows,
    /// The inbound webhooks with their secrets (`/v1/hooks/{name}`).
    pub hooks: Arc<super::webhooks::Hooks>,
    /// The open WebSocket connections (`[gateway] ws_max_connections`).
    pub ws: super::ws::Connections,
    /// When the gateway started, in ms on the system's clock (`uptimeMs` in `hello-ok`).
    pub started_ms: u64,
    /// Opens key-value stores on the bus's backend (the nodes' heartbeats, `/v1/nodes`).
    pub kv: bus::KvOpener,
    /// On a shared bus: the cluster's session transcripts, read by `/v1/sessions/{key}` and
    /// `chat.history` (`None`: this node's files).
    pub transcripts: Option<Arc<dyn bus::log::LogStore>>,
    /// On a shared bus: the session leases, taken by a delete so that it never meets a run of
    /// the session on another node (`None` on the embedded bus).
    pub leases: Option<clawbus_runtime::session::SessionLeases>,
    /// The agents running on this node, for what only a session's actor may do (compact it).
    pub agents: Arc<[clawbus_runtime::agent::AgentHandle]>,
    /// What became of each delivery (`/v1/deliveries`; on a shared bus, every node's).
    pub deliveries: clawbus_runtime::outbox::DeliveryRecords,
    /// This node as `/v1/nodes` shows it where no other node shares the bus (no heartbeat is
    /// written there).
    pub node: clawbus_runtime::system::nodes::NodeSource,
}

/// Builds the router: `/healthz` open, everything under `/v1` and `/mcp` behind the token.
pub fn router(state: ApiState) -> Router {
    let app = base_router(state.clone());
    // `/mcp` calls the rest of the router in-process; it is checked and drained the same way.
    let mcp = super::mcp::routes(&state, app.clone())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_token,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_while_draining,
        ))
        .with_state(state);
    app.merge(mcp)
}

/// Every route but `/mcp`.
fn base_router(state: ApiState) -> Router {
    let v1 = Router::new()
        .route("/agents", get(list_agents))
        .route("/agents/{id}/tasks", post(post_task))
        .route("/tasks/{id}", get(get_task))
        .route("/tasks/{id}/events", get(super::events::task_events))
        .merge(super::channels::routes())
        .merge(super::sessions::routes())
        .merge(super::topics::routes())
        .merge(super::tail::routes())
        .merge(super::approvals::routes())
        .merge(super::cron::routes())
        .merge(super::flows::routes())
        .merge(super::tasks::routes())
        .merge(super::usage::routes())
        .merge(super::status::routes())
        .merge(super::nodes::routes())
        .merge(super::deliveries::routes())
        .merge(super::openai::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_token,
        ));
    let max_body = state.config.gateway.max_body;
    Router::new()
        .route("/healthz", get(super::health::healthz))
        .nest("/v1", v1)
        // The signature authenticates a webhook delivery: no bearer token.
        .merge(super::webhooks::routes())
        .merge(super::metrics::routes())
        // The WebSocket handshake carries the token.
        .merge(super::ws::routes())
        // The dashboard's files at /ui/ (public: every call they make carries the token).
        .merge(super::dashboard::routes())
        // OpenClaw's Control UI, when [gateway] control_ui_dir names it (public files).
        .merge(super::control_ui::routes())
        .route_layer(axum::middleware::from_fn(refuse_unknown_query))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_while_draining,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(state)
}

/// The query parameters a route takes (by its route pattern); every other one is refused.
fn query_params(route: &str) -> &'static [&'static str] {
    match route {
        "/v1/sessions" => &["agent", "archived"],
        "/v1/approvals" => &["state"],
        "/v1/tasks" => &["state", "agent"],
        "/v1/usage" => &["agent", "since"],
        "/v1/bus/tail" => &["pattern"],
        "/v1/deliveries" => &["limit"],
        _ => &[],
    }
}

/// Refuses, on every route, a query parameter the route does not take: 400 `invalid_query`
/// naming it (a `wait=true` in the query is not the body's `wait`, and must not pass unnoticed).
async fn refuse_unknown_query(
    route: Option<axum::extract::MatchedPath>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    let Some(raw) = req.uri().query().filter(|q| !q.is_empty()) else {
        return next.run(req).await;
    };
    let known = route.as_ref().map_or(&[][..], |r| query_params(r.as_str()));
    let pairs = match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(req.uri()) {
        Ok(axum::extract::Query(pairs)) => pairs,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()),
    };
    let mut unknown: Vec<&str> = pairs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !known.contains(k))
        .collect();
    unknown.dedup();
    if unknown.is_empty() {
        return next.run(req).await;
    }
    let expected = if known.is_empty() {
        "no query parameters".to_string()
    } else {
        format!("only: {}", known.join(", "))
    };
    let names: Vec<String> = unknown.iter().map(|k| format!("{k:?}")).collect();
    let path = req.uri().path();
    error(
        StatusCode::BAD_REQUEST,
        "invalid_query",
        format!(
            "unknown query parameter {} on {path} (raw query {raw:?}; expected {expected})",
            names.join(", ")
        ),
    )
}

/// The JSON body of a request, or the answer naming what was wrong with it: 413
/// `payload_too_large` past `[gateway] max_body`, else 400 `invalid_body`.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
pub(super) fn body<T>(
    state: &ApiState,
    body: Result<Json<T>, axum::extract::rejection::JsonRejection>,
) -> Result<T, Response> {
    match body {
        Ok(Json(b)) => Ok(b),
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large(state)),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            e.body_text(),
        )),
    }
}

fn too_large(state: &ApiState) -> Response {
    let limit = state.config.gateway.max_body;
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the request body is larger than {limit} bytes (expected at most [gateway] max_body = {limit})"
        ),
    )
}

/// Unknown paths get the usual error shape rather than an empty 404.
async fn no_route(
    State(state): State<ApiState>,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    if method == axum::http::Method::GET
        && let Some(file) = super::control_ui::asset(&state, uri.path()).await
    {
        return file;
    }
    error(
        StatusCode::NOT_FOUND,
        "no_route",
        format!(
            "no route {method} {} (see the HTTP API in README.md)",
            uri.path()
        ),
    )
}

async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

async fn require_token(
    State(state): State<ApiState>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let message = match header.map(token::bearer) {
        Some(Some(t)) if token::matches(&state.token, t) => return next.run(req).await,
        Some(Some(_)) => "wrong bearer token",
        Some(None) => {
            "header Authorization: expected Bearer <token> (see <state-dir>/gateway.token)"
        }
        None => "missing header Authorization: Bearer <token> (see <state-dir>/gateway.token)",
    };
    // OpenAI's fields too (`type`, `param`), so the OpenAI SDKs raise their authentication error
    // with the message.
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({ "error": {
            "code": "unauthorized",
            "message": message,
            "type": "invalid_request_error",
            "param": null,
        } })),
    )
        .into_response()
}

/// While the daemon drains, new work is refused (503 `draining`) and the listener stays open:
/// `/healthz` answers 503 until the end, and reads (a task's record, its events) still answer.
async fn refuse_while_draining(
    State(state): State<ApiState>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    if !state.shutdown.is_shutdown() || req.method() == axum::http::Method::GET {
        return next.run(req).await;
    }
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "draining",
        "the daemon is shutting down: no new work is accepted (try again after it restarts)",
    )
}

/// The body of `POST /v1/agents/{id}/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// The message for the agent.
    pub text: String,
    /// Idempotency key; the `Idempotency-Key` header is used when this is absent.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Wait for the outcome before answering.
    #[serde(default)]
    pub wait: bool,
    /// How long to wait, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// A named session, for a multi-turn conversation.
    #[serde(default)]
    pub session: Option<String>,
    /// Milliseconds from now after which the task is no longer wanted: a run still waiting for a
    /// lane slot then ends `timed_out` instead of starting.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// The lane the run takes a slot in (`main` when absent; `cron`, `subagent` or any
    /// `[lanes]` name).
    #[serde(default)]
    pub lane: Option<String>,
    /// Shared topics only: one task per subscribing agent instead of one for a single
    /// subscriber.
    #[serde(default)]
    pub broadcast: bool,
    /// The attempts the task may take (1-5), over the agent's `[retry] max_attempts`.
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

/// The poster's `max_attempts`, checked: 1 to [`MAX_ATTEMPTS`], or the 400 answer naming it.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
pub(super) fn max_attempts(n: Option<u32>) -> Result<Option<u32>, Response> {
    match n {
        Some(n) if !(1..=MAX_ATTEMPTS).contains(&n) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!("max_attempts: {n} is out of range (expected 1 to {MAX_ATTEMPTS})"),
        )),
        n => Ok(n),
    }
}

/// One member task of a broadcast group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BroadcastMember {
    /// The agent running it.
    pub agent: String,
    /// Its task id.
    pub task_id: String,
    /// Its request id.
    pub request_id: String,
}

/// A task as the API shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct TaskView {
    /// The task id.
    pub task_id: String,
    /// Its request id.
    pub request_id: String,
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled` or `timed_out`.
    pub state: String,
    /// True when the request id was already known.
    pub duplicate: bool,
    /// The agent's answer, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// What went wrong, otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The agent it was posted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The session routing chose at ingress (channel messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// A broadcast group's member tasks, one per subscribing agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<BroadcastMember>,
    /// The lane it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

impl TaskView {
    /// The view of `rec`; `duplicate` when its request id was already known.
    pub(super) fn of(rec: &TaskRecord, duplicate: bool) -> Self {
        TaskAnswer::of(rec, duplicate).into_view()
    }

    /// The answer to a submission or a wait: 200 with the task once it ended, else 202; the body
    /// encoded straight from the record ([`TaskAnswer`]).
    fn response(rec: &TaskRecord, duplicate: bool) -> Response {
        let status = if rec.state.is_terminal() {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        (status, Json(TaskAnswer::of(rec, duplicate))).into_response()
    }
}

/// The query of a request, or the `invalid_query` answer naming what was wrong with it.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
pub(super) fn query<T>(
    query: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, Response> {
    query
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| error(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()))
}

/// The answer to a list request: `{"<field>": [...]}` with the rows `list` makes of the query,
/// or the `invalid_query` answer, or `list`'s failure.
pub(super) async fn listing<Q, T: serde::Serialize, F>(
    query: Result<axum::extract::Query<Q>, axum::extract::rejection::QueryRejection>,
    field: &str,
    list: impl FnOnce(Q) -> F,
) -> Response
where
    F: std::future::Future<Output = Result<Vec<T>, Failure>>,
{
    let q = match self::query(query) {
        Ok(q) => q,
        Err(answer) => return answer,
    };
    match list(q).await {
        Ok(rows) => Json(json!({ field: rows })).into_response(),
        Err(f) => f.into_response(),
    }
}

/// A refused request, shared by the HTTP API and the WebSocket gateway: the HTTP status, a stable
/// code and a message naming what was wrong. HTTP answers it as `{"error": {code, message}}`, the
/// WebSocket gateway as an error `res`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status it answers with.
    pub status: StatusCode,
    /// The stable code (`unknown_task`, `invalid_query`, …).
    pub code: &'static str,
    /// What was wrong, naming the field or entity.
    pub message: String,
}

impl Failure {
    /// A failure with its status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl std::fmt::Display) -> Self {
        Self {
            status,
            code,
            message: message.to_string(),
        }
    }

    /// A bus error as the API reports it (409 a reused request id, 400 an invalid task, else
    /// 503).
    pub fn bus(e: BusError) -> Self {
        match e {
            BusError::Conflict { .. } => {
                Self::new(StatusCode::CONFLICT, "request_id_conflict", e.to_string())
            }
            BusError::Invalid(_) => {
                Self::new(StatusCode::BAD_REQUEST, "invalid_task", e.to_string())
            }
            e => {
                tracing::error!(error = %e, "Bus error in the API.");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "bus", e.to_string())
            }
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        error(self.status, self.code, self.message)
    }
}

/// The record of task `id` (a UUID): 400 `invalid_task_id`, 404 `unknown_task`.
pub(super) async fn task_by_id(state: &ApiState, id: &str) -> Result<TaskRecord, Failure> {
    let Ok(task_id) = uuid::Uuid::parse_str(id) else {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_task_id",
            format!("{id:?} is not a task id (a UUID)"),
        ));
    };
    match state.bus.task(task_id).await {
        Ok(Some(rec)) => Ok(rec),
        Ok(None) => Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_task",
            format!("no task {id}"),
        )),
        Err(e) => Err(Failure::bus(e)),
    }
}

/// The agents as `GET /v1/agents` lists them.
pub(super) fn agent_rows(config: &Config) -> Vec<serde_json::Value> {
    config
        .agents
        .iter()
        .map(|a| json!({ "id": a.id.as_str(), "model": a.model.to_string(), "description": a.description }))
        .collect()
}

pub(super) fn error(status: StatusCode, code: &str, message: impl std::fmt::Display) -> Response {
    (
        status,
        Json(json!({ "error": { "code": code, "message": message.to_string() } })),
    )
        .into_response()
}

pub(super) fn bus_error(e: BusError) -> Response {
    Failure::bus(e).into_response()
}

/// The lane a request names, checked against the configured lanes.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
pub(super) fn lane(config: &Config, lane: Option<&str>) -> Result<String, Response> {
    lane_of(config, lane).map_err(IntoResponse::into_response)
}

/// The lane a request names (`main` when none), checked against the configured lanes: 400
/// `unknown_lane` naming them.
pub(super) fn lane_of(config: &Config, lane: Option<&str>) -> Result<String, Failure> {
    let lane = lane.unwrap_or(clawbus_core::config::MAIN_LANE);
    if config.lanes.caps.contains_key(lane) {
        return Ok(lane.to_string());
    }
    let known: Vec<&str> = config.lanes.caps.keys().map(String::as_str).collect();
    Err(Failure::new(
        StatusCode::BAD_REQUEST,
        "unknown_lane",
        format!(
            "lane: unknown lane {lane:?} (configured: {})",
            known.join(", ")
        ),
    ))
}

/// Submits a request through the ingress pipeline and answers as the task API does: at once,
/// or after waiting for its outcome. A refusal is answered as `refused` makes it (a hint added).
pub(super) async fn submit_and_answer(
    state: &ApiState,
    req: Request,
    wait: bool,
    timeout_ms: Option<u64>,
    refused: impl FnOnce(Failure) -> Failure,
) -> Response {
    let request_id = req.request_id.clone();
    let submitted = match super::admit::submit(state, req).await {
        Ok(s) => s,
        Err(f) => return refused(f).into_response(),
    };
    if !wait {
        return TaskView::response(&submitted.task, submitted.duplicate);
    }
    let wait = timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_WAIT)
        .min(MAX_WAIT);
    match state
        .ingress()
        .wait(&request_id, wait, &submitted.task)
        .await
    {
        Ok(waited) => TaskView::response(waited.record(), submitted.duplicate),
        Err(e) => super::admit::failure(e).into_response(),
    }
}

/// The request id a caller chose (body field, else the `Idempotency-Key` header), or a fresh one;
/// both given and different: 400 `invalid_request_id`.
// The error is the handler's whole answer, returned at once: boxing it would gain nothing.
#[allow(clippy::result_large_err)]
pub(super) fn request_id(body: Option<&str>, headers: &HeaderMap) -> Result<RequestId, Response> {
    let header = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(h)) => Some(h),
        Some(Err(_)) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_id",
                "header Idempotency-Key: not visible ASCII",
            ));
        }
    };
    if let (Some(b), Some(h)) = (body, header)
        && b != h
    {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_id",
            format!(
                "request_id {b:?} differs from header Idempotency-Key {h:?} (send one, or the same in both)"
            ),
        ));
    }
    match body.or(header).map(RequestId::parse) {
        None => Ok(RequestId::random()),
        Some(Ok(id)) => Ok(id),
        Some(Err(e)) => Err(error(StatusCode::BAD_REQUEST, "invalid_request_id", e)),
    }
}

async fn list_agents(State(state): State<ApiState>) -> Response {
    Json(json!({ "agents": agent_rows(&state.config) })).into_response()
}

async fn post_task(
    State(state): State<ApiState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    body: Result<Json<TaskRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match self::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    if body.text.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "text: empty (expected the message for the agent)",
        );
    }
    if body.broadcast {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "broadcast: only for shared topics (POST /v1/topics/{topic}/tasks); a task for one agent goes to that agent",
        );
    }
    if state.config.agent(&agent).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("no agent \"{agent}\""),
        );
    }
    let request_id = match request_id(body.request_id.as_deref(), &headers) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let mut origin = Origin::api();
    origin.lane = match lane(&state.config, body.lane.as_deref()) {
        Ok(l) => l,
        Err(answer) => return answer,
    };
    origin.max_attempts = match max_attempts(body.max_attempts) {
        Ok(n) => n,
        Err(answer) => return answer,
    };
    if let Some(session) = &body.session {
        match SessionName::parse("session", session) {
            Ok(name) => origin.session_name = Some(name.to_string()),
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_session", e.to_string()),
        }
    }
    let mut req = Request::new(
        Target::Agent(AgentId::new(agent)),
        request_id,
        body.text,
        "http",
        origin,
    );
    req.deadline_ms = body
        .deadline_ms
        .map(|ms| state.clock.now_ms().saturating_add(ms));
    submit_and_answer(
        &state,
        req,
        body.wait,
        body.timeout_ms,
        std::convert::identity,
    )
    .await
}

async fn get_task(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    match task_by_id(&state, &id).await {
        Ok(rec) => (StatusCode::OK, Json(TaskAnswer::of(&rec, false))).into_response(),
        Err(f) => f.into_response(),
    }
}
