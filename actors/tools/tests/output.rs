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
