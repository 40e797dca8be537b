//! Schemas, retries, conditions and the failure policies.

use super::*;

const SCHEMA: &str = r#"[flow]
name = "s"
[[node]]
id = "review"
agent = "writer"
prompt = "review it"
max_attempts = 2
output_schema = { type = "object", required = ["verdict"], properties = { verdict = { enum = ["pass", "fail"] } } }
[[node]]
id = "after"
agent = "writer"
depends_on = ["review"]
prompt = "after {{review.output.verdict}}"
"#;

#[actix_rt::test]
async fn a_schema_miss_is_retried_with_the_errors_and_then_accepted() {
    let rig = Rig::new().await;
    let mut n = 0;
    rig.script(move |_, text| {
        n += 1;
        match n {
            1 => Act::Reply("{\"verdict\": \"maybe\"}".into()),
            2 => Act::Reply("```json\n{\"verdict\": \"pass\"}\n```".into()),
            _ => Act::Reply(format!("echo: {text}")),
        }
    });
    let f = rig.engine(&[flow(SCHEMA)]);
    let s = f.start_named("s", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    let p = rig.prompts();
    assert!(
        p[0].starts_with("review it") && p[0].contains("JSON Schema"),
        "{p:?}"
    );
    assert!(
        p[1].contains("/verdict: \"maybe\" is not one of: \"pass\", \"fail\""),
        "the retry carries the errors: {}",
        p[1]
    );
    assert_eq!(p[2], "after pass");
    assert_eq!(r.nodes["review"].attempts, 2);
    assert_eq!(
        r.nodes["review"].output,
        Some(serde_json::json!({"verdict": "pass"}))
    );
}

#[actix_rt::test]
async fn still_invalid_after_its_attempts_the_node_fails_and_downstream_is_skipped() {
    let rig = Rig::new().await;
    rig.script(|_, _| Act::Reply("not json".into()));
    let f = rig.engine(&[flow(SCHEMA)]);
    let s = f.start_named("s", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Failed, "{r:#?}");
    let review = &r.nodes["review"];
    assert_eq!((review.state, review.attempts), (NodeState::Failed, 2));
    assert!(
        review.error.as_deref().unwrap().contains("not valid JSON"),
        "{review:?}"
    );
    let after = &r.nodes["after"];
    assert_eq!(after.state, NodeState::Skipped);
    assert_eq!(
        after.reason.as_deref(),
        Some("upstream node \"review\" failed")
    );
    assert_eq!(rig.seen.lock().unwrap().len(), 2, "after never ran");
}

const POLICY: &str = r#"[flow]
name = "p"
on_failure = "POLICY"
[[node]]
id = "bad"
agent = "researcher"
prompt = "bad"
max_attempts = 3
[[node]]
id = "good"
agent = "researcher"
prompt = "good"
[[node]]
id = "then"
agent = "writer"
depends_on = ["bad", "good"]
prompt = "then: error=[{{bad.error}}] state={{bad.state}} good={{good.output}}"
[[node]]
id = "never"
agent = "writer"
depends_on = ["good"]
when = "good.output == 'other'"
prompt = "never"
"#;

fn policy_rig_script(rig: &Rig) {
    rig.script(|_, text| match text {
        "bad" => Act::Fail("model: HTTP 401: no key".into()),
        t => Act::Reply(format!("ok {t}")),
    });
}

#[actix_rt::test]
async fn skip_downstream_skips_dependants_and_the_run_partially_succeeds() {
    let rig = Rig::new().await;
    policy_rig_script(&rig);
    let f = rig.engine(&[flow(&POLICY.replace("POLICY", "skip_downstream"))]);
    let s = f.start_named("p", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::PartiallySucceeded, "{r:#?}");
    // auth is in abort_on: one attempt only.
    assert_eq!(
        (r.nodes["bad"].state, r.nodes["bad"].attempts),
        (NodeState::Failed, 1)
    );
    assert_eq!(r.nodes["then"].state, NodeState::Skipped);
    assert_eq!(r.nodes["never"].state, NodeState::Skipped);
    assert_eq!(
        r.nodes["never"].reason.as_deref(),
        Some("condition is false: good.output == 'other'")
    );
    assert!(!rig.prompts().iter().any(|p| p.starts_with("then")));
}

#[actix_rt::test]
async fn continue_hands_the_error_to_dependants() {
    let rig = Rig::new().await;
    policy_rig_script(&rig);
    let f = rig.engine(&[flow(&POLICY.replace("POLICY", "continue"))]);
    let s = f.start_named("p", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::PartiallySucceeded, "{r:#?}");
    assert_eq!(r.nodes["then"].state, NodeState::Succeeded);
    let then = rig
        .prompts()
        .into_iter()
        .find(|p| p.starts_with("then"))
        .unwrap();
    assert_eq!(
        then,
        "then: error=[model: HTTP 401: no key] state=failed good=ok good"
    );
}

#[actix_rt::test]
async fn a_transient_failure_is_retried_up_to_the_attempts() {
    let rig = Rig::new().await;
    let mut n = 0;
    rig.script(move |_, _| {
        n += 1;
        if n < 3 {
            Act::Fail("model: HTTP 503: busy".into())
        } else {
            Act::Reply("fine".into())
        }
    });
    let def = flow(
        "[flow]\nname = \"t\"\n[[node]]\nid = \"x\"\nagent = \"writer\"\nprompt = \"go\"\nmax_attempts = 3\n",
    );
    let f = rig.engine(&[def]);
    let s = f.start_named("t", &no_inputs(), None).await.unwrap();
    let r = ended(&f, &s.run.id).await;
    assert_eq!(r.state, RunState::Succeeded, "{r:#?}");
    assert_eq!(r.nodes["x"].attempts, 3);
    let ids: Vec<String> = rig
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.request_id.clone())
        .collect();
    assert_eq!(ids[2], format!("flow:{}:x:0:3", s.run.id));
}
