//! Attempts to run something other than what the allowlist judged.

use super::*;
use crate::tools::exec::argv::{canonical, parse};
use crate::tools::exec::judge::{Judgement, Lookup, judge};

fn decide(f: &Fx, def: &ExecDef, line: &str) -> Judgement {
    let path = vec![f.bin.clone(), "/usr/bin".into(), "/bin".into()];
    let lookup = Lookup {
        path: &path,
        cwd: &f.ws,
    };
    judge(def, &[], line, &lookup)
}

#[tokio::test]
async fn a_program_path_climbing_out_of_an_allowed_folder_is_refused() {
    let f = fx();
    script(&f.ws.join("evil"), "touch made\n");
    let tool = f.tool(
        def(
            ExecSecurity::Allowlist,
            vec![
                program("/usr/bin/*", None, None),
                glob("/usr/bin/* --version"),
            ],
        ),
        &[],
    );
    let climb = format!("/usr/bin/../..{}/evil", f.ws.display());
    for line in [climb.clone(), format!("{climb} --version")] {
        let out = f.exec(&tool, &line, None).await;
        assert_eq!(error_type(&out), "command_refused", "{line}: {}", out.text);
    }
    assert!(
        !f.ws.join("made").exists(),
        "the workspace script never ran"
    );
}

#[tokio::test]
async fn xargs_cannot_read_extra_arguments_from_a_file_past_deny_args() {
    let f = fx();
    script(&f.bin.join("git"), "echo \"$*\" > ran\n");
    fs::write(f.ws.join("flags.txt"), "--force\n").unwrap();
    let tool = f.tool(
        def(
            ExecSecurity::Allowlist,
            vec![
                glob("xargs *"),
                program("git", Some("^push( |$)"), Some("--force")),
            ],
        ),
        &[],
    );
    for line in [
        "xargs -a flags.txt git push",
        "xargs --arg-file=flags.txt git push",
        "xargs --arg-file flags.txt git push",
        "xargs -0a flags.txt git push",
    ] {
        let out = f.exec(&tool, line, None).await;
        assert_eq!(error_type(&out), "command_refused", "{line}: {}", out.text);
    }
    assert!(
        !f.ws.join("ran").exists(),
        "git never ran with hidden flags"
    );
    let out = f.exec(&tool, "xargs git push", None).await;
    assert!(
        !out.is_error,
        "without an argument file it still runs: {}",
        out.text
    );
}

#[tokio::test]
async fn a_wrapper_cannot_run_a_relative_program_from_another_folder() {
    let f = fx();
    script(&f.ws.join("tool"), "echo safe\n");
    fs::create_dir(f.ws.join("sub")).unwrap();
    script(&f.ws.join("sub/tool"), "touch made\n");
    let d = def(
        ExecSecurity::Allowlist,
        vec![glob("env *"), glob("find *"), glob("./tool")],
    );
    let tool = f.tool(d.clone(), &[]);
    for line in [
        "env -C sub ./tool",
        "env --chdir=sub ./tool",
        "env --chdir sub ./tool",
        "find sub -name tool -execdir ./tool ;",
        "find sub -name tool -okdir ./tool ;",
    ] {
        assert!(
            matches!(decide(&f, &d, line), Judgement::Refuse(_)),
            "{line:?} must be refused"
        );
        let out = f.exec(&tool, line, None).await;
        assert_eq!(error_type(&out), "command_refused", "{line}: {}", out.text);
    }
    assert!(!f.ws.join("made").exists());
    assert!(!f.ws.join("sub/made").exists());
    let out = f.exec(&tool, "./tool", None).await;
    assert_eq!(out, ToolOutput::ok("exit code: 0\nsafe\n"));
}

#[test]
fn the_command_shown_for_approval_has_no_control_or_bidi_characters() {
    let f = fx();
    let d = def(ExecSecurity::Ask, vec![]);
    // ESC sequences would redraw the terminal of the person approving; a newline or CR would
    // hide the real command; U+202E would reverse how the rest reads.
    let line = "touch 'x\u{1b}[2K\rls -la' 'a\nb' 'c\u{202e}d' 'e\u{7f}' 'f\u{85}'";
    let Judgement::Ask(plan) = decide(&f, &d, line) else {
        panic!("asks");
    };
    let bad = |c: char| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c);
    assert!(!plan.shown.chars().any(bad), "{:?}", plan.shown);
    assert_eq!(
        plan.shown,
        r"touch $'x\x1b[2K\rls -la' $'a\nb' $'c\u202Ed' $'e\x7f' $'f\u0085'"
    );
    // The shown form reads back, through a shell's $'…', as the same argv.
    assert_eq!(parse("touch 'a b'").unwrap().words, ["touch", "a b"]);
    assert_eq!(
        canonical(&["echo".into(), "it's".into()]),
        r"echo 'it'\''s'"
    );
    assert_eq!(
        canonical(&["echo".into(), "it's\n".into()]),
        r"echo $'it\'s\n'"
    );
}

#[tokio::test]
async fn a_command_cannot_read_the_daemons_environment_through_proc() {
    let f = fx();
    let tool = ExecTool::new("tester", def(ExecSecurity::Full, vec![]), None);
    let line = format!("cat /proc/{}/environ", std::process::id());
    let out = f.exec(&tool, &line, None).await;
    assert_eq!(
        rustix::process::dumpable_behavior().unwrap(),
        rustix::process::DumpableBehavior::NotDumpable,
        "the process that runs commands is not dumpable"
    );
    // Root (as in some CI containers) reads any process's environ anyway.
    if !rustix::process::geteuid().is_root() {
        assert!(!out.text.contains("CARGO_MANIFEST_DIR"), "{}", out.text);
    }
}
