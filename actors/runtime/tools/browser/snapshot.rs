//! The page as the model reads it: a compact accessibility tree (`Accessibility.getFullAXTree`)
//! where every interactive element carries a ref (`[ref=e12]`) that `act` takes. A ref names
//! one DOM node (its backend id) and stays the same across snapshots of the same document; a
//! new document starts new refs, so an old ref gives [`StaleRef`].

use super::state::Refs;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Roles that get a ref.
const INTERACTIVE: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
    "textarea",
    "PopUpButton",
    "ComboBoxMenuButton",
    "ComboBoxSelect",
    "TextField",
];
/// Roles that say nothing by themselves: their children take their place.
const TRANSPARENT: &[&str] = &["generic", "none", "presentation", "LineBreak", "Section"];
/// Nodes deeper than this are not shown.
const MAX_DEPTH: usize = 40;

/// A ref the current document does not have.
#[derive(Debug, thiserror::Error)]
#[error(
    "ref {0:?} does not exist on the current page (it changed or navigated); call action \"snapshot\" again and use a ref from it"
)]
pub(crate) struct StaleRef(pub String);

/// Parses `e12` into 12.
pub(crate) fn parse_ref(r: &str) -> Option<u32> {
    r.trim()
        .trim_start_matches('[')
        .trim_start_matches("ref=")
        .strip_prefix('e')?
        .trim_end_matches(']')
        .parse()
        .ok()
}

struct Tree<'a> {
    nodes: HashMap<&'a str, &'a Value>,
}

/// Renders the nodes of `Accessibility.getFullAXTree` (answer field `nodes`) as indented lines,
/// handing out refs from `refs`; at most `max_chars` characters; only lines containing `query`
/// (any case) when given.
pub(crate) fn render(
    nodes: &[Value],
    refs: &mut Refs,
    query: Option<&str>,
    max_chars: usize,
) -> String {
    let tree = Tree {
        nodes: nodes
            .iter()
            .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
            .collect(),
    };
    let mut lines = Vec::new();
    if let Some(root) = nodes.first() {
        walk(&tree, root, 0, "", refs, &mut lines);
    }
    let query = query.map(str::to_lowercase).filter(|q| !q.is_empty());
    let mut out = String::new();
    let mut shown = 0;
    for line in &lines {
        if let Some(q) = &query
            && !line.to_lowercase().contains(q)
        {
            continue;
        }
        let line = if query.is_some() {
            line.trim_start()
        } else {
            line.as_str()
        };
        if out.len() + line.len() + 1 > max_chars {
            let _w = write!(
                out,
                "… ({} more lines cut at max_chars={max_chars}; pass \"query\" to narrow)",
                lines.len() - shown
            );
            return out;
        }
        out.push_str(line);
        out.push('\n');
        shown += 1;
    }
    if out.is_empty() {
        out.push_str(if query.is_some() {
            "(nothing matches the query)\n"
        } else {
            "(the page is empty)\n"
        });
    }
    out
}

fn walk(
    tree: &Tree,
    node: &Value,
    depth: usize,
    parent_name: &str,
    refs: &mut Refs,
    out: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let role = node["role"]["value"].as_str().unwrap_or_default();
    let name = node["name"]["value"].as_str().unwrap_or_default().trim();
    let ignored = node["ignored"].as_bool().unwrap_or(false);
    let children = || {
        node["childIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|id| tree.nodes.get(id.as_str()?).copied())
    };
    if role == "InlineTextBox" {
        return;
    }
    let transparent =
        ignored || (TRANSPARENT.contains(&role) && name.is_empty()) || role == "RootWebArea";
    if transparent {
        for c in children() {
            walk(tree, c, depth, parent_name, refs, out);
        }
        return;
    }
    if role == "StaticText" {
        if !name.is_empty() && name != parent_name {
            out.push(format!("{}- text {:?}", "  ".repeat(depth), clip(name)));
        }
        return;
    }
    let mut line = format!("{}- {role}", "  ".repeat(depth));
    if !name.is_empty() {
        let _w = write!(line, " {:?}", clip(name));
    }
    if let Some(v) = node["value"]["value"].as_str().filter(|v| !v.is_empty()) {
        let _w = write!(line, " value={:?}", clip(v));
    }
    for p in node["properties"].as_array().into_iter().flatten() {
        let (pname, pval) = (p["name"].as_str().unwrap_or_default(), &p["value"]["value"]);
        match pname {
            "level" => {
                let _w = write!(line, " [level={pval}]");
            }
            "checked" | "selected" | "expanded" | "pressed" if pval == "true" || pval == true => {
                let _w = write!(line, " [{pname}]");
            }
            "disabled" if pval == true => line.push_str(" [disabled]"),
            _ => {}
        }
    }
    if INTERACTIVE.contains(&role)
        && let Some(backend) = node["backendDOMNodeId"].as_i64()
    {
        let _w = write!(line, " [ref=e{}]", refs.of(backend));
    }
    out.push(line);
    for c in children() {
        walk(tree, c, depth + 1, name, refs, out);
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 200;
    if s.chars().count() <= MAX {
        return s.to_string();
    }
    let cut: String = s.chars().take(MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(id: &str, role: &str, name: &str, children: &[&str], backend: i64) -> Value {
        json!({ "nodeId": id, "role": { "value": role }, "name": { "value": name }, "childIds": children, "backendDOMNodeId": backend, "ignored": false })
    }

    #[test]
    fn interactive_elements_get_refs_that_stay_across_snapshots() {
        let nodes = vec![
            node("1", "RootWebArea", "Page", &["2", "3", "5"], 1),
            node("2", "heading", "Hello", &["6"], 2),
            node("3", "generic", "", &["4"], 3),
            node("4", "textbox", "Query", &[], 4),
            node("5", "button", "Go", &["7"], 5),
            node("6", "StaticText", "Hello", &[], 6),
            node("7", "StaticText", "Go", &[], 7),
        ];
        let mut refs = Refs::default();
        let first = render(&nodes, &mut refs, None, 10_000);
        assert_eq!(
            first,
            "- heading \"Hello\"\n- textbox \"Query\" [ref=e1]\n- button \"Go\" [ref=e2]\n"
        );
        let again = render(&nodes, &mut refs, None, 10_000);
        assert_eq!(first, again, "the same nodes keep their refs");
        assert_eq!(
            render(&nodes, &mut refs, Some("go"), 10_000),
            "- button \"Go\" [ref=e2]\n"
        );
        assert_eq!(refs.node(2), Some(5));
        assert!(render(&nodes, &mut refs, None, 30).contains("cut at max_chars=30"));
    }

    #[test]
    fn refs_parse_in_the_forms_a_model_writes() {
        for r in ["e12", "[ref=e12]", "ref=e12", " e12 "] {
            assert_eq!(parse_ref(r), Some(12), "{r}");
        }
        assert_eq!(parse_ref("12"), None);
    }
}
