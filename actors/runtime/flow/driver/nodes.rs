//! The node steps of a run: deciding a node whose dependencies have ended (skipped, failed or
//! running), its items, starting them within `max_parallel`, and ending the node.

use super::super::run::{ItemRun, NodeState};
use super::super::values;
use super::{Driver, FlowEventKind, Start, n_attempts, prompt_of};
use clawbus_core::config::flow::{NodeDef, OnFailure};
use serde_json::Value;

impl Driver {
    /// Decides every pending node whose dependencies have ended, and starts the items that may
    /// run: the tasks to submit (already marked running in the record).
    pub(super) async fn schedule(&mut self) -> Vec<Start> {
        let def = self.def.clone();
        let mut starts = Vec::new();
        for node in &def.nodes {
            let state = self.run.nodes.get(&node.id).map(|n| n.state);
            if state == Some(NodeState::Pending) {
                self.decide(node).await;
            }
            if self.run.nodes.get(&node.id).map(|n| n.state) == Some(NodeState::Running) {
                starts.extend(self.start_items(node).await);
            }
        }
        starts
    }

    /// A pending node whose dependencies have all ended: skipped, failed or running.
    async fn decide(&mut self, node: &NodeDef) {
        let mut cause = None;
        for d in &node.depends_on {
            let Some(up) = self.run.nodes.get(d) else {
                continue;
            };
            if !up.state.is_terminal() {
                return;
            }
            let bad =
                up.state == NodeState::Failed || up.cascade || up.state == NodeState::Cancelled;
            if bad && self.run.def.on_failure == OnFailure::SkipDownstream && cause.is_none() {
                let what = if up.state == NodeState::Failed {
                    "failed"
                } else {
                    "did not run"
                };
                cause = Some(format!("upstream node \"{d}\" {what}"));
            }
        }
        let now = self.now();
        let (state, reason, cascade, error) = if let Some(c) = cause {
            (NodeState::Skipped, Some(c), true, None)
        } else if let Some(w) = node.when.as_ref().filter(|w| !values::holds(&self.run, w)) {
            (
                NodeState::Skipped,
                Some(format!("condition is false: {}", w.text)),
                false,
                None,
            )
        } else if self.run.deadline_ms.is_some_and(|d| now >= d) {
            (
                NodeState::Failed,
                None,
                false,
                Some("the flow's timeout passed before this node started".to_string()),
            )
        } else {
            match self.items(node) {
                Ok(items) => {
                    if let Some(n) = self.run.nodes.get_mut(&node.id) {
                        n.items = items;
                        n.state = NodeState::Running;
                        n.started_ms = Some(now);
                    }
                    return;
                }
                Err(e) => (NodeState::Failed, None, false, Some(e)),
            }
        };
        if let Some(n) = self.run.nodes.get_mut(&node.id) {
            n.state = state;
            n.reason = reason.clone();
            n.cascade = cascade;
            n.error = error.clone();
            n.ended_ms = Some(now);
        }
        let why = error.or(reason);
        self.event(
            FlowEventKind::NodeFinished,
            Some(&node.id),
            None,
            None,
            Some(state.as_str().into()),
            why,
        )
        .await;
    }

    /// The items of a node: one, or one per element of its `for_each` list.
    fn items(&self, node: &NodeDef) -> Result<Vec<ItemRun>, String> {
        let Some(r) = &node.for_each else {
            return Ok(vec![ItemRun::pending(Value::Null)]);
        };
        match values::lookup(&self.run, r, &Value::Null) {
            Value::Array(list) => Ok(list.into_iter().map(ItemRun::pending).collect()),
            Value::String(s) => match serde_json::from_str::<Value>(&s) {
                Ok(Value::Array(list)) => Ok(list.into_iter().map(ItemRun::pending).collect()),
                _ => Err(format!("for_each: the value is not a list (got {s:?})")),
            },
            other => Err(format!("for_each: the value is not a list (got {other})")),
        }
    }

    /// Starts pending items of a running node, at most `max_parallel` running at once; a node
    /// whose items have all ended (an empty `for_each`) ends here.
    async fn start_items(&mut self, node: &NodeDef) -> Vec<Start> {
        let mut starts = Vec::new();
        let cap = if node.for_each.is_some() {
            node.max_parallel
        } else {
            1
        };
        let Some(n) = self.run.nodes.get(&node.id) else {
            return starts;
        };
        let running = n
            .items
            .iter()
            .filter(|i| i.state == NodeState::Running)
            .count();
        let pending: Vec<usize> = n
            .items
            .iter()
            .enumerate()
            .filter(|(_, i)| i.state == NodeState::Pending)
            .map(|(i, _)| i)
            .collect();
        for i in pending.into_iter().take(cap.saturating_sub(running)) {
            let item = self
                .run
                .nodes
                .get(&node.id)
                .map(|n| n.items[i].value.clone())
                .unwrap_or_default();
            let prompt = match &node.flow {
                // A child run's inputs, rendered once (a resumed run gives the same again).
                Some(sub) => values::render_inputs(&self.run, sub, &item),
                None => prompt_of(node, &values::render(&self.run, node, &item), None),
            };
            starts.push(self.mark_started(node, i, prompt));
        }
        for s in &starts {
            self.event(
                FlowEventKind::NodeStarted,
                Some(&s.node),
                Some(s.item),
                Some(s.attempt),
                None,
                None,
            )
            .await;
        }
        self.settle(node).await;
        starts
    }

    pub(super) fn item_end(
        &mut self,
        node: &NodeDef,
        i: usize,
        state: NodeState,
        output: Option<Value>,
        error: Option<String>,
    ) {
        let Some(n) = self.run.nodes.get_mut(&node.id) else {
            return;
        };
        if let Some(it) = n.items.get_mut(i) {
            it.state = state;
            it.output = output;
            it.error = error;
        }
        // A failed item: the rest of a for_each does not start.
        if state == NodeState::Failed {
            for it in n
                .items
                .iter_mut()
                .filter(|it| it.state == NodeState::Pending)
            {
                it.state = NodeState::Cancelled;
            }
        }
    }

    /// Ends a running node whose items have all ended.
    pub(super) async fn settle(&mut self, node: &NodeDef) {
        let now = self.now();
        let Some(n) = self.run.nodes.get_mut(&node.id) else {
            return;
        };
        if n.state != NodeState::Running || n.items.iter().any(|i| !i.state.is_terminal()) {
            return;
        }
        let failed = n
            .items
            .iter()
            .enumerate()
            .find(|(_, i)| i.state == NodeState::Failed);
        let each = node.for_each.is_some();
        if let Some((i, it)) = failed {
            n.state = NodeState::Failed;
            let e = it.error.clone().unwrap_or_default();
            n.error = Some(if each { format!("item {i}: {e}") } else { e });
        } else if n.items.iter().any(|i| i.state == NodeState::Cancelled) {
            n.state = NodeState::Cancelled;
            n.reason = self.run.cancelled.clone().or(Some("cancelled".into()));
        } else {
            n.state = NodeState::Succeeded;
            n.output = Some(if each {
                Value::Array(
                    n.items
                        .iter()
                        .map(|i| i.output.clone().unwrap_or_default())
                        .collect(),
                )
            } else {
                n.items
                    .first()
                    .and_then(|i| i.output.clone())
                    .unwrap_or_default()
            });
        }
        n.ended_ms = Some(now);
        let (state, why) = (n.state, n.error.clone().or(n.reason.clone()));
        self.event(
            FlowEventKind::NodeFinished,
            Some(&node.id),
            None,
            Some(n_attempts(&self.run, &node.id)),
            Some(state.as_str().into()),
            why,
        )
        .await;
    }
}
