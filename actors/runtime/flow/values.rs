//! What a template or condition reference means in a run: inputs, upstream outputs, errors and
//! states, the `for_each` item.

use super::run::{FlowRun, NodeState};
use clawbus_core::config::flow::template::{Clause, Condition, Op, Operand, Ref, truthy};
use serde_json::Value;

/// The value `r` names in `run` (`item`: the current `for_each` element).
pub(crate) fn lookup(run: &FlowRun, r: &Ref, item: &Value) -> Value {
    match r {
        Ref::Input { name, path } => walk(run.inputs.get(name).cloned().unwrap_or_default(), path),
        Ref::Item { path } => walk(item.clone(), path),
        Ref::Output { node, path } => walk(
            run.nodes
                .get(node)
                .and_then(|n| n.output.clone())
                .unwrap_or_default(),
            path,
        ),
        Ref::Error { node } => run
            .nodes
            .get(node)
            .and_then(|n| n.error.clone())
            .map_or(Value::Null, Value::String),
        Ref::State { node } => Value::String(
            run.nodes
                .get(node)
                .map_or(NodeState::Pending, |n| n.state)
                .as_str()
                .into(),
        ),
    }
}

/// Follows `path` into `v`; a text that holds JSON is read as JSON first.
fn walk(mut v: Value, path: &[String]) -> Value {
    for key in path {
        if let Value::String(s) = &v
            && let Ok(parsed) = serde_json::from_str::<Value>(s)
        {
            v = parsed;
        }
        v = match v {
            Value::Object(mut o) => o.remove(key).unwrap_or_default(),
            Value::Array(a) => key
                .parse::<usize>()
                .ok()
                .and_then(|i| a.into_iter().nth(i))
                .unwrap_or_default(),
            _ => Value::Null,
        };
    }
    v
}

/// A value as prompt text: a string as is, null as nothing, anything else as JSON.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

fn operand(run: &FlowRun, o: &Operand) -> Value {
    match o {
        Operand::Ref(r) => lookup(run, r, &Value::Null),
        Operand::Literal(v) => v.clone(),
    }
}

fn clause(run: &FlowRun, c: &Clause) -> bool {
    let left = operand(run, &c.left);
    match &c.right {
        None => truthy(&left),
        Some((op, right)) => {
            let right = operand(run, right);
            let same = left == right || text(&left) == text(&right);
            match op {
                Op::Eq => same,
                Op::Ne => !same,
            }
        }
    }
}

/// True when every clause of `cond` holds in `run`.
pub(crate) fn holds(run: &FlowRun, cond: &Condition) -> bool {
    cond.clauses.iter().all(|c| clause(run, c))
}

/// A node's prompt with every reference filled in (`item`: its `for_each` element).
pub(crate) fn render(
    run: &FlowRun,
    node: &clawbus_core::config::flow::NodeDef,
    item: &Value,
) -> String {
    node.prompt.render(|r| text(&lookup(run, r, item)))
}

/// A child run's inputs with every reference filled in, as the JSON text of an object.
pub(crate) fn render_inputs(
    run: &FlowRun,
    sub: &clawbus_core::config::flow::SubFlow,
    item: &Value,
) -> String {
    let inputs: serde_json::Map<String, Value> = sub
        .inputs
        .iter()
        .map(|(k, t)| {
            let text = t.render(|r| text(&lookup(run, r, item)));
            (k.clone(), Value::String(text))
        })
        .collect();
    Value::Object(inputs).to_string()
}
