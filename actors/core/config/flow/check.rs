//! Phase two: a flow file's shape → [`FlowDef`], every problem placed at `file:line:col`:
//! unknown agents and dependencies, cycles (named), references to nodes that are not upstream,
//! invalid schemas, inputs of the wrong type.

mod node;

use super::file::{FlowFile, InputFile, NodeFile};
use super::template::TextError;
use super::{FlowDef, InputDef, InputKind, OnFailure};
use crate::config::Problem;
use crate::config::file::parse;
use crate::config::parse_duration;
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
                self.at(Some(t.span()), field, e.to_string());
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
