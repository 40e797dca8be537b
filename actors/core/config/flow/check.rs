//! Phase two: a flow file's shape → [`FlowDef`], every problem placed at `file:line:col`:
//! unknown agents and dependencies, cycles (named), references to nodes that are not upstream,
//! invalid schemas, inputs of the wrong type.

use super::file::{FlowFile, InputFile, NodeFile};
use super::template::{Condition, Ref, Template, TextError};
use super::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PARALLEL, FlowDef, InputDef, InputKind, MAX_NODE_ATTEMPTS,
    NodeDef, OnFailure, schema,
};
use crate::config::Problem;
use crate::config::file::parse;
use crate::config::parse_duration;
use crate::config::retry::ErrorClass;
use crate::config::span::{Source, positionless};
use crate::ids::AgentId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The `*.toml` files of a flows folder, by name; none when the folder does not exist.
pub fn flow_files(dir: &Path) -> Result<Vec<PathBuf>, Problem> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(positionless(
                dir,
                "",
                format!("cannot read the folder: {e} (expected a readable folder)"),
            ));
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads and checks one flow file against the known agents and lanes.
pub fn check_file(
    path: &Path,
    agents: &[AgentId],
    lanes: &[String],
) -> (Option<FlowDef>, Vec<Problem>) {
    match std::fs::read_to_string(path) {
        Ok(text) => check_text(path, &text, agents, lanes),
        Err(e) => (
            None,
            vec![positionless(
                path,
                "",
                format!("cannot read the file: {e} (expected a readable UTF-8 TOML file)"),
            )],
        ),
    }
}

/// Checks the text of a flow file; the flow is `Some` only when there is no problem.
pub fn check_text(
    path: &Path,
    text: &str,
    agents: &[AgentId],
    lanes: &[String],
) -> (Option<FlowDef>, Vec<Problem>) {
    let src = Source { path, text };
    let parsed = parse::<FlowFile>(&src);
    let Some(file) = parsed.value.as_ref() else {
        return (None, parsed.problems);
    };
    let mut c = Checker {
        src: &src,
        agents,
        lanes,
        problems: Vec::new(),
    };
    let def = c.flow(file);
    let problems = parsed.merge(c.problems);
    if problems.is_empty() {
        (def, problems)
    } else {
        (None, problems)
    }
}

/// A run's inputs: each given value checked against its declared type (text is read as that
/// type, as `--input n=3` gives it), defaults filled in; an error names the input.
pub fn resolve_inputs(
    def: &FlowDef,
    given: &BTreeMap<String, serde_json::Value>,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    if let Some(name) = given
        .keys()
        .find(|k| !def.inputs.iter().any(|i| &i.name == *k))
    {
        let known: Vec<&str> = def.inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(format!(
            "flow \"{}\" has no input \"{name}\" (expected one of: {})",
            def.name,
            known.join(", ")
        ));
    }
    let mut out = serde_json::Map::new();
    for input in &def.inputs {
        let value = match (given.get(&input.name), &input.default) {
            (Some(v), _) if input.kind.accepts(v) => v.clone(),
            (Some(serde_json::Value::String(s)), _) => input
                .kind
                .read(s)
                .map_err(|e| format!("input \"{}\": {e}", input.name))?,
            (Some(v), _) => {
                return Err(format!(
                    "input \"{}\": {v} is not a valid {}",
                    input.name,
                    input.kind.as_str()
                ));
            }
            (None, Some(d)) => d.clone(),
            (None, None) => {
                return Err(format!(
                    "input \"{}\" is required (expected --input {}=<{}>)",
                    input.name,
                    input.name,
                    input.kind.as_str()
                ));
            }
        };
        out.insert(input.name.clone(), value);
    }
    Ok(out)
}

struct Checker<'a> {
    src: &'a Source<'a>,
    agents: &'a [AgentId],
    lanes: &'a [String],
    problems: Vec<Problem>,
}

/// Bytes between a string value's span start and its first character.
fn quote_len(text: &str, start: usize) -> usize {
    let at = text.get(start..).unwrap_or_default();
    if at.starts_with("\"\"\"") || at.starts_with("'''") {
        let nl = at[3..].starts_with('\n') as usize;
        3 + nl
    } else if at.starts_with('"') || at.starts_with('\'') {
        1
    } else {
        0
    }
}

impl Checker<'_> {
    fn at(&mut self, span: Option<Range<usize>>, field: &str, message: String) {
        self.problems.push(self.src.at(span, field, message));
    }

    /// A problem inside a string value, at its offset.
    fn inside(&mut self, s: &Spanned<String>, field: &str, e: TextError) {
        let start = s.span().start + quote_len(self.src.text, s.span().start) + e.offset;
        self.at(Some(start..start), field, e.message);
    }

    fn flow(&mut self, file: &FlowFile) -> Option<FlowDef> {
        let Some(section) = &file.flow else {
            self.at(
                None,
                "flow",
                "missing [flow] (expected a [flow] table with name)".into(),
            );
            return None;
        };
        let sec = section.get_ref();
        let name = sec.name.get_ref().clone();
        if !super::super::is_name(&name) {
            self.at(
                Some(sec.name.span()),
                "flow.name",
                format!("invalid flow name {name:?} (expected lowercase letters, digits, - and _)"),
            );
        }
        let timeout = sec
            .timeout
            .as_ref()
            .and_then(|t| self.duration(t, "flow.timeout"));
        let on_failure = match sec
            .on_failure
            .as_ref()
            .map(|s| (s.get_ref().as_str(), s.span()))
        {
            None | Some(("skip_downstream", _)) => OnFailure::SkipDownstream,
            Some(("continue", _)) => OnFailure::Continue,
            Some((other, span)) => {
                self.at(
                    Some(span),
                    "flow.on_failure",
                    format!(
                        "unknown policy {other:?} (expected one of: skip_downstream, continue)"
                    ),
                );
                OnFailure::SkipDownstream
            }
        };
        let inputs: Vec<InputDef> = file
            .inputs
            .iter()
            .filter_map(|(name, i)| self.input(name, i))
            .collect();
        let order = self.order(&file.node)?;
        let ancestors = ancestors(&file.node, &order);
        let mut nodes = Vec::new();
        for i in order {
            let n = &file.node[i];
            let ups = &ancestors[n.get_ref().id.get_ref()];
            if let Some(def) = self.node(i, n.get_ref(), ups, &inputs) {
                nodes.push(def);
            }
        }
        Some(FlowDef {
            name,
            path: self.src.path.to_path_buf(),
            description: sec.description.clone(),
            timeout,
            on_failure,
            inputs,
            nodes,
        })
    }

    fn duration(&mut self, t: &Spanned<String>, field: &str) -> Option<std::time::Duration> {
        match parse_duration(t.get_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                self.at(Some(t.span()), field, e);
                None
            }
        }
    }

    fn input(&mut self, name: &str, i: &Spanned<InputFile>) -> Option<InputDef> {
        let field = format!("inputs.{name}");
        let f = i.get_ref();
        let Some(kind) = InputKind::ALL
            .iter()
            .find(|(n, _)| *n == f.kind.get_ref())
            .map(|(_, k)| *k)
        else {
            let names: Vec<&str> = InputKind::ALL.iter().map(|(n, _)| *n).collect();
            self.at(
                Some(f.kind.span()),
                &format!("{field}.type"),
                format!(
                    "unknown type {:?} (expected one of: {})",
                    f.kind.get_ref(),
                    names.join(", ")
                ),
            );
            return None;
        };
        let default = match &f.default {
            Some(d) => {
                let v = serde_json::to_value(d.get_ref()).unwrap_or_default();
                if !kind.accepts(&v) {
                    self.at(
                        Some(d.span()),
                        &format!("{field}.default"),
                        format!(
                            "{v} is not a valid {} (expected a default of the input's type)",
                            kind.as_str()
                        ),
                    );
                }
                Some(v)
            }
            None => None,
        };
        Some(InputDef {
            name: name.to_string(),
            kind,
            default,
            description: f.description.clone(),
        })
    }

    /// The nodes in an order where each comes after its dependencies; `None` on a duplicate id,
    /// an unknown dependency or a cycle (each reported).
    fn order(&mut self, nodes: &[Spanned<NodeFile>]) -> Option<Vec<usize>> {
        let mut index = BTreeMap::new();
        let mut ok = true;
        for (i, n) in nodes.iter().enumerate() {
            let id = &n.get_ref().id;
            if !super::super::is_name(id.get_ref()) {
                self.at(
                    Some(id.span()),
                    &format!("node[{i}].id"),
                    format!(
                        "invalid node id {:?} (expected lowercase letters, digits, - and _)",
                        id.get_ref()
                    ),
                );
                ok = false;
            }
            if matches!(id.get_ref().as_str(), "inputs" | "item") {
                self.at(
                    Some(id.span()),
                    &format!("node[{i}].id"),
                    format!(
                        "node id {:?} is reserved (expected another name)",
                        id.get_ref()
                    ),
                );
                ok = false;
            }
            if index.insert(id.get_ref().clone(), i).is_some() {
                self.at(
                    Some(id.span()),
                    &format!("node[{i}].id"),
                    format!(
                        "duplicate node id {:?} (expected each id once)",
                        id.get_ref()
                    ),
                );
                ok = false;
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            for (j, d) in n.get_ref().depends_on.iter().enumerate() {
                if !index.contains_key(d.get_ref()) {
                    let known: Vec<&str> = index.keys().map(String::as_str).collect();
                    self.at(
                        Some(d.span()),
                        &format!("node[{i}].depends_on[{j}]"),
                        format!(
                            "unknown node {:?} (expected one of: {})",
                            d.get_ref(),
                            known.join(", ")
                        ),
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        // Depth-first, white/grey/black: a grey node met again closes a cycle.
        let mut mark = vec![0u8; nodes.len()];
        let mut order = Vec::new();
        for start in 0..nodes.len() {
            if mark[start] == 0
                && !self.visit(start, nodes, &index, &mut mark, &mut Vec::new(), &mut order)
            {
                return None;
            }
        }
        Some(order)
    }

    fn visit(
        &mut self,
        i: usize,
        nodes: &[Spanned<NodeFile>],
        index: &BTreeMap<String, usize>,
        mark: &mut [u8],
        stack: &mut Vec<usize>,
        order: &mut Vec<usize>,
    ) -> bool {
        mark[i] = 1;
        stack.push(i);
        for (j, d) in nodes[i].get_ref().depends_on.iter().enumerate() {
            let k = index[d.get_ref()];
            if mark[k] == 1 {
                let from = stack.iter().position(|&s| s == k).unwrap_or(0);
                let mut names: Vec<&str> = stack[from..]
                    .iter()
                    .map(|&s| nodes[s].get_ref().id.get_ref().as_str())
                    .collect();
                names.push(nodes[k].get_ref().id.get_ref());
                self.at(
                    Some(d.span()),
                    &format!("node[{i}].depends_on[{j}]"),
                    format!(
                        "dependency cycle: {} (expected a graph without cycles)",
                        names.join(" → ")
                    ),
                );
                return false;
            }
            if mark[k] == 0 && !self.visit(k, nodes, index, mark, stack, order) {
                return false;
            }
        }
        stack.pop();
        mark[i] = 2;
        order.push(i);
        true
    }

    fn node(
        &mut self,
        i: usize,
        n: &NodeFile,
        ups: &BTreeSet<String>,
        inputs: &[InputDef],
    ) -> Option<NodeDef> {
        let f = |k: &str| format!("node[{i}].{k}");
        let before = self.problems.len();
        if let Some(flow) = &n.flow {
            self.at(
                Some(flow.span()),
                &f("flow"),
                "a node that runs another flow is not supported yet (expected agent and prompt)"
                    .into(),
            );
        }
        let agent = match &n.agent {
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
                self.at(
                    Some(n.id.span()),
                    &f("agent"),
                    "missing (expected the agent that runs this node)".into(),
                );
                None
            }
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
                ([super::template::Part::Ref(r @ Ref::Output { .. })], Some((_, off))) => {
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
            None => {
                self.at(
                    Some(n.id.span()),
                    &f("prompt"),
                    "missing (expected the prompt the agent gets)".into(),
                );
                None
            }
        };
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
            agent: agent?,
            prompt: prompt?,
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

/// Each node's transitive dependencies (computed in dependency order).
fn ancestors(nodes: &[Spanned<NodeFile>], order: &[usize]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &i in order {
        let n = nodes[i].get_ref();
        let mut set = BTreeSet::new();
        for d in &n.depends_on {
            set.insert(d.get_ref().clone());
            if let Some(up) = out.get(d.get_ref()) {
                set.extend(up.iter().cloned());
            }
        }
        out.insert(n.id.get_ref().clone(), set);
    }
    out
}
