//! Usage and cost over HTTP: `GET /v1/usage[?agent=ID&since=24h]` sums the `usage` on the
//! results of the tasks in the store (those inside the dedup window), per agent and the model
//! that answered.

use super::api::{ApiState, bus_error, error, query};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bus::{Outcome, TaskRecord};
use clawbus_core::task::TaskResult;
use clawbus_runtime::turn::usage::TurnUsage;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The route of usage sums.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/usage", get(summary))
}

/// The query of `GET /v1/usage`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    /// Only the usage of this agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only tasks that ended within this duration (`24h`, `30m`).
    #[serde(default)]
    pub since: Option<String>,
}

/// The sums of one agent and model (or of everything).
#[derive(Debug, Default)]
struct Sum {
    tasks: u64,
    tokens: TurnUsage,
    cost_usd: Option<f64>,
}

impl Sum {
    /// Adds one task's tokens and cost.
    fn add(&mut self, usage: &TurnUsage, cost: Option<f64>) {
        self.tasks += 1;
        self.tokens.add(usage);
        if let Some(c) = cost {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }

    fn json(&self, head: Value) -> Value {
        let mut v = head;
        if let (Some(obj), Value::Object(tokens)) = (
            v.as_object_mut(),
            serde_json::to_value(self.tokens).unwrap_or(Value::Null),
        ) {
            obj.insert("tasks".into(), json!(self.tasks));
            obj.extend(tokens);
            obj.insert("estimated".into(), json!(self.tokens.estimated));
            if let Some(c) = self.cost_usd {
                obj.insert("cost_usd".into(), json!(c));
            }
        }
        v
    }
}

/// The usage a finished task's result carries: its agent, its total tokens and cost, and the
/// tokens and cost of each model that answered (`models`; a record written before the models
/// were kept apart counts whole under its `model`).
struct TaskUsage {
    agent: String,
    total: (TurnUsage, Option<f64>),
    models: Vec<(String, TurnUsage, Option<f64>)>,
}

fn usage_of(record: &TaskRecord) -> Option<TaskUsage> {
    let Some(Outcome::Succeeded { result }) = &record.outcome else {
        return None;
    };
    let raw = TaskResult::usage_of(result)?;
    let tokens = |v: &Value| serde_json::from_value::<TurnUsage>(v.clone()).ok();
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let cost = |v: &Value| v.get("cost_usd").and_then(Value::as_f64);
    let total = tokens(raw)?;
    let models = match raw.get("models").and_then(Value::as_array) {
        Some(models) => models
            .iter()
            .filter_map(|m| Some((text(m, "model"), tokens(m)?, cost(m))))
            .collect(),
        None => vec![(text(raw, "model"), total, cost(raw))],
    };
    Some(TaskUsage {
        agent: text(raw, "agent"),
        total: (total, cost(raw)),
        models,
    })
}

async fn summary(
    State(state): State<ApiState>,
    q: Result<axum::extract::Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(answer) => return answer,
    };
    if let Some(agent) = &q.agent {
        if state.config.agent(agent).is_none() {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_agent",
                format!("no agent \"{agent}\""),
            );
        }
    }
    let since_ms = match q.since.as_deref().map(clawbus_core::config::parse_duration) {
        None => None,
        Some(Ok(d)) => Some(
            state
                .clock
                .now_ms()
                .saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ),
        Some(Err(e)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("since: {e}"),
            );
        }
    };
    let all = match state.bus.tasks().await {
        Ok(all) => all,
        Err(e) => return bus_error(e),
    };
    let mut rows: BTreeMap<(String, String), Sum> = BTreeMap::new();
    let mut total = Sum::default();
    for record in &all {
        if since_ms.is_some_and(|s| record.updated_ms < s) {
            continue;
        }
        let Some(task) = usage_of(record) else {
            continue;
        };
        if q.agent.as_ref().is_some_and(|a| *a != task.agent) {
            continue;
        }
        for (model, usage, cost) in &task.models {
            rows.entry((task.agent.clone(), model.clone()))
                .or_default()
                .add(usage, *cost);
        }
        total.add(&task.total.0, task.total.1);
    }
    let rows: Vec<Value> = rows
        .iter()
        .map(|((agent, model), sum)| sum.json(json!({ "agent": agent, "model": model })))
        .collect();
    Json(json!({
        "since_ms": since_ms,
        "rows": rows,
        "total": total.json(json!({})),
    }))
    .into_response()
}
