//! Tasks for shared topics: `POST /v1/topics/{topic}/tasks` posts to a topic agents subscribe to
//! (`subscribe = ["team.research"]`); exactly one subscriber runs each task — or, with
//! `broadcast: true`, every subscriber runs one of its own, as the members of one group task.

use super::api::{
    ApiState, BroadcastMember, DEFAULT_WAIT, MAX_WAIT, TaskRequest, TaskView, body, bus_error,
    error, lane, max_attempts, request_id, submit_and_answer,
};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use bus::{BusError, RequestId, Topic};
use clawbus_core::ids::AgentId;
use clawbus_core::ids::SessionKey;
use clawbus_runtime::ingress::{Duplicates, Request, Target};
use clawbus_runtime::origin::Origin;
use std::time::Duration;

/// The topic routes (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/topics/{topic}/tasks", post(post_topic_task))
}

async fn post_topic_task(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    raw: Result<Json<TaskRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let req = match body(&state, raw) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let topic = match clawbus_core::config::subscribe::shared_topic(&topic) {
        Ok(t) => t,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_topic",
                format!("{e}; post to one agent with POST /v1/agents/{{id}}/tasks"),
            );
        }
    };
    if req.text.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "text: empty (expected the message for the agent)",
        );
    }
    if req.session.is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "session: not taken by a shared topic (each task runs in a session of its own on the agent that takes it)",
        );
    }
    let subscribers: Vec<&AgentId> = state
        .config
        .agents
        .iter()
        .filter(|a| a.subscribe.contains(&topic))
        .map(|a| &a.id)
        .collect();
    if subscribers.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_topic",
            format!(
                "no agent subscribes to topic \"{topic}\" (see subscribe in agents.d/<id>.toml)"
            ),
        );
    }
    let request_id = match request_id(req.request_id.as_deref(), &headers) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let mut origin = Origin::api();
    origin.lane = match lane(&state.config, req.lane.as_deref()) {
        Ok(l) => l,
        Err(answer) => return answer,
    };
    origin.max_attempts = match max_attempts(req.max_attempts) {
        Ok(n) => n,
        Err(answer) => return answer,
    };
    let deadline = req
        .deadline_ms
        .map(|ms| state.clock.now_ms().saturating_add(ms));
    if req.broadcast {
        return broadcast(
            &state,
            &req,
            topic,
            request_id,
            origin,
            deadline,
            &subscribers,
        )
        .await;
    }
    let mut task = Request::new(Target::Topic(topic), request_id, req.text, "http", origin);
    task.deadline_ms = deadline;
    submit_and_answer(
        &state,
        task,
        req.wait,
        req.timeout_ms,
        std::convert::identity,
    )
    .await
}

/// The request id of `agent`'s member task in broadcast group `group`.
fn member_request_id(group: &RequestId, agent: &str) -> Result<RequestId, bus::RequestIdError> {
    RequestId::parse(&format!("{group}/{agent}"))
}

/// A broadcast: a group task on `broadcast.<topic>` (nobody consumes it; the task coordinator
/// ends it once every member has ended, with their answers) and one member task per subscriber,
/// posted to the agent itself, each its own task with the group as its parent.
async fn broadcast(
    state: &ApiState,
    req: &TaskRequest,
    topic: Topic,
    group_id: RequestId,
    origin: Origin,
    deadline: Option<u64>,
    subscribers: &[&AgentId],
) -> Response {
    let ingress = state.ingress();
    // Every task of a group is the same work whatever its place: the bus's comparison.
    let request = |target, rid, origin| Request {
        deadline_ms: deadline,
        duplicates: Duplicates::SameWork,
        ..Request::new(target, rid, req.text.clone(), "http", origin)
    };
    let group = Origin {
        members: Some(subscribers.len() as u32),
        ..origin.clone()
    };
    let group_task = request(
        Target::Topic(Topic::broadcast_group(&topic)),
        group_id.clone(),
        group,
    );
    let admission = match ingress.submit(group_task).await {
        Ok(a) => a,
        Err(e) => return super::admit::failure(e).into_response(),
    };
    let mut members = Vec::new();
    for agent in subscribers {
        let rid = match member_request_id(&group_id, agent.as_str()) {
            Ok(id) => id,
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request_id", e),
        };
        let member = Origin {
            parent_task: Some(admission.task.task_id),
            session_key: Some(SessionKey::shared_topic(
                agent,
                topic.as_str(),
                rid.as_str(),
            )),
            ..origin.clone()
        };
        let member_task = request(Target::Agent((*agent).clone()), rid.clone(), member);
        // A repeated broadcast finds its members answered from the store, as the group is.
        match ingress.submit(member_task).await {
            Ok(m) => members.push(BroadcastMember {
                agent: agent.to_string(),
                task_id: m.task.task_id.to_string(),
                request_id: rid.to_string(),
            }),
            Err(e) => return super::admit::failure(e).into_response(),
        }
    }
    let mut record = admission.task;
    if req.wait && !record.state.is_terminal() {
        let wait = req
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_WAIT)
            .min(MAX_WAIT);
        match state.bus.wait(&group_id, wait).await {
            Ok(done) => record = done,
            Err(BusError::TimedOut { .. }) => {}
            Err(e) => return bus_error(e),
        }
    }
    let mut view = TaskView::of(&record, admission.duplicate);
    view.members = members;
    let status = if record.state.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    (status, Json(view)).into_response()
}
