#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::template::{Clause, Op, Operand};
use super::*;
use std::collections::BTreeMap;
use std::path::Path;

fn agents() -> Vec<AgentId> {
    ["researcher", "writer"].map(AgentId::new).to_vec()
}

fn lanes() -> Vec<String> {
    vec!["main".into(), "cron".into()]
}

/// The problems of a flow text, rendered.
fn problems(text: &str) -> Vec<String> {
    let (def, problems) = check_text(Path::new("flows.d/f.toml"), text, &agents(), &lanes());
    assert_eq!(
        def.is_none(),
        !problems.is_empty(),
        "a flow comes back only without problems"
    );
    problems.iter().map(ToString::to_string).collect()
}

const DIAMOND: &str = r#"[flow]
name = "diamond"
timeout = "5m"

[inputs]
topic = { type = "string", default = "tides" }

[[node]]
id = "a"
agent = "researcher"
prompt = "start {{inputs.topic}}"

[[node]]
id = "b"
agent = "researcher"
depends_on = ["a"]
prompt = "b from {{a.output}}"

[[node]]
id = "c"
agent = "researcher"
depends_on = ["a"]
prompt = "c from {{a.output}}"
output_schema = { type = "object", required = ["verdict"], properties = { verdict = { type = "string", enum = ["pass", "fail"] } } }

[[node]]
id = "d"
agent = "writer"
depends_on = ["b", "c"]
when = "c.output.verdict == \"pass\""
prompt = "combine {{b.output}} and {{c.output.verdict}}"
"#;

#[test]
fn a_good_flow_is_ordered_by_its_dependencies() {
    let (def, problems) = check_text(Path::new("f.toml"), DIAMOND, &agents(), &lanes());
    assert!(problems.is_empty(), "{problems:?}");
    let def = def.unwrap();
    let order: Vec<&str> = def.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(order.first(), Some(&"a"));
    assert_eq!(order.last(), Some(&"d"));
    assert_eq!(def.timeout, Some(std::time::Duration::from_secs(300)));
    let d = def.node("d").unwrap();
    assert_eq!(d.max_attempts, DEFAULT_MAX_ATTEMPTS);
    let when = d.when.as_ref().unwrap();
    assert_eq!(
        when.clauses,
        [Clause {
            left: Operand::Ref(Ref::Output {
                node: "c".into(),
                path: vec!["verdict".into()]
            }),
            right: Some((Op::Eq, Operand::Literal("pass".into()))),
        }]
    );
}

#[test]
fn a_cycle_is_named_at_the_dependency_that_closes_it() {
    let text = "[flow]\nname = \"c\"\n\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\ndepends_on = [\"b\"]\n\n[[node]]\nid = \"b\"\nagent = \"writer\"\nprompt = \"y\"\ndepends_on = [\"a\"]\n";
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with(
            "flows.d/f.toml:14:15: field \"node[1].depends_on[0]\": dependency cycle: a → b → a"
        ),
        "{p:?}"
    );
}

#[test]
fn unknown_dependency_and_agent_are_placed() {
    let text = "[flow]\nname = \"u\"\n\n[[node]]\nid = \"a\"\nagent = \"nobody\"\nprompt = \"x\"\ndepends_on = [\"ghost\"]\n";
    let p = problems(text);
    assert!(
        p.iter().any(|p| p.starts_with(
            "flows.d/f.toml:8:15: field \"node[0].depends_on[0]\": unknown node \"ghost\""
        )),
        "{p:?}"
    );
    let text = "[flow]\nname = \"u\"\n\n[[node]]\nid = \"a\"\nagent = \"nobody\"\nprompt = \"x\"\n";
    let p = problems(text);
    assert!(
        p[0].starts_with("flows.d/f.toml:6:9: field \"node[0].agent\": unknown agent \"nobody\" (expected one of: researcher, writer)"),
        "{p:?}"
    );
}

#[test]
fn a_template_naming_a_node_that_is_not_upstream_is_placed_at_the_reference() {
    let text = "[flow]\nname = \"t\"\n\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\n\n[[node]]\nid = \"b\"\nagent = \"writer\"\nprompt = \"see {{a.output}}\"\n";
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("flows.d/f.toml:12:17: field \"node[1].prompt\": node \"a\" is not upstream of this node"),
        "{p:?}"
    );
    let when = "[flow]\nname = \"t\"\n\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\nwhen = \"b.state == 'failed'\"\n\n[[node]]\nid = \"b\"\nagent = \"writer\"\nprompt = \"y\"\n";
    let p = problems(when);
    assert!(
        p[0].contains("field \"node[0].when\": node \"b\" is not upstream"),
        "{p:?}"
    );
}

#[test]
fn invalid_schemas_inputs_and_values_are_refused() {
    let text = r#"[flow]
name = "s"
on_failure = "explode"

[inputs]
n = { type = "integer", default = "three" }
m = { type = "money" }

[[node]]
id = "a"
agent = "writer"
prompt = "{{inputs.nope}}"
output_schema = { type = "objekt", patternProperties = {} }
max_attempts = 9
retry_on = ["timeout", "sometimes"]
"#;
    let p = problems(text).join("\n");
    for want in [
        "f.toml:3:14: field \"flow.on_failure\": unknown policy \"explode\"",
        "f.toml:6:35: field \"inputs.n.default\": \"three\" is not a valid integer",
        "f.toml:7:14: field \"inputs.m.type\": unknown type \"money\"",
        "f.toml:12:13: field \"node[0].prompt\": no input \"nope\"",
        "field \"node[0].output_schema\": invalid schema:",
        "/type: unknown type \"objekt\"",
        "unsupported keyword \"patternProperties\"",
        "field \"node[0].max_attempts\": 9 is out of range (expected 1 to 5)",
        "field \"node[0].retry_on\": unknown class \"sometimes\"",
    ] {
        assert!(p.contains(want), "missing {want:?} in:\n{p}");
    }
}

#[test]
fn for_each_must_name_an_upstream_output_and_item_only_lives_there() {
    let text = "[flow]\nname = \"f\"\n\n[[node]]\nid = \"list\"\nagent = \"writer\"\nprompt = \"x\"\n\n[[node]]\nid = \"each\"\nagent = \"writer\"\ndepends_on = [\"list\"]\nfor_each = \"{{list.output.items}}\"\nmax_parallel = 3\nprompt = \"do {{item}}\"\n\n[[node]]\nid = \"bad\"\nagent = \"writer\"\nprompt = \"{{item.x}}\"\n";
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("field \"node[2].prompt\": \"item\" outside a for_each node"),
        "{p:?}"
    );
}

#[test]
fn run_inputs_are_typed_and_defaulted() {
    let text = "[flow]\nname = \"i\"\n\n[inputs]\nn = { type = \"integer\" }\ntopic = { type = \"string\", default = \"tides\" }\n\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"{{inputs.n}} {{inputs.topic}}\"\n";
    let (def, p) = check_text(Path::new("f.toml"), text, &agents(), &lanes());
    assert!(p.is_empty(), "{p:?}");
    let def = def.unwrap();
    let given = |k: &str, v: serde_json::Value| BTreeMap::from([(k.to_string(), v)]);
    let ok = resolve_inputs(&def, &given("n", "3".into())).unwrap();
    assert_eq!(ok["n"], 3);
    assert_eq!(ok["topic"], "tides");
    let e = resolve_inputs(&def, &given("n", "three".into())).unwrap_err();
    assert_eq!(e, "input \"n\": \"three\" is not a valid integer");
    let e = resolve_inputs(&def, &BTreeMap::new()).unwrap_err();
    assert!(e.starts_with("input \"n\" is required"), "{e}");
    let e = resolve_inputs(&def, &given("m", 1.into())).unwrap_err();
    assert!(e.starts_with("flow \"i\" has no input \"m\""), "{e}");
}

#[test]
fn schema_validation_names_each_violation() {
    let schema = serde_json::json!({
        "type": "object",
        "required": ["verdict", "score"],
        "additionalProperties": false,
        "properties": {"verdict": {"enum": ["pass", "fail"]}, "score": {"type": "integer", "maximum": 10}}
    });
    assert!(schema::check(&schema).is_empty());
    let errors = schema::validate(
        &schema,
        &serde_json::json!({"verdict": "maybe", "score": 11, "x": 1}),
    );
    assert_eq!(
        errors,
        [
            "/score: 11 is above the maximum 10",
            "/verdict: \"maybe\" is not one of: \"pass\", \"fail\"",
            "/: property \"x\" is not allowed"
        ]
    );
    let missing = schema::validate(&schema, &serde_json::json!({}));
    assert_eq!(missing.len(), 2);
    assert_eq!(
        schema::parse_answer("Here:\n```json\n{\"a\": 1}\n```").unwrap(),
        serde_json::json!({"a": 1})
    );
    assert!(schema::parse_answer("no json").is_err());
}

#[test]
fn the_shipped_flows_check_against_the_shipped_agents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let opts = crate::config::LoadOptions::in_folder(&root);
    let config = crate::config::load(&opts).unwrap_or_else(|r| panic!("{}", r.render()));
    assert!(!config.flows.is_empty(), "flows.d/ ships at least one flow");
}

/// A checked flow from a text at `path`.
fn checked(path: &str, text: &str) -> FlowDef {
    let (def, problems) = check_text(Path::new(path), text, &agents(), &lanes());
    assert!(problems.is_empty(), "{problems:?}");
    def.unwrap()
}

#[test]
fn a_node_that_runs_a_flow_takes_inputs_from_upstream_and_has_no_agent() {
    let parent = checked(
        "flows.d/p.toml",
        "[flow]\nname = \"p\"\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\n[[node]]\nid = \"sub\"\nflow = \"child\"\ndepends_on = [\"a\"]\ninputs = { topic = \"{{a.output}}!\" }\n",
    );
    let sub = parent.node("sub").unwrap();
    assert_eq!(sub.agent, None);
    let f = sub.flow.as_ref().unwrap();
    assert_eq!((f.name.as_str(), f.line, f.col), ("child", 9, 8));
    assert_eq!(f.inputs["topic"].render(|_| "A".into()), "A!");
    let child = checked(
        "flows.d/child.toml",
        "[flow]\nname = \"child\"\n[inputs]\ntopic = { type = \"string\" }\n[[node]]\nid = \"w\"\nagent = \"writer\"\nprompt = \"{{inputs.topic}}\"\n",
    );
    assert!(check_nested(&[parent.clone(), child], &[]).is_empty());
    // Agent fields on a flow node, a reference that is not upstream.
    let p = problems(
        "[flow]\nname = \"p\"\n[[node]]\nid = \"a\"\nagent = \"writer\"\nprompt = \"x\"\n[[node]]\nid = \"sub\"\nflow = \"child\"\nagent = \"writer\"\ninputs = { topic = \"{{a.output}}\" }\n",
    );
    assert!(
        p.iter().any(|p| p.starts_with(
            "flows.d/f.toml:10:9: field \"node[1].agent\": agent is for a node that runs an agent"
        )),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|p| p.contains("node[1].inputs.topic") && p.contains("not upstream")),
        "{p:?}"
    );
}

#[test]
fn a_cycle_between_flows_and_an_unknown_flow_or_input_are_placed_at_the_flow_node() {
    let a = checked(
        "flows.d/a.toml",
        "[flow]\nname = \"a\"\n[[node]]\nid = \"x\"\nflow = \"b\"\n",
    );
    let b = checked(
        "flows.d/b.toml",
        "[flow]\nname = \"b\"\n[[node]]\nid = \"w\"\nagent = \"writer\"\nprompt = \"p\"\n[[node]]\nid = \"y\"\ndepends_on = [\"w\"]\nflow = \"a\"\n",
    );
    let p: Vec<String> = check_nested(&[a.clone(), b], &[])
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        p,
        [
            "flows.d/b.toml:10:8: field \"node[1].flow\": flow cycle: a → b → a (expected flows that do not run themselves)"
        ]
    );
    let own = checked(
        "flows.d/own.toml",
        "[flow]\nname = \"own\"\n[[node]]\nid = \"x\"\nflow = \"own\"\n",
    );
    let p = check_nested(&[own], &[]);
    assert!(p[0].to_string().contains("flow cycle: own → own"), "{p:?}");
    let c = checked(
        "flows.d/c.toml",
        "[flow]\nname = \"c\"\n[[node]]\nid = \"x\"\nflow = \"ghost\"\n[[node]]\nid = \"y\"\nflow = \"a\"\ninputs = { nope = \"1\" }\n",
    );
    let p: Vec<String> = check_nested(&[c], &[a])
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p[0].starts_with("flows.d/c.toml:5:8: field \"node[0].flow\": unknown flow \"ghost\""),
        "{p:?}"
    );
    assert!(
        p[1].starts_with(
            "flows.d/c.toml:8:8: field \"node[1].inputs.nope\": flow \"a\" has no input \"nope\""
        ),
        "{p:?}"
    );
}
