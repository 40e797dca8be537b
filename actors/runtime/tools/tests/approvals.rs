//! `exec` in ask mode: the approval request it raises, answered (or not) through the approvals
//! store.

use crate::approvals::Approvals;
use crate::approvals::tests::{NET, fx, next};
use crate::tools::{ExecTool, ToolContext, ToolSet};
use clawbus_core::config::{ExecDef, ExecRule, ExecSecurity};
use serde_json::{Value, json};
use std::time::Duration;

fn ask_tool(approvals: &Approvals, approval_timeout: Duration) -> ExecTool {
    let def = ExecDef {
        security: ExecSecurity::Ask,
        allow: vec![ExecRule::Command {
            pattern: "ls".into(),
            shell: false,
        }],
        approval_timeout,
        ..ExecDef::default()
    };
    ExecTool::new("coder", def, Some(approvals.clone()))
}

async fn exec(tool: &ExecTool, ws: &std::path::Path, command: &str) -> crate::tools::ToolOutput {
    let ctx = ToolContext {
        workspace: ws.to_path_buf(),
        agent: clawbus_core::ids::AgentId::new("coder"),
        session: clawbus_core::ids::SessionKey::parse("agent:a:s1").unwrap(),
        channel: "api".into(),
        run: None,
    };
    ToolSet::default()
        .with(tool.clone())
        .invoke(
            &ctx,
            "exec",
            &json!({ "command": command }).to_string(),
            10_000,
        )
        .await
}

#[actix_rt::test]
async fn exec_in_ask_mode_runs_once_approved_and_always_skips_the_next_ask() {
    let f = fx().await;
    let ws = tempfile::tempdir().unwrap();
    let tool = ask_tool(&f.approvals, NET);
    let mut sub = f.events().await;
    let call = tokio::spawn({
        let (tool, ws) = (tool.clone(), ws.path().to_path_buf());
        async move { exec(&tool, &ws, "touch made").await }
    });
    let (_, rec) = next(&mut sub).await;
    assert_eq!(rec.command, "touch made");
    assert_eq!(rec.argv, ["touch", "made"], "the exact argv");
    assert!(
        !ws.path().join("made").exists(),
        "nothing runs before the answer"
    );
    f.approvals.resolve(&rec.id, true, true).await.unwrap();
    let out = call.await.unwrap();
    assert_eq!(out.text, "exit code: 0\n");
    assert!(ws.path().join("made").exists());
    assert_eq!(f.approvals.rules("coder").unwrap(), ["touch made"]);
    std::fs::remove_file(ws.path().join("made")).unwrap();
    let out = exec(&tool, ws.path(), "touch made").await;
    assert_eq!(
        out.text, "exit code: 0\n",
        "approved for good: no second ask"
    );
    assert_eq!(f.approvals.list().await.unwrap().len(), 1);
}

#[actix_rt::test]
async fn exec_in_ask_mode_denied_or_unanswered_does_not_run() {
    let f = fx().await;
    let ws = tempfile::tempdir().unwrap();
    let mut sub = f.events().await;
    let tool = ask_tool(&f.approvals, NET);
    let call = tokio::spawn({
        let (tool, ws) = (tool.clone(), ws.path().to_path_buf());
        async move { exec(&tool, &ws, "touch made").await }
    });
    let (_, rec) = next(&mut sub).await;
    f.approvals.resolve(&rec.id, false, false).await.unwrap();
    let out = call.await.unwrap();
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["error"]["type"], "approval_denied", "{}", out.text);

    let quick = ask_tool(&f.approvals, Duration::from_millis(150));
    let out = exec(&quick, ws.path(), "touch made").await;
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["error"]["type"], "approval_timeout", "{}", out.text);
    assert!(!ws.path().join("made").exists());
}
