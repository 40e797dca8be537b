//! `write` refusals: git metadata, and errors that would name host paths.

use super::*;

#[test]
fn a_write_error_names_the_requested_path_never_the_host_path() {
    let f = fixture();
    let missing = f.top.join("no-such-folder");
    let e = tempfile::Builder::new().tempfile_in(&missing).unwrap_err();
    assert!(
        e.to_string().contains("no-such-folder"),
        "tempfile adds the path: {e}"
    );
    let out = crate::tools::write::io_error("notes/a.md", "write", &e);
    let msg = error_message(&out);
    assert!(msg.contains("\"notes/a.md\""), "{msg}");
    assert!(!msg.contains(&*f.top.to_string_lossy()), "{msg}");
}

#[tokio::test]
async fn git_metadata_cannot_be_written_so_git_cannot_be_made_to_run_commands() {
    // `.git/config` with core.fsmonitor = "cmd" makes an allowlisted `git status` run cmd.
    let f = fixture();
    fs::create_dir_all(f.ws().join(".git/hooks")).unwrap();
    fs::write(f.ws().join(".git/config"), "[core]\n").unwrap();
    fs::create_dir_all(f.ws().join("vendor/lib/.git")).unwrap();
    symlink(f.ws().join(".git"), f.ws().join("meta")).unwrap();
    let evil = "[core]\n\tfsmonitor = \"touch pwned\"\n";
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        "./.git/config",
        ".GIT/config",
        "vendor/lib/.git/config",
        "meta/config",
        ".git",
    ] {
        let out = f
            .call("write", json!({"path": path, "content": evil}))
            .await;
        assert_eq!(error_type(&out), "path_refused", "{path}: {}", out.text);
    }
    let out = f
        .call(
            "edit",
            json!({"path": ".git/config", "old_string": "[core]\n", "new_string": evil}),
        )
        .await;
    assert_eq!(error_type(&out), "path_refused", "{}", out.text);
    assert_eq!(
        fs::read_to_string(f.ws().join(".git/config")).unwrap(),
        "[core]\n"
    );
    let out = f
        .call(
            "write",
            json!({"path": ".gitignore", "content": "target/\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
}
