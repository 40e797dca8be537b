//! A node that runs another flow: its item starts a child run under the item's request id (so a
//! resumed parent finds the child it started instead of starting another), awaits its end, and
//! turns it into the item's verdict — the child's output, its cancel, or its failure.

use super::super::{FlowError, FlowRun, Flows, RunState};
use super::Start;
use super::task::Verdict;
use clawbus_core::config::flow::NodeDef;
use clawbus_core::config::retry::ErrorClass;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one wait for the child lasts before it is renewed.
const WAIT_SLICE: Duration = Duration::from_secs(60);

/// Starts (or finds) the child run of `s` (an item of run `parent`) and awaits it. The child's
/// deadline is clipped to `deadline_ms`, the node's (its `timeout`, within the parent flow's).
pub(super) async fn run(
    flows: &Flows,
    parent: &str,
    node: &NodeDef,
    s: &Start,
    deadline_ms: Option<u64>,
) -> Verdict {
    match child(flows, parent, node, s, deadline_ms).await {
        Ok(run) => verdict(&run),
        Err(e) => Verdict::Retry {
            class: Some(ErrorClass::InvalidInput),
            error: e.to_string(),
            errors: None,
        },
    }
}

async fn child(
    flows: &Flows,
    parent: &str,
    node: &NodeDef,
    s: &Start,
    deadline_ms: Option<u64>,
) -> Result<FlowRun, FlowError> {
    let name = node.flow.as_ref().map_or("", |f| f.name.as_str());
    let def = flows
        .def(name)
        .cloned()
        .ok_or_else(|| FlowError::UnknownFlow(name.to_string()))?;
    let inputs: BTreeMap<String, Value> = serde_json::from_str(&s.prompt)
        .map_err(|e| FlowError::Inputs(format!("the child run's inputs: {e}")))?;
    let started = flows
        .start_within(def, &inputs, Some(s.request_id.clone()), deadline_ms)
        .await?;
    let id = started.run.id;
    // A cancel of the parent that came before the child was claimed did not reach it: the
    // parent's driver cancels the children it finds claimed, this covers the rest.
    if let Some(reason) = flows.inner.store.cancelled(parent)? {
        flows.cancel(&id, &reason).await?;
    }
    tracing::info!(node = %node.id, child = %id, flow = name, "Flow node runs a child flow.");
    loop {
        let run = flows.wait(&id, WAIT_SLICE).await?;
        if run.state.is_terminal() {
            return Ok(run);
        }
    }
}

fn verdict(run: &FlowRun) -> Verdict {
    match run.state {
        RunState::Succeeded => Verdict::Output(run.output()),
        RunState::Cancelled => Verdict::Cancelled(
            run.cancelled
                .clone()
                .unwrap_or_else(|| "the child run was cancelled".into()),
        ),
        state => {
            let first = run
                .def
                .nodes
                .iter()
                .filter_map(|d| run.nodes.get(&d.id).map(|n| (d, n)))
                .find_map(|(d, n)| {
                    n.error
                        .as_ref()
                        .map(|e| format!(": node \"{}\": {e}", d.id))
                })
                .unwrap_or_default();
            Verdict::Retry {
                // The child's nodes had their own attempts: the parent does not run it again.
                class: Some(ErrorClass::InvalidInput),
                error: format!(
                    "child flow \"{}\" (run {}) ended {}{first}",
                    run.def.name,
                    run.id,
                    state.as_str()
                ),
                errors: None,
            }
        }
    }
}
