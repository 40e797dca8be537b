//! The `edit` tool.

use super::*;

#[tokio::test]
async fn edit_replaces_the_one_exact_match() {
    let f = fixture();
    fs::write(f.ws().join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let out = f
        .call(
            "edit",
            json!({"path": "a.txt", "old_string": "beta\n", "new_string": "BETA\nbeta2\n"}),
        )
        .await;
    assert_eq!(out, ToolOutput::ok("edited a.txt: replaced 1 occurrence"));
    assert_eq!(
        fs::read_to_string(f.ws().join("a.txt")).unwrap(),
        "alpha\nBETA\nbeta2\ngamma\n"
    );
}

#[tokio::test]
async fn edit_fails_clearly_when_the_text_is_missing() {
    let f = fixture();
    fs::write(f.ws().join("a.txt"), "alpha\n").unwrap();
    let out = f
        .call(
            "edit",
            json!({"path": "a.txt", "old_string": "Alpha", "new_string": "x"}),
        )
        .await;
    assert_eq!(error_type(&out), "no_match");
    assert_eq!(error_message(&out), "old_string not found in a.txt");
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert!(v["error"]["suggestion"].is_string(), "{}", out.text);
    assert_eq!(fs::read_to_string(f.ws().join("a.txt")).unwrap(), "alpha\n");
}

#[tokio::test]
async fn edit_refuses_an_ambiguous_match_unless_replace_all() {
    let f = fixture();
    fs::write(f.ws().join("a.txt"), "x = 1\nx = 1\nx = 1\n").unwrap();
    let args = json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"});
    let out = f.call("edit", args.clone()).await;
    assert_eq!(error_type(&out), "ambiguous_match");
    assert_eq!(
        error_message(&out),
        "old_string matches 3 times in a.txt; add context or set replace_all"
    );
    assert_eq!(
        fs::read_to_string(f.ws().join("a.txt")).unwrap(),
        "x = 1\nx = 1\nx = 1\n"
    );
    let mut all = args;
    all["replace_all"] = json!(true);
    let out = f.call("edit", all).await;
    assert_eq!(out, ToolOutput::ok("edited a.txt: replaced 3 occurrences"));
    assert_eq!(
        fs::read_to_string(f.ws().join("a.txt")).unwrap(),
        "x = 2\nx = 2\nx = 2\n"
    );
}

#[tokio::test]
async fn edit_is_confined_to_the_workspace() {
    let f = fixture();
    symlink(&f.outside, f.ws().join("out")).unwrap();
    for path in ["../outside/secret.txt", "out/secret.txt"] {
        let out = f
            .call(
                "edit",
                json!({"path": path, "old_string": "secret", "new_string": "pwned"}),
            )
            .await;
        assert_eq!(error_type(&out), "path_refused", "{path}");
    }
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    let missing = f
        .call(
            "edit",
            json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert_eq!(error_type(&missing), "not_found");
}
