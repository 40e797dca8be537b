//! The agent `cron` tool: an agent adds a job for itself and it fires later.

use super::{Rig, tick};
use crate::tools::{Tool, ToolContext};
use std::sync::Arc;
use std::time::Duration;

fn ctx(agent: &str, dir: &std::path::Path) -> ToolContext {
    ToolContext {
        workspace: dir.to_path_buf(),
        agent: agent.into(),
        session: format!("agent:{agent}:main"),
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
    assert_eq!(s.list().unwrap().len(), 1, "nothing stored on error");
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
