//! The agent `cron` tool: an agent adds a job for itself and it fires later; the jobs a model
//! adds are held to the minimum interval and the per-agent cap, and marked as the model's.

use crate::cron::tests::{Rig, tick};
use crate::cron::{Job, Scheduler};
use crate::tools::{Tool, ToolContext};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn ctx(agent: &str, dir: &std::path::Path) -> ToolContext {
    ToolContext {
        workspace: dir.to_path_buf(),
        agent: clawbus_core::ids::AgentId::new(agent),
        session: clawbus_core::ids::SessionKey::parse(&format!("agent:{agent}:main")).unwrap(),
        channel: "api".into(),
        run: None,
    }
}

#[actix_rt::test]
async fn an_agent_adds_a_job_with_the_tool_and_it_fires_later() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = Arc::new(rig.scheduler("s1"));
    let tool = crate::tools::cron::CronTool::new(Some(s.clone()));
    let ctx = ctx("a", rig._dir.path());
    let out = tool
        .call(
            &ctx,
            serde_json::json!({ "action": "add", "at": "2026-01-05T09:00:00Z", "message": "water the plants" }),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let job: crate::cron::Job = serde_json::from_str(&out.text).unwrap();
    assert_eq!(job.agent, "a", "jobs an agent adds run on it");
    let listed = tool
        .call(&ctx, serde_json::json!({ "action": "list" }))
        .await;
    assert!(listed.text.contains(job.id.as_str()));
    // Someone else's job is not the agent's to manage; another agent is refused.
    let other = tool
        .call(
            &ctx,
            serde_json::json!({ "action": "add", "agent": "b", "every": "10m", "message": "x" }),
        )
        .await;
    assert!(other.is_error);
    let bad = tool
        .call(
            &ctx,
            serde_json::json!({ "action": "add", "cron": "99 * * * *", "message": "x" }),
        )
        .await;
    assert!(
        bad.is_error && bad.text.contains("invalid cron expression"),
        "{}",
        bad.text
    );
    assert_eq!(s.list().await.unwrap().len(), 1, "nothing stored on error");
    // Not yet; then at 09:00 it fires, once.
    assert!(tick(&s).await.fired.is_empty());
    rig.advance(Duration::from_secs(3600));
    let r = tick(&s).await;
    assert_eq!(r.fired.len(), 1);
    assert_eq!(
        rig.seen.lock().unwrap()[0].payload["text"],
        "water the plants"
    );
    let runs = tool
        .call(&ctx, serde_json::json!({ "action": "runs", "id": job.id }))
        .await;
    assert!(runs.text.contains("succeeded"), "{}", runs.text);
}

/// A tool over a scheduler whose models may add jobs every minute at most, two per agent.
fn limited(rig: &Rig) -> (Arc<Scheduler>, crate::tools::cron::CronTool) {
    let bus: Arc<dyn bus::Bus> = rig.bus.clone();
    let settings = rig.settings().with_tool_limits(Duration::from_secs(60), 2);
    let s = Arc::new(Scheduler::new(&rig.db, bus, rig.clock.clone(), "s1", settings).unwrap());
    let tool = crate::tools::cron::CronTool::new(Some(s.clone()));
    (s, tool)
}

/// The error type of a failed tool output, and the output as JSON.
fn refusal(out: &crate::tools::ToolOutput) -> (String, serde_json::Value) {
    assert!(out.is_error, "{}", out.text);
    let v: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    (v["error"]["type"].as_str().unwrap().to_string(), v)
}

#[actix_rt::test]
async fn the_tool_refuses_a_job_that_fires_more_often_than_the_minimum_interval() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (s, tool) = limited(&rig);
    let ctx = ctx("a", rig._dir.path());
    let add = |sched: serde_json::Value| {
        let mut args = json!({ "action": "add", "message": "poll" });
        args.as_object_mut()
            .unwrap()
            .extend(sched.as_object().unwrap().clone());
        args
    };
    for sched in [
        json!({ "every": "1s" }),
        json!({ "every": "59s" }),
        json!({ "cron": "* * * * * *" }),
        json!({ "cron": "*/30 * * * * *" }),
    ] {
        let out = tool.call(&ctx, add(sched.clone())).await;
        let (kind, v) = refusal(&out);
        assert_eq!(kind, "too_frequent", "{sched}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains("at most every 1m"), "{message}");
    }
    let out = tool.call(&ctx, add(json!({ "every": "1s" }))).await;
    assert!(out.text.contains("it fires every 1s"), "{}", out.text);
    assert!(s.list().await.unwrap().is_empty(), "nothing stored");
    // A minute is allowed; rescheduling it faster is refused, renaming it is not.
    let out = tool.call(&ctx, add(json!({ "every": "1m" }))).await;
    assert!(!out.is_error, "{}", out.text);
    let job: Job = serde_json::from_str(&out.text).unwrap();
    let faster = json!({ "action": "update", "id": job.id, "every": "10s" });
    assert_eq!(refusal(&tool.call(&ctx, faster).await).0, "too_frequent");
    let renamed = json!({ "action": "update", "id": job.id, "name": "poller" });
    assert!(!tool.call(&ctx, renamed).await.is_error);
    // A person may schedule every second; the model may still rename that job.
    let mut by_hand = crate::cron::tests::every(1_000, rig.clock_now());
    by_hand.name = Some("by hand".into());
    let hand = s.add(&by_hand).await.unwrap();
    assert_eq!(hand.created_by, None);
    let renamed = json!({ "action": "update", "id": hand.id, "name": "still every second" });
    assert!(!tool.call(&ctx, renamed).await.is_error);
}

#[actix_rt::test]
async fn the_tool_caps_the_jobs_models_created_per_agent_and_marks_them() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let (s, tool) = limited(&rig);
    let ctx = ctx("a", rig._dir.path());
    let add = json!({ "action": "add", "every": "1h", "message": "check" });
    // A job a person added does not count.
    s.add(&crate::cron::tests::every(3_600_000, rig.clock_now()))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = tool.call(&ctx, add.clone()).await;
        assert!(!out.is_error, "{}", out.text);
        let job: Job = serde_json::from_str(&out.text).unwrap();
        assert_eq!(job.created_by.as_deref(), Some("agent:a"));
        ids.push(job.id);
    }
    let (kind, v) = refusal(&tool.call(&ctx, add.clone()).await);
    assert_eq!(kind, "too_many_jobs", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("2 jobs"),
        "{v}"
    );
    assert!(v["error"]["suggestion"].as_str().is_some(), "{v}");
    assert_eq!(s.list().await.unwrap().len(), 3);
    // The list marks who made each job; removing one makes room again.
    let listed = tool.call(&ctx, json!({ "action": "list" })).await;
    let views: Vec<serde_json::Value> = serde_json::from_str(&listed.text).unwrap();
    let marked = views
        .iter()
        .filter(|v| v["job"]["created_by"] == "agent:a")
        .count();
    assert_eq!(marked, 2);
    let removed = json!({ "action": "remove", "id": ids[0] });
    assert!(!tool.call(&ctx, removed).await.is_error);
    assert!(!tool.call(&ctx, add).await.is_error);
}
