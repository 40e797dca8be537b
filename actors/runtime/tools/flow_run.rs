//! The `flow_run` tool: an agent starts a flow of `flows.d/` and (with `wait`) gets its outcome.
//! No profile grants it: an agent has it only when its `[tools] allow` names it.
//!
//! The run's request id comes from the calling task's, the flow and its inputs, so a run resumed
//! after a crash that calls the tool again joins the run it had started.

use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::flow::{FlowError, FlowRun, Flows};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// The longest `wait` waits when the run has no deadline.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// `flow_run {flow, inputs?, wait?}` over the process's flow engine.
#[derive(Debug, Clone)]
pub(crate) struct FlowRunTool {
    flows: Option<Flows>,
}

impl FlowRunTool {
    /// A tool starting runs on `flows` (`None`: unavailable).
    pub(crate) fn new(flows: Option<Flows>) -> Self {
        Self { flows }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    flow: String,
    #[serde(default)]
    inputs: BTreeMap<String, Value>,
    #[serde(default)]
    wait: bool,
}

/// What the model sees of a run: its state and each node's state, output and error.
fn summary(run: &FlowRun) -> Value {
    let nodes: serde_json::Map<String, Value> = run
        .def
        .nodes
        .iter()
        .filter_map(|d| run.nodes.get(&d.id).map(|n| (d, n)))
        .map(|(d, n)| {
            let v = json!({ "state": n.state, "output": n.output, "error": n.error, "reason": n.reason });
            (d.id.clone(), v)
        })
        .collect();
    json!({ "run_id": run.id, "flow": run.def.name, "state": run.state, "nodes": nodes })
}

fn request_id(ctx: &ToolContext, args: &Args) -> Option<String> {
    let run = ctx.run.as_ref()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&args.inputs)
        .unwrap_or_default()
        .hash(&mut h);
    Some(format!(
        "{}:flow_run:{}:{:016x}",
        run.request_id,
        args.flow,
        h.finish()
    ))
}

#[async_trait]
impl Tool for FlowRunTool {
    fn name(&self) -> &'static str {
        "flow_run"
    }

    fn description(&self) -> &'static str {
        "Start a flow (a graph of agent tasks defined by the operator) by name, with its inputs. \
         With wait, answers when it has ended: its state and every node's output or error."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "flow": { "type": "string", "description": "The flow's name." },
                "inputs": { "type": "object", "description": "Input values by name." },
                "wait": { "type": "boolean", "description": "Wait for the run to end (default false)." }
            },
            "required": ["flow"],
            "additionalProperties": false
        })
    }

    fn available(&self) -> Result<(), String> {
        match self.flows {
            Some(_) => Ok(()),
            None => Err("no flow engine in this process".into()),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args: Args = match parse_args("flow_run", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let Some(flows) = &self.flows else {
            return ToolOutput::error("unavailable", "flow_run: no flow engine in this process");
        };
        let rid = request_id(ctx, &args);
        let started = match flows.start_named(&args.flow, &args.inputs, rid).await {
            Ok(s) => s,
            Err(e @ FlowError::UnknownFlow(_)) => return ToolOutput::error("not_found", e),
            Err(e @ FlowError::Inputs(_)) => return ToolOutput::error("invalid_arguments", e),
            Err(e) => {
                tracing::warn!(agent = %ctx.agent, error = %e, "flow_run: the run did not start.");
                return ToolOutput::error("internal", "the flow could not be started");
            }
        };
        let mut run = started.run;
        if args.wait {
            let wait = ctx
                .run
                .as_ref()
                .and_then(|r| r.deadline_ms.map(|d| d.saturating_sub(r.clock.now_ms())))
                .map_or(MAX_WAIT, Duration::from_millis)
                .min(MAX_WAIT);
            // Waiting holds no lane slot: the flow's own tasks may need it.
            if let Some(r) = &ctx.run {
                r.slot.release().await;
            }
            let waited = flows.wait(&run.id, wait).await;
            if let Some(r) = &ctx.run
                && let Err(e) = r.slot.reacquire().await
            {
                return ToolOutput::error(
                    "unavailable",
                    format!("could not take the lane slot back: {e}"),
                );
            }
            match waited {
                Ok(r) => run = r,
                Err(e) => return ToolOutput::error("internal", e),
            }
        }
        ToolOutput::ok(summary(&run).to_string())
    }
}
