//! Phase one: the serde shape of a flow file.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// `flows.d/<name>.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FlowFile {
    #[serde(default)]
    pub flow: Option<Spanned<FlowSection>>,
    #[serde(default)]
    pub inputs: BTreeMap<String, Spanned<InputFile>>,
    #[serde(default)]
    pub node: Vec<Spanned<NodeFile>>,
}

/// `[flow]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FlowSection {
    pub name: Spanned<String>,
    pub description: Option<String>,
    pub timeout: Option<Spanned<String>>,
    pub on_failure: Option<Spanned<String>>,
}

/// `[inputs.<name>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InputFile {
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    pub default: Option<Spanned<toml::Value>>,
    pub description: Option<String>,
}

/// `[[node]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NodeFile {
    pub id: Spanned<String>,
    pub agent: Option<Spanned<String>>,
    pub flow: Option<Spanned<String>>,
    /// A `flow` node's inputs for the child run: templates, by input name.
    pub inputs: Option<BTreeMap<String, Spanned<String>>>,
    pub prompt: Option<Spanned<String>>,
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
    pub when: Option<Spanned<String>>,
    pub output_schema: Option<Spanned<toml::Value>>,
    pub timeout: Option<Spanned<String>>,
    pub max_attempts: Option<Spanned<i64>>,
    pub retry_on: Option<Vec<Spanned<String>>>,
    pub abort_on: Option<Vec<Spanned<String>>>,
    pub lane: Option<Spanned<String>>,
    pub for_each: Option<Spanned<String>>,
    pub max_parallel: Option<Spanned<i64>>,
}
