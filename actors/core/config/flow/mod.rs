//! `flows.d/<name>.toml`: task graphs of agents. Parsed and checked here (every problem with
//! `file:line:col`, nothing started on any), run by `clawbus_runtime::flow`.
//!
//! ```toml
//! [flow]
//! name = "brief"
//! timeout = "10m"
//! on_failure = "skip_downstream"     # or "continue"
//!
//! [inputs]
//! topic = { type = "string", default = "tides" }
//!
//! [[node]]
//! id = "research"
//! agent = "researcher"
//! prompt = "Find facts about {{inputs.topic}}"
//!
//! [[node]]
//! id = "write"
//! agent = "writer"
//! depends_on = ["research"]
//! prompt = "Write from: {{research.output}}"
//! ```
//!
//! A node may run another flow instead of an agent (`flow = "name"`, with `inputs = { x =
//! "{{node.output}}" }`); [`check_nested`] checks those across every flow (unknown flows and
//! inputs, cycles between flows).
//!
//! Module map: `file` (the serde shape), `check` (shape → [`FlowDef`]: references, cycles,
//! schemas), `nested` (flows that run flows), [`template`] (prompt templates and `when`
//! conditions), [`schema`] (the JSON Schema subset of `output_schema`).

mod check;
mod file;
mod nested;
pub mod schema;
pub mod template;
#[cfg(test)]
mod tests;

pub use check::{check_file, check_text, flow_files, resolve_inputs};
pub use nested::check_nested;
pub use template::{Condition, Ref, Template};

use super::retry::ErrorClass;
use crate::ids::AgentId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The folder of flow files next to `agents.d/`.
pub(crate) const FLOWS_DIR: &str = "flows.d";
/// Attempts a node gets unless it says otherwise.
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 2;
/// The most attempts a node may ask for.
pub(crate) const MAX_NODE_ATTEMPTS: u32 = 5;
/// Items of a `for_each` node run at once unless it says otherwise.
pub(crate) const DEFAULT_MAX_PARALLEL: usize = 4;

/// What a failed node does to its dependants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Every dependant (and theirs) is `skipped`, naming the failed node.
    #[default]
    SkipDownstream,
    /// Dependants run; the failed node's error is their input (`{{node.error}}`).
    Continue,
}

/// The type of a flow input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` / `false`.
    Boolean,
    /// A JSON array.
    Array,
    /// A JSON object.
    Object,
}

impl InputKind {
    /// Every kind, as written in files.
    pub const ALL: [(&'static str, Self); 6] = [
        ("string", Self::String),
        ("integer", Self::Integer),
        ("number", Self::Number),
        ("boolean", Self::Boolean),
        ("array", Self::Array),
        ("object", Self::Object),
    ];

    /// The name in files.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("string", |(n, _)| n)
    }

    /// True when `v` is of this kind.
    pub fn accepts(self, v: &serde_json::Value) -> bool {
        match self {
            Self::String => v.is_string(),
            Self::Integer => v.is_i64() || v.is_u64(),
            Self::Number => v.is_number(),
            Self::Boolean => v.is_boolean(),
            Self::Array => v.is_array(),
            Self::Object => v.is_object(),
        }
    }

    /// Reads a command-line value (`--input n=3`) as this kind.
    pub fn read(self, text: &str) -> Result<serde_json::Value, String> {
        if self == Self::String {
            return Ok(serde_json::Value::String(text.to_string()));
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) if self.accepts(&v) => Ok(v),
            _ => Err(format!("{text:?} is not a valid {}", self.as_str())),
        }
    }
}

/// One declared input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputDef {
    /// Its name (`{{inputs.<name>}}`).
    pub name: String,
    /// Its type.
    pub kind: InputKind,
    /// Its value when a run gives none; `None`: required.
    pub default: Option<serde_json::Value>,
    /// What it is, for `flow list`.
    pub description: Option<String>,
}

/// One node of a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeDef {
    /// Its id, unique in the flow.
    pub id: String,
    /// The agent that runs it (`None`: the node runs another flow, [`NodeDef::flow`]).
    pub agent: Option<AgentId>,
    /// The prompt the agent gets (empty for a node that runs another flow).
    pub prompt: Template,
    /// The flow this node runs as a child run, instead of an agent.
    #[serde(default)]
    pub flow: Option<SubFlow>,
    /// The nodes it waits for.
    pub depends_on: Vec<String>,
    /// It runs only when this holds; else it is `skipped`.
    pub when: Option<Condition>,
    /// Its output must be JSON matching this schema.
    pub output_schema: Option<serde_json::Value>,
    /// The longest one attempt may take (clipped to the flow's deadline).
    pub timeout: Option<Duration>,
    /// Attempts in all (1..=5).
    pub max_attempts: u32,
    /// Failure classes tried again (default timeout, rate_limit, transient).
    pub retry_on: Vec<ErrorClass>,
    /// Failure classes that fail the node at once (default auth, invalid_input).
    pub abort_on: Vec<ErrorClass>,
    /// The lane its tasks run on (default: the agent's `main`).
    pub lane: Option<String>,
    /// One task per element of this (an upstream output that is an array).
    pub for_each: Option<Ref>,
    /// The most `for_each` items running at once.
    pub max_parallel: usize,
}

/// A node that runs a whole other flow (`flow = "name"`): the child run's output is the node's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubFlow {
    /// The flow it runs.
    pub name: String,
    /// The child run's inputs: templates over this flow's inputs, upstream outputs and the item.
    pub inputs: BTreeMap<String, Template>,
    /// Where `flow = "…"` stands in the file (1-based line and column), for the checks that
    /// need every flow ([`check_nested`]).
    pub line: usize,
    /// Its column.
    pub col: usize,
}

/// One checked flow file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowDef {
    /// Its name (`clawbus flow run <name>`).
    pub name: String,
    /// The file it came from.
    pub path: PathBuf,
    /// What it does, for `flow list`.
    pub description: Option<String>,
    /// The longest a run may take.
    pub timeout: Option<Duration>,
    /// What a failed node does to its dependants.
    pub on_failure: OnFailure,
    /// Its inputs.
    pub inputs: Vec<InputDef>,
    /// Its nodes, each after every node it depends on.
    pub nodes: Vec<NodeDef>,
}

impl FlowDef {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&NodeDef> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
