//! The memory tools (`memory_search`, `memory_get`) over a workspace's memory files.

use crate::memory::MemoryIndex;
use crate::memory::tests::{noon, put, workspace};
use crate::tools::{MemoryGetTool, MemorySearchTool, Tool, ToolContext, ToolSet};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.canonicalize().unwrap(),
        agent: clawbus_core::ids::AgentId::new("a"),
        session: clawbus_core::ids::SessionKey::parse("agent:a:s").unwrap(),
        channel: "api".into(),
        run: None,
    }
}

#[tokio::test]
async fn memory_search_tool_answers_with_file_and_line_range() {
    let ws = workspace();
    put(
        ws.path(),
        "MEMORY.md",
        "# People\nAda prefers tea.\n\n# Places\nThe office is in Leipzig.\n",
    );
    let clock = bus::ManualClock::new(noon("2026-03-01").timestamp_millis() as u64);
    let tool = MemorySearchTool::with_clock(clock);
    let out = tool
        .call(
            &ctx(ws.path()),
            json!({ "query": "where is the office", "k": 1 }),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["results"][0]["path"], "MEMORY.md");
    assert_eq!(v["results"][0]["from_line"], 4);
    assert_eq!(v["results"][0]["to_line"], 5);
    assert!(
        v["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Leipzig")
    );
}

#[tokio::test]
async fn memory_get_returns_a_line_range_of_a_memory_file_only() {
    let ws = workspace();
    put(ws.path(), "MEMORY.md", "one\ntwo\nthree\nfour\n");
    put(ws.path(), "memory/2026-03-01.md", "a\nb\n");
    put(ws.path(), "AGENTS.md", "not memory\n");
    let c = ctx(ws.path());
    let get = |args: Value| {
        let c = c.clone();
        async move { MemoryGetTool.call(&c, args).await }
    };
    let out = get(json!({ "path": "MEMORY.md", "from_line": 2, "to_line": 3 })).await;
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["text"], "two\nthree");
    assert_eq!(v["total_lines"], 4);
    let out = get(json!({ "path": "memory/2026-03-01.md" })).await;
    assert_eq!(
        serde_json::from_str::<Value>(&out.text).unwrap()["text"],
        "a\nb"
    );
    for refused in [
        "AGENTS.md",
        "../MEMORY.md",
        "memory/../AGENTS.md",
        "/etc/passwd",
    ] {
        let out = get(json!({ "path": refused })).await;
        assert!(out.is_error, "{refused}: {}", out.text);
        assert!(out.text.contains("path_refused"), "{refused}: {}", out.text);
    }
    let out = get(json!({ "path": "memory/nope.md" })).await;
    assert!(out.text.contains("not_found"), "{}", out.text);
    let out = get(json!({ "path": "MEMORY.md", "from_line": 9 })).await;
    assert!(out.text.contains("offset_out_of_range"), "{}", out.text);
}

#[cfg(unix)]
#[tokio::test]
async fn a_memory_symlink_cannot_reach_outside_the_memory_files() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "secret.md", "outside secret\n");
    put(ws.path(), "AGENTS.md", "agents\n");
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        ws.path().join("memory/out.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(ws.path().join("AGENTS.md"), ws.path().join("memory/in.md"))
        .unwrap();
    for path in ["memory/out.md", "memory/in.md"] {
        let out = MemoryGetTool
            .call(&ctx(ws.path()), json!({ "path": path }))
            .await;
        assert!(out.text.contains("path_refused"), "{path}: {}", out.text);
    }
    let mut index = MemoryIndex::new();
    index.refresh(ws.path()).unwrap();
    assert!(
        index
            .search("outside secret", 5, noon("2026-03-01"))
            .is_empty(),
        "the index skips a link leading out of the workspace"
    );
}

#[test]
fn memory_tools_are_built_in() {
    let names = ToolSet::builtin().names();
    assert!(
        names.contains(&"memory_search") && names.contains(&"memory_get"),
        "{names:?}"
    );
    let _ = Arc::new(MemorySearchTool::default());
}
