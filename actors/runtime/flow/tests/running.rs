//! Running: parallel ready nodes, templates, for_each, request ids, cancel, resume.

use super::*;

const DIAMOND: &str = r#"[flow]
name = "diamond"
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
[[node]]
id = "d"
agent = "writer"
depends_on = ["b", "c"]
prompt = "combine [{{b.output}}] and [{{c.output}}]"
"#;

#[actix_rt::test]
async fn a_diamond_runs_its_middle_nodes_at_once_and_the_last_prompt_holds_both() {
    let rig = Rig::new().await;
    rig.script(|agent, _| {
        if agent == "researcher" {
            Act::Hold
        } else {
            Act::Reply("done".into())
        }
    });
    let f = rig.engine(&[flow(DIAMOND)]);
    let s = f.start_named("diamond", &no_inputs(), None).await.unwrap();
    let mut a = rig.held(1).await;
    assert_eq!(a[0].0.text, "start tides");
    assert!(
        a[0].0
            .request_id
            .starts_with(&format!("flow:{}:a:0:1", s.run.id))
    );
    reply(a.remove(0).1, "A").await;
    // Both middle nodes are held at the same time: they run in parallel.
    let both = rig.held(2).await;
    let mut texts: Vec<&str> = both.iter().map(|(s, _)| s.text.as_str()).collect();
    texts.sort();
    assert_eq!(texts, ["b from A", "c from A"]);
    for (s, d) in both {
        let out = if s.text.starts_with('b') {
            "B-out"
        } else {
            "C-out"
        };
        reply(d, out).await;
    }
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    let last = rig.prompts().last().cloned().unwrap();
    assert_eq!(last, "combine [B-out] and [C-out]");
    assert_eq!(r.nodes["d"].output, Some(Value::String("done".into())));
    assert_eq!(r.nodes["a"].attempts, 1);
}

#[actix_rt::test]
async fn for_each_keeps_at_most_max_parallel_running_and_results_in_item_order() {
    let rig = Rig::new().await;
    let list: Vec<String> = (0..10).map(|i| format!("i{i}")).collect();
    let json = serde_json::to_string(&list).unwrap();
    rig.script(move |_, text| {
        if text == "list" {
            Act::Reply(json.clone())
        } else {
            Act::Hold
        }
    });
    let def = flow(
        "[flow]\nname = \"fan\"\n[[node]]\nid = \"list\"\nagent = \"writer\"\nprompt = \"list\"\n[[node]]\nid = \"each\"\nagent = \"researcher\"\ndepends_on = [\"list\"]\nfor_each = \"{{list.output}}\"\nmax_parallel = 3\nprompt = \"do {{item}}\"\n",
    );
    let f = rig.engine(&[def]);
    let s = f.start_named("fan", &no_inputs(), None).await.unwrap();
    // Three are held at once before any is answered: max_parallel is reached.
    let mut batch = rig.held(3).await;
    let mut done = 0;
    while done < 10 {
        if batch.is_empty() {
            batch = rig.held(1).await;
        }
        // Answer out of order: the latest first when several are held.
        for (seen, d) in batch.drain(..).rev() {
            let item = seen.text.trim_start_matches("do ").to_string();
            reply(d, &format!("r-{item}")).await;
            done += 1;
        }
    }
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    assert!(
        *rig.peak.lock().unwrap() <= 3,
        "never more than 3 at once, saw {}",
        rig.peak.lock().unwrap()
    );
    assert_eq!(*rig.peak.lock().unwrap(), 3, "3 run at once");
    let want: Vec<Value> = (0..10).map(|i| Value::String(format!("r-i{i}"))).collect();
    assert_eq!(r.nodes["each"].output, Some(Value::Array(want)));
}

#[actix_rt::test]
async fn the_same_request_id_starts_one_run() {
    let rig = Rig::new().await;
    let f = rig.engine(&[flow(DIAMOND)]);
    let one = f
        .start_named("diamond", &no_inputs(), Some("req-1".into()))
        .await
        .unwrap();
    let two = f
        .start_named("diamond", &no_inputs(), Some("req-1".into()))
        .await
        .unwrap();
    assert!(!one.duplicate && two.duplicate);
    assert_eq!(one.run.id, two.run.id);
    ended(&f, &one.run.id).await;
    assert_eq!(rig.seen.lock().unwrap().len(), 4, "each node ran once");
    assert_eq!(f.runs().unwrap().len(), 1);
}

#[actix_rt::test]
async fn a_cancel_mid_flow_stops_it_and_starts_no_dependant() {
    let rig = Rig::new().await;
    rig.script(|_, _| Act::Hold);
    let f = rig.engine(&[flow(DIAMOND)]);
    let s = f.start_named("diamond", &no_inputs(), None).await.unwrap();
    let a = rig.held(1).await;
    f.cancel(&s.run.id, "stop").await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Cancelled);
    for n in ["b", "c", "d"] {
        assert_eq!(r.nodes[n].state, NodeState::Cancelled, "{n}");
    }
    // The held task of a was cancelled by the bus; finishing it now changes nothing.
    drop(a);
    assert_eq!(rig.seen.lock().unwrap().len(), 1, "no dependant started");
    let again = f.cancel(&s.run.id, "again").await.unwrap();
    assert_eq!(again.state, RunState::Cancelled);
}

#[actix_rt::test]
async fn a_restarted_engine_resumes_without_running_finished_nodes_again() {
    let rig = Rig::new().await;
    rig.script(|agent, _| {
        if agent == "writer" {
            Act::Hold
        } else {
            Act::Reply("r".into())
        }
    });
    let def = flow(DIAMOND);
    let first = rig.engine(std::slice::from_ref(&def));
    let s = first
        .start_named("diamond", &no_inputs(), None)
        .await
        .unwrap();
    let held = rig.held(1).await;
    assert_eq!(held[0].0.agent, "writer", "a, b and c finished; d runs");
    // The engine stops (its process died); d's task is still on the bus.
    first.stop();
    let second = rig.engine(&[def]);
    assert_eq!(second.resume().unwrap(), 1);
    reply(held.into_iter().next().unwrap().1, "final").await;
    let r = ended(&second, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    assert_eq!(r.nodes["d"].output, Some(Value::String("final".into())));
    assert_eq!(rig.seen.lock().unwrap().len(), 4, "no node ran twice");
}

#[actix_rt::test]
async fn a_request_id_claimed_by_a_process_that_died_before_its_record_starts_that_run() {
    let rig = Rig::new().await;
    let store = SledFlows::open(&rig.db).unwrap();
    assert_eq!(store.claim("req-lost", "0123abcd").unwrap(), "0123abcd");
    let f = rig.engine(&[flow(DIAMOND)]);
    let s = f
        .start_named("diamond", &no_inputs(), Some("req-lost".into()))
        .await
        .unwrap();
    assert_eq!((s.run.id.as_str(), s.duplicate), ("0123abcd", false));
    assert_eq!(ended(&f, "0123abcd").await.state, RunState::Succeeded);
}
