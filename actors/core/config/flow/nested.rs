//! Flows that run flows (`flow = "name"` nodes), checked across every flow: the flow each names
//! exists, the inputs it gives are the child's and cover its required ones, and no chain of flows
//! comes back to itself. Each problem stands at the node's `flow = "…"`.

use super::FlowDef;
use crate::config::Problem;
use std::collections::BTreeMap;

/// Problems of the `flow` nodes of `checked` against the flows `known` by name (a flow in both
/// is taken from `checked`). Cycles are reported once, at the node that closes them.
pub fn check_nested(checked: &[FlowDef], known: &[FlowDef]) -> Vec<Problem> {
    let mut all: BTreeMap<&str, &FlowDef> = known.iter().map(|f| (f.name.as_str(), f)).collect();
    all.extend(checked.iter().map(|f| (f.name.as_str(), f)));
    let mut problems = Vec::new();
    for flow in checked {
        references(flow, &all, &mut problems);
    }
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    for flow in checked {
        if !mark.contains_key(flow.name.as_str()) {
            visit(flow, &all, &mut mark, &mut Vec::new(), &mut problems);
        }
    }
    problems
}

fn at(
    flow: &FlowDef,
    node: usize,
    line: usize,
    col: usize,
    field: &str,
    message: String,
) -> Problem {
    Problem {
        path: flow.path.clone(),
        line,
        col,
        field: format!("node[{node}].{field}"),
        message,
    }
}

/// The child flows named by `flow`'s nodes exist and get only inputs they declare, and every
/// input they require.
fn references(flow: &FlowDef, all: &BTreeMap<&str, &FlowDef>, problems: &mut Vec<Problem>) {
    for (i, node) in flow.nodes.iter().enumerate() {
        let Some(sub) = &node.flow else {
            continue;
        };
        let Some(child) = all.get(sub.name.as_str()) else {
            let names: Vec<&str> = all.keys().copied().collect();
            problems.push(at(
                flow,
                i,
                sub.line,
                sub.col,
                "flow",
                format!(
                    "unknown flow {:?} (expected one of: {})",
                    sub.name,
                    names.join(", ")
                ),
            ));
            continue;
        };
        for name in sub.inputs.keys() {
            if !child.inputs.iter().any(|d| &d.name == name) {
                let names: Vec<&str> = child.inputs.iter().map(|d| d.name.as_str()).collect();
                problems.push(at(
                    flow,
                    i,
                    sub.line,
                    sub.col,
                    &format!("inputs.{name}"),
                    format!(
                        "flow {:?} has no input {name:?} (expected one of: {})",
                        sub.name,
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
        }
        for d in &child.inputs {
            if d.default.is_none() && !sub.inputs.contains_key(&d.name) {
                problems.push(at(
                    flow,
                    i,
                    sub.line,
                    sub.col,
                    "inputs",
                    format!(
                        "flow {:?} requires input {:?} (expected inputs = {{ {} = \"…\" }})",
                        sub.name, d.name, d.name
                    ),
                ));
            }
        }
    }
}

/// Depth first over flows: a flow met again while on the stack closes a cycle.
fn visit<'a>(
    flow: &'a FlowDef,
    all: &BTreeMap<&'a str, &'a FlowDef>,
    mark: &mut BTreeMap<&'a str, u8>,
    stack: &mut Vec<&'a str>,
    problems: &mut Vec<Problem>,
) {
    mark.insert(&flow.name, 1);
    stack.push(&flow.name);
    for (i, node) in flow.nodes.iter().enumerate() {
        let Some(sub) = &node.flow else {
            continue;
        };
        let Some(child) = all.get(sub.name.as_str()) else {
            continue;
        };
        match mark.get(child.name.as_str()) {
            Some(1) => {
                let from = stack.iter().position(|s| *s == child.name).unwrap_or(0);
                let mut names: Vec<&str> = stack[from..].to_vec();
                names.push(&child.name);
                problems.push(at(
                    flow,
                    i,
                    sub.line,
                    sub.col,
                    "flow",
                    format!(
                        "flow cycle: {} (expected flows that do not run themselves)",
                        names.join(" → ")
                    ),
                ));
            }
            Some(_) => {}
            None => visit(child, all, mark, stack, problems),
        }
    }
    stack.pop();
    mark.insert(&flow.name, 2);
}
