//! One `[[node]]` checked: its agent, prompt, `when`, `for_each`, schema, attempts, classes and
//! lane, every reference naming an upstream node, a declared input, or (in a `for_each`) the item.

use super::super::file::NodeFile;
use super::super::template::{Condition, Part, Ref, Template, TextError};
use super::super::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PARALLEL, InputDef, MAX_NODE_ATTEMPTS, NodeDef, SubFlow,
    schema,
};
use super::Checker;
use crate::config::retry::ErrorClass;
use crate::config::span::line_col;
use crate::ids::AgentId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use toml::Spanned;

impl Checker<'_> {
    pub(super) fn node(
        &mut self,
        i: usize,
        n: &NodeFile,
        ups: &BTreeSet<String>,
        inputs: &[InputDef],
    ) -> Option<NodeDef> {
        let f = |k: &str| format!("node[{i}].{k}");
        let before = self.problems.len();
        let agent = if n.flow.is_some() {
            self.not_with_flow(n, &f);
            None
        } else {
            self.agent(n, &f)
        };
        let for_each = n.for_each.as_ref().and_then(|fe| {
            let (t, refs) = match Template::parse(fe.get_ref()) {
                Ok(p) => p,
                Err(e) => {
                    self.inside(fe, &f("for_each"), e);
                    return None;
                }
            };
            match (t.parts.as_slice(), refs.first()) {
                ([Part::Ref(r @ Ref::Output { .. })], Some((_, off))) => {
                    self.refs_ok(fe, &f("for_each"), &[(r.clone(), *off)], ups, inputs, false);
                    Some(r.clone())
                }
                _ => {
                    self.at(
                        Some(fe.span()),
                        &f("for_each"),
                        "not a single output reference (expected \"{{<node>.output[.<field>]}}\")"
                            .into(),
                    );
                    None
                }
            }
        });
        let prompt = match &n.prompt {
            Some(p) => match Template::parse(p.get_ref()) {
                Ok((t, refs)) => {
                    self.refs_ok(p, &f("prompt"), &refs, ups, inputs, for_each.is_some());
                    Some(t)
                }
                Err(e) => {
                    self.inside(p, &f("prompt"), e);
                    None
                }
            },
            None if n.flow.is_some() => Some(Template { parts: Vec::new() }),
            None => {
                self.at(
                    Some(n.id.span()),
                    &f("prompt"),
                    "missing (expected the prompt the agent gets)".into(),
                );
                None
            }
        };
        let flow = n
            .flow
            .as_ref()
            .map(|name| self.sub_flow(n, name, &f, ups, inputs, for_each.is_some()));
        let when = n
            .when
            .as_ref()
            .and_then(|w| match Condition::parse(w.get_ref()) {
                Ok((c, refs)) => {
                    self.refs_ok(w, &f("when"), &refs, ups, inputs, false);
                    Some(c)
                }
                Err(e) => {
                    self.inside(w, &f("when"), e);
                    None
                }
            });
        let output_schema = n
            .output_schema
            .as_ref()
            .and_then(|s| self.schema(s, &f("output_schema")));
        let timeout = n
            .timeout
            .as_ref()
            .and_then(|t| self.duration(t, &f("timeout")));
        let max_attempts = self.count(
            n.max_attempts.as_ref(),
            &f("max_attempts"),
            DEFAULT_MAX_ATTEMPTS as i64,
            MAX_NODE_ATTEMPTS as i64,
        ) as u32;
        let max_parallel = self.count(
            n.max_parallel.as_ref(),
            &f("max_parallel"),
            DEFAULT_MAX_PARALLEL as i64,
            1024,
        ) as usize;
        let retry_on = self.classes(
            n.retry_on.as_deref(),
            &f("retry_on"),
            &[
                ErrorClass::Timeout,
                ErrorClass::RateLimit,
                ErrorClass::Transient,
            ],
        );
        let abort_on = self.classes(
            n.abort_on.as_deref(),
            &f("abort_on"),
            &[ErrorClass::Auth, ErrorClass::InvalidInput],
        );
        if let (Some(r), Some(a)) = (&n.retry_on, &n.abort_on) {
            for s in r
                .iter()
                .filter(|s| a.iter().any(|x| x.get_ref() == s.get_ref()))
            {
                self.at(
                    Some(s.span()),
                    &f("retry_on"),
                    format!(
                        "class {:?} is also in abort_on (expected each class in one list)",
                        s.get_ref()
                    ),
                );
            }
        }
        if let Some(l) = &n.lane
            && !self.lanes.iter().any(|k| k == l.get_ref())
        {
            self.at(
                Some(l.span()),
                &f("lane"),
                format!(
                    "unknown lane {:?} (expected one of: {})",
                    l.get_ref(),
                    self.lanes.join(", ")
                ),
            );
        }
        if self.problems.len() > before {
            return None;
        }
        Some(NodeDef {
            id: n.id.get_ref().clone(),
            agent,
            prompt: prompt?,
            flow,
            depends_on: n.depends_on.iter().map(|d| d.get_ref().clone()).collect(),
            when,
            output_schema,
            timeout,
            max_attempts,
            retry_on,
            abort_on,
            lane: n.lane.as_ref().map(|l| l.get_ref().clone()),
            for_each,
            max_parallel,
        })
    }

    /// The agent of a node that runs one: known, and given.
    fn agent(&mut self, n: &NodeFile, f: &dyn Fn(&str) -> String) -> Option<AgentId> {
        match &n.agent {
            Some(a) if self.agents.iter().any(|k| k.as_str() == a.get_ref()) => {
                Some(AgentId::new(a.get_ref().clone()))
            }
            Some(a) => {
                let known: Vec<&str> = self.agents.iter().map(AgentId::as_str).collect();
                self.at(
                    Some(a.span()),
                    &f("agent"),
                    format!(
                        "unknown agent {:?} (expected one of: {})",
                        a.get_ref(),
                        known.join(", ")
                    ),
                );
                None
            }
            None => {
                if let Some(i) = &n.inputs
                    && let Some((k, v)) = i.iter().next()
                {
                    self.at(
                        Some(v.span()),
                        &f(&format!("inputs.{k}")),
                        "inputs are for a node that runs a flow (expected flow = \"<name>\")"
                            .into(),
                    );
                }
                self.at(
                    Some(n.id.span()),
                    &f("agent"),
                    "missing (expected the agent that runs this node, or flow = \"<name>\")".into(),
                );
                None
            }
        }
    }

    /// A node that runs a flow has none of an agent's fields.
    fn not_with_flow(&mut self, n: &NodeFile, f: &dyn Fn(&str) -> String) {
        let spans = [
            ("agent", n.agent.as_ref().map(Spanned::span)),
            ("prompt", n.prompt.as_ref().map(Spanned::span)),
            ("lane", n.lane.as_ref().map(Spanned::span)),
            ("output_schema", n.output_schema.as_ref().map(Spanned::span)),
        ];
        for (field, span) in spans {
            if let Some(span) = span {
                self.at(
                    Some(span),
                    &f(field),
                    format!(
                        "{field} is for a node that runs an agent (expected either agent and prompt, or flow and inputs)"
                    ),
                );
            }
        }
    }

    /// `flow = "name"` and its `inputs` templates (each reference upstream, an input, or the item).
    fn sub_flow(
        &mut self,
        n: &NodeFile,
        name: &Spanned<String>,
        f: &dyn Fn(&str) -> String,
        ups: &BTreeSet<String>,
        inputs: &[InputDef],
        item: bool,
    ) -> SubFlow {
        if !crate::config::is_name(name.get_ref()) {
            self.at(
                Some(name.span()),
                &f("flow"),
                format!(
                    "invalid flow name {:?} (expected lowercase letters, digits, - and _)",
                    name.get_ref()
                ),
            );
        }
        let mut templates = BTreeMap::new();
        for (k, v) in n.inputs.iter().flatten() {
            let field = f(&format!("inputs.{k}"));
            match Template::parse(v.get_ref()) {
                Ok((t, refs)) => {
                    self.refs_ok(v, &field, &refs, ups, inputs, item);
                    templates.insert(k.clone(), t);
                }
                Err(e) => self.inside(v, &field, e),
            }
        }
        let (line, col) = line_col(self.src.text, name.span().start);
        SubFlow {
            name: name.get_ref().clone(),
            inputs: templates,
            line,
            col,
        }
    }

    /// Every reference names a declared input, an upstream node, or (in a `for_each` node) the item.
    fn refs_ok(
        &mut self,
        s: &Spanned<String>,
        field: &str,
        refs: &[(Ref, usize)],
        ups: &BTreeSet<String>,
        inputs: &[InputDef],
        item: bool,
    ) {
        for (r, offset) in refs {
            let message = match r {
                Ref::Input { name, .. } if !inputs.iter().any(|i| &i.name == name) => {
                    let known: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
                    format!("no input {name:?} (expected one of: {})", known.join(", "))
                }
                Ref::Item { .. } if !item => {
                    "\"item\" outside a for_each node (expected a for_each on this node)"
                        .to_string()
                }
                r => match r.node() {
                    Some(node) if !ups.contains(node) => {
                        let known: Vec<&str> = ups.iter().map(String::as_str).collect();
                        format!(
                            "node {node:?} is not upstream of this node (expected one of its dependencies, direct or not: {})",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        )
                    }
                    _ => continue,
                },
            };
            self.inside(
                s,
                field,
                TextError {
                    offset: *offset,
                    message,
                },
            );
        }
    }

    fn schema(&mut self, s: &Spanned<toml::Value>, field: &str) -> Option<serde_json::Value> {
        let value = match s.get_ref() {
            toml::Value::String(text) if text.ends_with(".json") => {
                let path = self.src.path.parent().unwrap_or(Path::new(".")).join(text);
                let read = std::fs::read_to_string(&path).map_err(|e| e.to_string());
                match read.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string())) {
                    Ok(v) => v,
                    Err(e) => {
                        self.at(
                            Some(s.span()),
                            field,
                            format!(
                                "cannot read schema file {}: {e} (expected a JSON Schema file)",
                                path.display()
                            ),
                        );
                        return None;
                    }
                }
            }
            toml::Value::String(text) => match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    self.at(
                        Some(s.span()),
                        field,
                        format!("invalid JSON: {e} (expected a table, JSON text or a .json file)"),
                    );
                    return None;
                }
            },
            v => serde_json::to_value(v).unwrap_or_default(),
        };
        let errors = schema::check(&value);
        if errors.is_empty() {
            return Some(value);
        }
        self.at(
            Some(s.span()),
            field,
            format!("invalid schema: {}", errors.join("; ")),
        );
        None
    }

    fn count(&mut self, v: Option<&Spanned<i64>>, field: &str, default: i64, max: i64) -> i64 {
        match v {
            None => default,
            Some(n) if (1..=max).contains(n.get_ref()) => *n.get_ref(),
            Some(n) => {
                self.at(
                    Some(n.span()),
                    field,
                    format!("{} is out of range (expected 1 to {max})", n.get_ref()),
                );
                default
            }
        }
    }

    fn classes(
        &mut self,
        v: Option<&[Spanned<String>]>,
        field: &str,
        default: &[ErrorClass],
    ) -> Vec<ErrorClass> {
        let Some(list) = v else {
            return default.to_vec();
        };
        let mut out = Vec::new();
        for s in list {
            match ErrorClass::parse(s.get_ref()) {
                Some(c) => out.push(c),
                None => {
                    let names: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
                    self.at(
                        Some(s.span()),
                        field,
                        format!(
                            "unknown class {:?} (expected one of: {})",
                            s.get_ref(),
                            names.join(", ")
                        ),
                    );
                }
            }
        }
        out
    }
}
