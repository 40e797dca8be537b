//! Structured errors and the result cap.

use super::*;

#[test]
fn error_output_carries_the_optional_fields_in_order() {
    let plain = ToolOutput::error("io", "disk full");
    assert_eq!(
        plain.text,
        r#"{"error":{"type":"io","message":"disk full"}}"#
    );
    let full: ToolOutput = ToolError::new("rate_limited", "too many calls")
        .retry_after(1500)
        .suggest("wait, then call again")
        .into();
    assert_eq!(
        full.text,
        r#"{"error":{"type":"rate_limited","message":"too many calls","retry_after_ms":1500,"suggestion":"wait, then call again"}}"#
    );
    assert!(full.is_error);
    let v: Value = serde_json::from_str(
        &ToolOutput::error_with_suggestion("x", "quote \" and \\ and\nnewline", "s").text,
    )
    .unwrap();
    assert_eq!(v["error"]["message"], "quote \" and \\ and\nnewline");
}

#[tokio::test]
async fn invalid_arguments_suggest_the_fields_the_tool_takes() {
    let f = fixture();
    let out = f.call("read", json!({"file": "a"})).await;
    assert_eq!(error_type(&out), "invalid_arguments");
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(
        v["error"]["suggestion"],
        "call \"read\" again with a JSON object; required: path; optional: limit, offset"
    );
}

#[tokio::test]
async fn error_outputs_are_never_cut_and_short_outputs_are_not_saved() {
    let f = fixture();
    let out = f
        .call("read", json!({"path": "missing-file-with-a-long-name.txt"}))
        .await;
    let capped = ToolSet::builtin()
        .invoke(
            &f.ctx,
            "read",
            r#"{"path":"missing-file-with-a-long-name.txt"}"#,
            10,
        )
        .await;
    assert_eq!(capped, out, "an error stays valid JSON whatever the cap");
    fs::write(f.ws().join("small.txt"), "hi").unwrap();
    let small = ToolSet::builtin()
        .invoke(&f.ctx, "read", r#"{"path":"small.txt"}"#, 10)
        .await;
    assert_eq!(small, ToolOutput::ok("hi"));
    assert!(
        !f.ws().join(SPILL_DIR).exists(),
        "nothing saved when nothing is cut"
    );
}

#[tokio::test]
async fn a_spill_folder_that_is_a_symlink_out_of_the_workspace_is_not_written_through() {
    let f = fixture();
    // Enough old outputs out there that pruning would delete some of them.
    for i in 0..105 {
        fs::write(f.outside.join(format!("{i:03}.txt")), "keep").unwrap();
    }
    symlink(&f.outside, f.ws().join(SPILL_DIR)).unwrap();
    fs::write(f.ws().join("big.txt"), "x".repeat(500)).unwrap();
    let out = ToolSet::builtin()
        .invoke(&f.ctx, "read", r#"{"path":"big.txt"}"#, 100)
        .await;
    assert!(
        out.text.contains("[truncated: 100 of 500 bytes shown"),
        "{}",
        out.text
    );
    assert!(!out.text.contains("full output at"), "{}", out.text);
    let names: Vec<_> = fs::read_dir(&f.outside).unwrap().collect();
    assert_eq!(names.len(), 106, "nothing written or deleted outside");
    assert!(f.outside.join("000.txt").exists());
}
