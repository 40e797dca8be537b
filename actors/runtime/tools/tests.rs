use super::*;
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use tempfile::TempDir;

mod approvals;
mod cron;
mod edit;
mod memory;
mod output;
mod secrets;
mod skills;
mod write;

/// A tempdir holding `ws/` (the workspace) and `outside/secret.txt` next to it.
pub(crate) struct Fixture {
    _dir: TempDir,
    top: PathBuf,
    outside: PathBuf,
    pub(crate) ctx: ToolContext,
}

pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let ws = top.join("ws");
    let outside = top.join("outside");
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    let ctx = ToolContext {
        workspace: ws,
        agent: clawbus_core::ids::AgentId::new("tester"),
        session: clawbus_core::ids::SessionKey::parse("agent:tester:test").unwrap(),
        channel: "api".into(),
        run: None,
    };
    Fixture {
        _dir: dir,
        top,
        outside,
        ctx,
    }
}

impl Fixture {
    pub(crate) fn ws(&self) -> &Path {
        &self.ctx.workspace
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutput {
        ToolSet::builtin()
            .invoke(&self.ctx, name, &args.to_string(), 100_000)
            .await
    }

    async fn raw(&self, name: &str, raw: &str) -> ToolOutput {
        ToolSet::builtin()
            .invoke(&self.ctx, name, raw, 100_000)
            .await
    }
}

/// The `error.type` of an error output, checking the output's shape on the way.
pub(crate) fn error_type(out: &ToolOutput) -> String {
    assert!(out.is_error, "expected an error output, got {:?}", out.text);
    let v: Value = serde_json::from_str(&out.text).expect("error output must be JSON");
    v["error"]["message"]
        .as_str()
        .expect("error.message must be a string");
    v["error"]["type"].as_str().unwrap().to_string()
}

pub(crate) fn error_message(out: &ToolOutput) -> String {
    let v: Value = serde_json::from_str(&out.text).unwrap();
    v["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn read_returns_file_text() {
    let f = fixture();
    fs::write(f.ws().join("notes.md"), "one\ntwo\nthree").unwrap();
    let out = f.call("read", json!({"path": "notes.md"})).await;
    assert_eq!(out, ToolOutput::ok("one\ntwo\nthree"));
}

#[tokio::test]
async fn read_with_offset_and_limit_returns_those_lines() {
    let f = fixture();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fs::write(f.ws().join("ten.txt"), text).unwrap();
    let out = f
        .call("read", json!({"path": "ten.txt", "offset": 3, "limit": 2}))
        .await;
    assert_eq!(out, ToolOutput::ok("line 3\nline 4\n"));
    let tail = f
        .call("read", json!({"path": "ten.txt", "offset": 9}))
        .await;
    assert_eq!(tail, ToolOutput::ok("line 9\nline 10\n"));
    let past = f
        .call("read", json!({"path": "ten.txt", "offset": 11}))
        .await;
    assert_eq!(error_type(&past), "offset_out_of_range");
    assert!(error_message(&past).contains("10 lines"), "{}", past.text);
}

#[tokio::test]
async fn read_stops_at_default_limit_and_says_where_to_continue() {
    let f = fixture();
    let text: String = (1..=2005).map(|i| format!("{i}\n")).collect();
    fs::write(f.ws().join("long.txt"), text).unwrap();
    let out = f.call("read", json!({"path": "long.txt"})).await;
    assert!(!out.is_error);
    assert_eq!(out.text.lines().count(), 2001, "2000 lines and the note");
    assert!(out.text.starts_with("1\n2\n"));
    assert!(
        out.text
            .ends_with("2000\n[more lines follow; call read with offset=2001 to continue]"),
        "{}",
        &out.text[out.text.len() - 80..]
    );
}

#[tokio::test]
async fn read_refuses_binary_missing_and_directories() {
    let f = fixture();
    fs::write(f.ws().join("blob.bin"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    fs::write(f.ws().join("latin1.txt"), [b'c', b'a', b'f', 0xe9, b'\n']).unwrap();
    fs::create_dir(f.ws().join("dir")).unwrap();
    let cases = [
        ("blob.bin", "binary_file"),
        ("latin1.txt", "not_utf8"),
        ("nope.txt", "not_found"),
        ("dir", "is_directory"),
        (".", "is_directory"),
    ];
    for (path, kind) in cases {
        let out = f.call("read", json!({"path": path})).await;
        assert_eq!(error_type(&out), kind, "reading {path}");
    }
}

#[tokio::test]
async fn write_then_read_round_trips() {
    let f = fixture();
    let out = f
        .call("write", json!({"path": "hello.txt", "content": "héllo\n"}))
        .await;
    assert_eq!(out, ToolOutput::ok("wrote 7 bytes to hello.txt"));
    let back = f.call("read", json!({"path": "hello.txt"})).await;
    assert_eq!(back, ToolOutput::ok("héllo\n"));
    f.call("write", json!({"path": "hello.txt", "content": "bye"}))
        .await;
    assert_eq!(fs::read_to_string(f.ws().join("hello.txt")).unwrap(), "bye");
    let names: Vec<_> = fs::read_dir(f.ws())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["hello.txt"], "no temporary file may be left behind");
}

#[tokio::test]
async fn write_creates_parent_folders() {
    let f = fixture();
    let out = f
        .call("write", json!({"path": "a/b/c.txt", "content": "deep"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        fs::read_to_string(f.ws().join("a/b/c.txt")).unwrap(),
        "deep"
    );
    let abs = f.ws().join("abs.txt");
    let out = f
        .call(
            "write",
            json!({"path": abs.to_str().unwrap(), "content": "x"}),
        )
        .await;
    assert!(
        !out.is_error,
        "an absolute path inside the workspace is fine: {}",
        out.text
    );
    assert!(abs.exists());
}

#[tokio::test]
async fn paths_climbing_out_are_refused_and_nothing_is_written() {
    let f = fixture();
    fs::create_dir(f.ws().join("a")).unwrap();
    for path in ["../x", "a/../../x", "/etc/passwd", "./../ws/../x"] {
        let read = f.call("read", json!({"path": path})).await;
        assert_eq!(error_type(&read), "path_refused", "read {path}");
        let write = f
            .call("write", json!({"path": path, "content": "pwned"}))
            .await;
        assert_eq!(error_type(&write), "path_refused", "write {path}");
    }
    assert!(!f.top.join("x").exists(), "nothing may be written outside");
    let out = f.call("read", json!({"path": "../x"})).await;
    assert_eq!(error_message(&out), r#"path "../x" escapes the workspace"#);
}

#[tokio::test]
async fn symlinked_folder_leading_outside_is_refused() {
    let f = fixture();
    symlink("/etc", f.ws().join("link")).unwrap();
    symlink(&f.outside, f.ws().join("out")).unwrap();
    let out = f.call("read", json!({"path": "link/passwd"})).await;
    assert_eq!(error_type(&out), "path_refused");
    assert!(
        !error_message(&out).contains("/etc"),
        "the link target is not revealed"
    );
    let out = f.call("read", json!({"path": "out/secret.txt"})).await;
    assert_eq!(error_type(&out), "path_refused");
    for path in ["out/new.txt", "out/sub/new.txt", "out/secret.txt"] {
        let out = f
            .call("write", json!({"path": path, "content": "pwned"}))
            .await;
        assert_eq!(error_type(&out), "path_refused", "write {path}");
    }
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("sub").exists());
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn symlinked_file_leading_outside_is_refused_for_read_and_write() {
    let f = fixture();
    symlink(f.outside.join("secret.txt"), f.ws().join("evil")).unwrap();
    symlink(f.outside.join("made.txt"), f.ws().join("dangling")).unwrap();
    let out = f.call("read", json!({"path": "evil"})).await;
    assert_eq!(error_type(&out), "path_refused");
    let out = f
        .call("write", json!({"path": "evil", "content": "pwned"}))
        .await;
    assert_eq!(error_type(&out), "path_refused");
    let out = f
        .call("write", json!({"path": "dangling", "content": "pwned"}))
        .await;
    assert_eq!(error_type(&out), "path_refused");
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert!(!f.outside.join("made.txt").exists());
    assert!(
        fs::symlink_metadata(f.ws().join("evil"))
            .unwrap()
            .is_symlink()
    );
}

#[tokio::test]
async fn symlink_inside_pointing_inside_is_followed() {
    let f = fixture();
    fs::create_dir(f.ws().join("real")).unwrap();
    fs::write(f.ws().join("real/file.txt"), "inside\n").unwrap();
    symlink(f.ws().join("real"), f.ws().join("alias")).unwrap();
    symlink("real/file.txt", f.ws().join("shortcut")).unwrap();
    let out = f.call("read", json!({"path": "alias/file.txt"})).await;
    assert_eq!(out, ToolOutput::ok("inside\n"));
    let out = f
        .call("write", json!({"path": "shortcut", "content": "changed\n"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        fs::read_to_string(f.ws().join("real/file.txt")).unwrap(),
        "changed\n"
    );
    assert!(
        fs::symlink_metadata(f.ws().join("shortcut"))
            .unwrap()
            .is_symlink()
    );
}

#[test]
fn confine_names_the_requested_path_in_each_refusal() {
    let f = fixture();
    symlink("/etc", f.ws().join("link")).unwrap();
    let cases = [
        ("../x", r#"path "../x" escapes the workspace"#),
        (
            "/etc/passwd",
            r#"path "/etc/passwd" is outside the workspace"#,
        ),
        (
            "link/passwd",
            r#"path "link/passwd" resolves through a symlink to outside the workspace"#,
        ),
        (
            "nope/../x",
            r#"path "nope/../x" has ".." after a directory that does not exist"#,
        ),
        ("", "path is empty"),
    ];
    for (path, message) in cases {
        let err = confine(f.ws(), path).unwrap_err();
        assert_eq!(err.to_string(), message);
    }
    assert_eq!(confine(f.ws(), "a/./b").unwrap(), f.ws().join("a/b"));
    assert_eq!(confine(f.ws(), ".").unwrap(), f.ws());
}

#[tokio::test]
async fn unknown_tool_lists_the_available_ones() {
    let f = fixture();
    let set = ToolSet::default().with(ReadTool).with(WriteTool);
    let out = set.invoke(&f.ctx, "frob", "{}", 1000).await;
    assert_eq!(
        out,
        ToolOutput::error("unknown_tool", r#"no tool "frob"; available: read, write"#)
    );
    assert_eq!(
        out.text,
        r#"{"error":{"type":"unknown_tool","message":"no tool \"frob\"; available: read, write"}}"#
    );
}

#[tokio::test]
async fn arguments_that_are_not_a_json_object_are_invalid() {
    let f = fixture();
    let out = f.raw("read", "{\"path\": ").await;
    assert_eq!(error_type(&out), "invalid_arguments");
    assert!(
        error_message(&out).contains("not valid JSON"),
        "{}",
        out.text
    );
    let out = f.raw("read", "[\"notes.md\"]").await;
    assert_eq!(error_type(&out), "invalid_arguments");
    assert!(error_message(&out).contains("got array"), "{}", out.text);
    let out = f.raw("read", "").await;
    assert!(
        error_message(&out).contains(r#"missing required field "path""#),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn arguments_failing_the_schema_name_the_field() {
    let f = fixture();
    let cases = [
        (
            json!({"content": "x"}),
            "write",
            r#"missing required field "path""#,
        ),
        (
            json!({"path": 7}),
            "read",
            r#"field "path" must be a string, got integer"#,
        ),
        (
            json!({"path": "a", "limit": "3"}),
            "read",
            r#"field "limit" must be an integer, got string"#,
        ),
        (
            json!({"path": "a", "offset": 0}),
            "read",
            r#"field "offset" must be >= 1, got 0"#,
        ),
        (
            json!({"path": "a", "offset": 1.5}),
            "read",
            r#"field "offset" must be an integer, got number"#,
        ),
        (
            json!({"path": "a", "file": "b"}),
            "read",
            r#"unknown field "file""#,
        ),
        (
            json!({"path": null, "content": "x"}),
            "write",
            r#"missing required field "path""#,
        ),
    ];
    for (args, tool, expected) in cases {
        let out = f.call(tool, args.clone()).await;
        assert_eq!(error_type(&out), "invalid_arguments", "{tool} {args}");
        assert!(
            error_message(&out).contains(expected),
            "{tool} {args}: {}",
            out.text
        );
    }
    fs::write(f.ws().join("a"), "ok\n").unwrap();
    let out = f.call("read", json!({"path": "a", "offset": null})).await;
    assert_eq!(
        out,
        ToolOutput::ok("ok\n"),
        "null counts as an absent optional field"
    );
}

#[tokio::test]
async fn long_output_is_truncated_at_a_char_boundary_with_a_note() {
    let f = fixture();
    fs::write(f.ws().join("big.txt"), "é".repeat(10)).unwrap();
    let out = ToolSet::builtin()
        .invoke(&f.ctx, "read", r#"{"path":"big.txt"}"#, 5)
        .await;
    assert!(!out.is_error);
    let note = out
        .text
        .strip_prefix("éé\n[truncated: 4 of 20 bytes shown; full output at ")
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| {
            panic!(
                "cut at a char boundary, with a note naming the file: {}",
                out.text
            )
        });
    assert!(
        note.starts_with(".clawbus-tool-output/") && note.ends_with(".txt"),
        "{note}"
    );
    assert_eq!(
        fs::read_to_string(f.ws().join(note)).unwrap(),
        "é".repeat(10),
        "the whole output is saved in the workspace"
    );
    let paged = f.call("read", json!({"path": note, "limit": 1})).await;
    assert_eq!(
        paged.text,
        "é".repeat(10),
        "the agent can read the saved output"
    );
    let whole = ToolSet::builtin()
        .invoke(&f.ctx, "read", r#"{"path":"big.txt"}"#, 20)
        .await;
    assert_eq!(whole.text, "é".repeat(10));
}

struct Panics;

#[async_trait]
impl Tool for Panics {
    fn name(&self) -> &'static str {
        "panics"
    }
    fn description(&self) -> &'static str {
        "always panics"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> ToolOutput {
        panic!("boom")
    }
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_output() {
    let f = fixture();
    let set = ToolSet::builtin().with(Panics);
    let out = set.invoke(&f.ctx, "panics", "{}", 1000).await;
    assert_eq!(error_type(&out), "internal");
}

#[test]
fn toolset_filters_and_describes_its_tools_in_order() {
    let all = ToolSet::default().with(ReadTool).with(WriteTool);
    assert_eq!(all.names(), ["read", "write"]);
    let only_read = all.filtered(|name| name == "read");
    assert_eq!(only_read.names(), ["read"]);
    let schemas = all.schemas();
    assert_eq!(schemas[1].0, "write");
    assert_eq!(schemas[1].2["required"], json!(["path", "content"]));
    let replaced = all.with(ReadTool);
    assert_eq!(
        replaced.names(),
        ["read", "write"],
        "same name replaces in place"
    );
}
