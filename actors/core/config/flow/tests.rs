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
