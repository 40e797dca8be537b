//! Nested flows: a node that runs a whole other flow as a child run.

use super::*;

const PARENT: &str = r#"[flow]
name = "parent"
[inputs]
t = { type = "string", default = "tides" }
[[node]]
id = "a"
agent = "researcher"
prompt = "topic {{inputs.t}}"
[[node]]
id = "sub"
flow = "child"
depends_on = ["a"]
inputs = { topic = "{{a.output}}" }
[[node]]
id = "w"
agent = "writer"
depends_on = ["sub"]
prompt = "final [{{sub.output}}]"
"#;

const CHILD: &str = r#"[flow]
name = "child"
[inputs]
topic = { type = "string" }
[[node]]
id = "c1"
agent = "researcher"
prompt = "child got {{inputs.topic}}"
[[node]]
id = "c2"
agent = "writer"
depends_on = ["c1"]
prompt = "child wrote {{c1.output}}"
"#;

fn defs() -> Vec<FlowDef> {
    vec![flow(PARENT), flow(CHILD)]
}

#[actix_rt::test]
async fn a_flow_node_runs_the_child_flow_and_its_output_is_the_nodes() {
    let rig = Rig::new().await;
    let f = rig.engine(&defs());
    let s = f.start_named("parent", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    let child_out = "echo: child wrote echo: child got echo: topic tides";
    assert_eq!(r.nodes["sub"].output, Some(Value::String(child_out.into())));
    assert_eq!(
        rig.prompts().last().unwrap(),
        &format!("final [{child_out}]")
    );
    let runs = f.runs().unwrap();
    let child = runs.iter().find(|c| c.def.name == "child").unwrap();
    assert_eq!(child.state, RunState::Succeeded);
    assert_eq!(
        child.request_id.as_deref(),
        r.nodes["sub"].items[0].request_id.as_deref(),
        "the child run is keyed by the node's request id"
    );
}

#[actix_rt::test]
async fn a_cancel_of_the_parent_cancels_the_child_run_and_starts_nothing_after() {
    let rig = Rig::new().await;
    rig.script(|_, text| {
        if text.starts_with("child got") {
            Act::Hold
        } else {
            Act::Reply("r".into())
        }
    });
    let f = rig.engine(&defs());
    let s = f.start_named("parent", &no_inputs(), None).await.unwrap();
    let _held = rig.held(1).await;
    f.cancel(&s.run.id, "stop").await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Cancelled, "{r:#?}");
    assert_eq!(r.nodes["sub"].state, NodeState::Cancelled);
    assert_eq!(r.nodes["w"].state, NodeState::Cancelled);
    let child = f
        .runs()
        .unwrap()
        .into_iter()
        .find(|c| c.def.name == "child")
        .unwrap();
    let child = ended(&f, &child.id).await;
    assert_eq!(child.state, RunState::Cancelled);
    assert_eq!(child.nodes["c2"].state, NodeState::Cancelled);
    assert_eq!(rig.seen.lock().unwrap().len(), 2, "a and c1 only");
}

#[actix_rt::test]
async fn a_restarted_engine_resumes_parent_and_child_without_running_anything_twice() {
    let rig = Rig::new().await;
    rig.script(|agent, text| {
        if agent == "writer" && text.starts_with("child wrote") {
            Act::Hold
        } else {
            Act::Reply(format!("echo: {text}"))
        }
    });
    let first = rig.engine(&defs());
    let s = first
        .start_named("parent", &no_inputs(), None)
        .await
        .unwrap();
    let held = rig.held(1).await;
    first.stop();
    let second = rig.engine(&defs());
    assert_eq!(second.resume().unwrap(), 2, "the parent and its child");
    reply(held.into_iter().next().unwrap().1, "child done").await;
    let r = ended(&second, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    assert_eq!(
        r.nodes["sub"].output,
        Some(Value::String("child done".into()))
    );
    assert_eq!(rig.seen.lock().unwrap().len(), 4, "a, c1, c2, w: each once");
    assert_eq!(second.runs().unwrap().len(), 2, "one child run");
}

#[actix_rt::test]
async fn a_failed_child_fails_the_node_with_the_childs_error() {
    let rig = Rig::new().await;
    rig.script(|_, text| {
        if text.starts_with("child got") {
            Act::Fail("no sources".into())
        } else {
            Act::Reply("r".into())
        }
    });
    let f = rig.engine(&defs());
    let s = f.start_named("parent", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.nodes["sub"].state, NodeState::Failed, "{r:#?}");
    let e = r.nodes["sub"].error.clone().unwrap();
    assert!(
        e.contains("child flow \"child\"") && e.contains("node \"c1\": no sources"),
        "{e}"
    );
    assert_eq!(r.nodes["w"].state, NodeState::Skipped);
    assert_eq!(r.state, RunState::PartiallySucceeded);
}

#[actix_rt::test]
async fn a_child_run_never_outlives_its_parents_deadline() {
    let rig = Rig::new().await;
    rig.script(|_, text| {
        if text.starts_with("child got") {
            Act::Hold
        } else {
            Act::Reply("r".into())
        }
    });
    // The parent flow has 10 minutes; the child flow has an hour of its own.
    let parent = PARENT.replace("name = \"parent\"", "name = \"parent\"\ntimeout = \"10m\"");
    let child = CHILD.replace("name = \"child\"", "name = \"child\"\ntimeout = \"1h\"");
    let f = rig.engine(&[flow(&parent), flow(&child)]);
    let s = f.start_named("parent", &no_inputs(), None).await.unwrap();
    let held = rig.held(1).await;
    let parent_deadline = s.run.deadline_ms.unwrap();
    let c = f
        .runs()
        .unwrap()
        .into_iter()
        .find(|c| c.def.name == "child")
        .unwrap();
    assert_eq!(
        c.deadline_ms,
        Some(parent_deadline),
        "the child's hour is clipped to the parent's 10 minutes"
    );
    assert_eq!(
        held[0].1.envelope().deadline,
        Some(parent_deadline),
        "and so is the child's node task"
    );
    f.cancel(&s.run.id, "done").await.unwrap();
    ended(&f, &s.run.id).await;
}
