//! The flow engine's start topic ([`bus::Topic::flow_starts`]): a task there (a cron job's
//! `flow` payload, submitted through the ingress like any fire) starts a run of the flow it
//! names under the task's request id, so a fire starts one run however often it is delivered,
//! and the task ends when the run does: succeeded with the run's summary, or failed.

use super::{FlowError, FlowRun, Flows, RunState};
use bus::{BusError, Delivery, Outcome, Topic};
use clawbus_core::jobs::FlowStart;
use clawbus_core::task::TaskInput;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one wait for a run lasts before it is renewed.
const WAIT_SLICE: Duration = Duration::from_secs(60);

impl Flows {
    /// Consumes the start topic until the bus closes it: each task starts (or, delivered again,
    /// finds) its run and ends with it.
    pub async fn serve_starts(&self) -> Result<(), BusError> {
        let mut sub = self.inner.bus.consume(Topic::flow_starts()).await?;
        let flows = self.clone();
        let consumer = async move {
            while let Some(d) = sub.next().await {
                let flows = flows.clone();
                tokio::spawn(async move { flows.serve_one(d).await });
            }
        };
        if let Ok(mut d) = self.inner.drivers.lock() {
            d.spawn(consumer);
        }
        Ok(())
    }

    async fn serve_one(&self, d: Delivery) {
        match d.start().await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "flow: a start task was not taken");
                return;
            }
        }
        let request_id = d.envelope().request_id.to_string();
        let outcome = match self.run_start(&d, &request_id).await {
            Ok(run) => outcome_of(&run),
            Err(e) => {
                tracing::warn!(request_id = %request_id, error = %e, "flow: a start task failed");
                Outcome::Failed {
                    error: e.to_string(),
                }
            }
        };
        if let Err(e) = d.complete(outcome).await {
            tracing::warn!(request_id = %request_id, error = %e, "flow: a start task's end was not recorded");
        }
    }

    /// Starts (or finds) the run a start task asks for, and awaits its end.
    async fn run_start(&self, d: &Delivery, request_id: &str) -> Result<FlowRun, FlowError> {
        let text = TaskInput::text_of(&d.envelope().payload)
            .map_err(|e| FlowError::Inputs(e.to_string()))?;
        let start = FlowStart::parse(text).map_err(FlowError::Inputs)?;
        let inputs: BTreeMap<String, Value> = start
            .inputs
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let started = self
            .start_named(&start.flow, &inputs, Some(request_id.to_string()))
            .await?;
        tracing::info!(run = %started.run.id, flow = %start.flow, request_id, "Flow run started by a task.");
        loop {
            let run = self.wait(&started.run.id, WAIT_SLICE).await?;
            if run.state.is_terminal() {
                return Ok(run);
            }
        }
    }
}

/// A run's end as the start task's outcome: the summary as its text.
fn outcome_of(run: &FlowRun) -> Outcome {
    let summary = json!({
        "run": run.id,
        "flow": run.def.name,
        "state": run.state,
        "output": run.output(),
    });
    match run.state {
        RunState::Succeeded => Outcome::Succeeded {
            result: json!({ "text": summary.to_string() }),
        },
        state => Outcome::Failed {
            error: format!(
                "flow \"{}\" (run {}) ended {}",
                run.def.name,
                run.id,
                state.as_str()
            ),
        },
    }
}
