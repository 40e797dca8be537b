//! A flow run as stored: its definition (a snapshot, so a resumed run follows the flow it
//! started with), its inputs, and every node's state, attempts, times, output and error.

use clawbus_core::config::flow::FlowDef;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Nodes are running or waiting.
    Running,
    /// Every node succeeded or was skipped by its condition.
    Succeeded,
    /// Some nodes failed (or were skipped because of it) and some succeeded.
    PartiallySucceeded,
    /// Nodes failed and none succeeded.
    Failed,
    /// Cancelled: nothing more starts.
    Cancelled,
}

impl RunState {
    /// True once the run has ended.
    pub fn is_terminal(self) -> bool {
        self != Self::Running
    }

    /// The name on the wire and in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::PartiallySucceeded => "partially_succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// How a node (or one `for_each` item) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Waiting for its dependencies.
    Pending,
    /// Its tasks are running.
    Running,
    /// Done, with an output.
    Succeeded,
    /// Failed after its attempts (or at once, for a class that is not retried).
    Failed,
    /// Not run: its condition was false, or an upstream node failed (`skip_downstream`).
    Skipped,
    /// Not run, or stopped, because the run was cancelled.
    Cancelled,
}

impl NodeState {
    /// True once it will not change again.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// The name on the wire and in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One task of a node: the node itself, or one item of a `for_each` node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemRun {
    /// Its state.
    pub state: NodeState,
    /// The `for_each` element (null for a plain node).
    #[serde(default)]
    pub value: Value,
    /// Attempts started so far.
    pub attempt: u32,
    /// The request id of the current attempt's task.
    pub request_id: Option<String>,
    /// The current attempt's prompt (resubmitted as is after a restart).
    pub prompt: Option<String>,
    /// Its output: the answer's JSON when the node has a schema, else its text.
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
}

impl ItemRun {
    /// A pending item for `value`.
    pub fn pending(value: Value) -> Self {
        Self {
            state: NodeState::Pending,
            value,
            attempt: 0,
            request_id: None,
            prompt: None,
            output: None,
            error: None,
        }
    }
}

/// One node of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRun {
    /// Its state.
    pub state: NodeState,
    /// Attempts of its tasks in all.
    pub attempts: u32,
    /// When it started (ms on the system clock).
    pub started_ms: Option<u64>,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// Its output (a `for_each` node: the list of its items' outputs, in item order).
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// Why it was skipped or cancelled.
    pub reason: Option<String>,
    /// True when it was skipped because an upstream node failed: its dependants are skipped too.
    #[serde(default)]
    pub cascade: bool,
    /// Its tasks (one; or one per `for_each` item, once it started).
    #[serde(default)]
    pub items: Vec<ItemRun>,
}

impl NodeRun {
    /// A node that has not started.
    pub fn pending() -> Self {
        Self {
            state: NodeState::Pending,
            attempts: 0,
            started_ms: None,
            ended_ms: None,
            output: None,
            error: None,
            reason: None,
            cascade: false,
            items: Vec::new(),
        }
    }

    /// How long it ran, in ms (so far, when it has not ended).
    pub fn duration_ms(&self, now_ms: u64) -> Option<u64> {
        self.started_ms
            .map(|s| self.ended_ms.unwrap_or(now_ms).saturating_sub(s))
    }
}

/// One run of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRun {
    /// Its id.
    pub id: String,
    /// The request id it was started under, if the caller gave one.
    pub request_id: Option<String>,
    /// The flow as it was when the run started.
    pub def: FlowDef,
    /// Its inputs, checked and with defaults.
    pub inputs: Map<String, Value>,
    /// How it stands.
    pub state: RunState,
    /// When it started (ms on the system clock).
    pub created_ms: u64,
    /// When it must end (the flow's timeout).
    pub deadline_ms: Option<u64>,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// Why it was cancelled.
    pub cancelled: Option<String>,
    /// Every node by id.
    pub nodes: BTreeMap<String, NodeRun>,
}

impl FlowRun {
    /// A new run of `def` with every node pending.
    pub fn new(
        id: String,
        request_id: Option<String>,
        def: FlowDef,
        inputs: Map<String, Value>,
        now_ms: u64,
    ) -> Self {
        let nodes = def
            .nodes
            .iter()
            .map(|n| (n.id.clone(), NodeRun::pending()))
            .collect();
        let deadline_ms = def
            .timeout
            .map(|t| now_ms.saturating_add(t.as_millis() as u64));
        Self {
            id,
            request_id,
            def,
            inputs,
            state: RunState::Running,
            created_ms: now_ms,
            deadline_ms,
            ended_ms: None,
            cancelled: None,
            nodes,
        }
    }

    /// The final state once every node has ended: `None` while some have not.
    pub fn outcome(&self) -> Option<RunState> {
        if self.nodes.values().any(|n| !n.state.is_terminal()) {
            return None;
        }
        if self.cancelled.is_some() {
            return Some(RunState::Cancelled);
        }
        let bad = self
            .nodes
            .values()
            .any(|n| n.state == NodeState::Failed || n.cascade || n.state == NodeState::Cancelled);
        let good = self.nodes.values().any(|n| n.state == NodeState::Succeeded);
        Some(match (bad, good) {
            (false, _) => RunState::Succeeded,
            (true, true) => RunState::PartiallySucceeded,
            (true, false) => RunState::Failed,
        })
    }

    /// What the run gives a parent flow: the output of its last node (one that no node depends
    /// on), or an object of those outputs by node id when there are several.
    pub fn output(&self) -> Value {
        let last: Vec<&str> = self
            .def
            .nodes
            .iter()
            .filter(|n| !self.def.nodes.iter().any(|o| o.depends_on.contains(&n.id)))
            .map(|n| n.id.as_str())
            .collect();
        let out = |id: &str| {
            self.nodes
                .get(id)
                .and_then(|n| n.output.clone())
                .unwrap_or_default()
        };
        match last.as_slice() {
            [one] => out(one),
            many => Value::Object(many.iter().map(|id| (id.to_string(), out(id))).collect()),
        }
    }
}
