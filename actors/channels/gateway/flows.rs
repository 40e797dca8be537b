//! Flows over HTTP: `GET /v1/flows` (the flows of `flows.d/`), `POST /v1/flows/{name}/runs` and
//! `POST /v1/flow-runs` (a flow file's text) start a run, `GET /v1/flow-runs` lists runs,
//! `GET /v1/flow-runs/{id}` shows one with every node, `POST /v1/flow-runs/{id}/cancel` cancels
//! it, `GET /v1/flow-runs/{id}/events` streams its events as SSE.

use super::api::{ApiState, DEFAULT_WAIT, Failure, MAX_WAIT};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawbus_runtime::flow::{FlowError, FlowEvent, FlowEventKind, FlowRun};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

/// The flow routes (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/flows", get(list_flows))
        .route("/flows/{name}/runs", post(start_named))
        .route("/flow-runs", get(list_runs).post(start_file))
        .route("/flow-runs/{id}", get(show))
        .route("/flow-runs/{id}/cancel", post(cancel))
        .route("/flow-runs/{id}/events", get(events))
}

/// The body of a run request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunBody {
    /// Input values by name (text is read as the input's type).
    #[serde(default)]
    pub inputs: BTreeMap<String, Value>,
    /// Starts the run at most once.
    pub request_id: Option<String>,
    /// Answer when the run has ended (or the wait ran out: 202).
    #[serde(default)]
    pub wait: bool,
    /// How long to wait, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `POST /v1/flow-runs`: the flow file's text.
    pub source: Option<String>,
    /// `POST /v1/flow-runs`: the file's name, for problems.
    pub path: Option<String>,
}

/// A flow error as the API answers it: 404 unknown flow or run, 400 bad inputs, 409 a request
/// id that started another flow, 503 the store.
pub(super) fn failure(e: FlowError) -> Failure {
    match e {
        e @ (FlowError::UnknownFlow(_) | FlowError::UnknownRun(_)) => {
            Failure::new(StatusCode::NOT_FOUND, "unknown_flow", e.to_string())
        }
        e @ FlowError::Inputs(_) => {
            Failure::new(StatusCode::BAD_REQUEST, "invalid_inputs", e.to_string())
        }
        e @ FlowError::Conflict { .. } => {
            Failure::new(StatusCode::CONFLICT, "request_id_conflict", e.to_string())
        }
        e => {
            tracing::error!(error = %e, "Flow store error in the API.");
            Failure::new(StatusCode::SERVICE_UNAVAILABLE, "storage", e.to_string())
        }
    }
}

/// A run as the API shows it: nodes in flow order with state, attempts, duration, error.
pub(crate) fn view(run: &FlowRun, now_ms: u64) -> Value {
    let nodes: Vec<Value> = run
        .def
        .nodes
        .iter()
        .filter_map(|d| run.nodes.get(&d.id).map(|n| (d, n)))
        .map(|(d, n)| {
            json!({
                "id": d.id,
                "agent": d.agent.as_ref().map(|a| a.as_str()),
                "flow": d.flow.as_ref().map(|f| f.name.as_str()),
                "state": n.state,
                "attempts": n.attempts,
                "duration_ms": n.duration_ms(now_ms),
                "error": n.error,
                "reason": n.reason,
                "output": n.output,
            })
        })
        .collect();
    json!({
        "id": run.id,
        "flow": run.def.name,
        "state": run.state,
        "request_id": run.request_id,
        "inputs": run.inputs,
        "created_ms": run.created_ms,
        "ended_ms": run.ended_ms,
        "cancelled": run.cancelled,
        "nodes": nodes,
    })
}

async fn list_flows(State(state): State<ApiState>) -> Response {
    Json(json!({ "flows": rows(&state) })).into_response()
}

/// Each flow the gateway knows: name, description, file, nodes, inputs.
pub(super) fn rows(state: &ApiState) -> Vec<Value> {
    state
        .flows
        .defs()
        .map(|d| {
            json!({
                "name": d.name,
                "description": d.description,
                "path": d.path,
                "nodes": d.nodes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
                "inputs": d.inputs.iter().map(|i| json!({
                    "name": i.name, "type": i.kind, "default": i.default, "description": i.description,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

async fn start_named(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Json(body): Json<RunBody>,
) -> Response {
    let Some(def) = state.flows.def(&name).cloned() else {
        return failure(FlowError::UnknownFlow(name)).into_response();
    };
    start(&state, def, body).await
}

async fn start_file(State(state): State<ApiState>, Json(body): Json<RunBody>) -> Response {
    let Some(source) = &body.source else {
        return Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_flow",
            "missing \"source\" (expected the text of a flow file)",
        )
        .into_response();
    };
    let path = std::path::PathBuf::from(body.path.clone().unwrap_or_else(|| "<flow>".into()));
    let agents: Vec<_> = state.config.agents.iter().map(|a| a.id.clone()).collect();
    let lanes: Vec<String> = state.config.lanes.caps.keys().cloned().collect();
    let (def, mut problems) =
        clawbus_runtime::config::flow::check_text(&path, source, &agents, &lanes);
    if let Some(d) = &def {
        let known: Vec<_> = state.flows.defs().cloned().collect();
        problems.extend(clawbus_runtime::config::flow::check_nested(
            std::slice::from_ref(d),
            &known,
        ));
    }
    let def = def.filter(|_| problems.is_empty());
    let Some(def) = def else {
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Failure::new(StatusCode::BAD_REQUEST, "invalid_flow", text.join("\n"))
            .into_response();
    };
    start(&state, def, body).await
}

async fn start(
    state: &ApiState,
    def: clawbus_runtime::config::flow::FlowDef,
    body: RunBody,
) -> Response {
    let started = match state.flows.start(def, &body.inputs, body.request_id).await {
        Ok(s) => s,
        Err(e) => return failure(e).into_response(),
    };
    let mut run = started.run;
    if body.wait {
        let wait = body
            .timeout_ms
            .map_or(DEFAULT_WAIT, Duration::from_millis)
            .min(MAX_WAIT);
        match state.flows.wait(&run.id, wait).await {
            Ok(r) => run = r,
            Err(e) => return failure(e).into_response(),
        }
    }
    let status = if run.state.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let mut v = view(&run, state.clock.now_ms());
    v["duplicate"] = json!(started.duplicate);
    (status, Json(v)).into_response()
}

async fn list_runs(State(state): State<ApiState>) -> Response {
    match state.flows.runs() {
        Ok(runs) => {
            let now = state.clock.now_ms();
            let rows: Vec<Value> = runs.iter().map(|r| view(r, now)).collect();
            Json(json!({ "runs": rows })).into_response()
        }
        Err(e) => failure(e).into_response(),
    }
}

async fn run_by_id(state: &ApiState, id: &str) -> Result<FlowRun, Failure> {
    match state.flows.get(id) {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(failure(FlowError::UnknownRun(id.to_string()))),
        Err(e) => Err(failure(e)),
    }
}

async fn show(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    match run_by_id(&state, &id).await {
        Ok(run) => Json(view(&run, state.clock.now_ms())).into_response(),
        Err(f) => f.into_response(),
    }
}

async fn cancel(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    match state.flows.cancel(&id, "cancelled over the API").await {
        Ok(run) => Json(view(&run, state.clock.now_ms())).into_response(),
        Err(e) => failure(e).into_response(),
    }
}

/// SSE: `run` (the run as it stands), then each event live, ending after `run_finished`.
async fn events(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    // Subscribe before reading the record, so no event falls between the two.
    let sub = match state.flows.events(&id).await {
        Ok(s) => s,
        Err(e) => return Failure::bus(e).into_response(),
    };
    let run = match run_by_id(&state, &id).await {
        Ok(r) => r,
        Err(f) => return f.into_response(),
    };
    let first = Event::default()
        .event("run")
        .json_data(view(&run, state.clock.now_ms()))
        .unwrap_or_else(|e| Event::default().comment(format!("unencodable run: {e}")));
    let done = run.state.is_terminal();
    let live = futures::stream::unfold((sub, done), |(mut sub, done)| async move {
        if done {
            return None;
        }
        let d = sub.next().await?;
        let e: FlowEvent = serde_json::from_value(d.envelope().payload.clone()).ok()?;
        let end = e.kind == FlowEventKind::RunFinished;
        let name = serde_json::to_value(e.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "event".into());
        let sse = Event::default()
            .event(name)
            .json_data(&e)
            .unwrap_or_else(|e| Event::default().comment(format!("unencodable event: {e}")));
        Some((Ok::<_, Infallible>(sse), (sub, end)))
    });
    let stream = futures::StreamExt::chain(
        futures::stream::once(async move { Ok::<_, Infallible>(first) }),
        live,
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
