//! The decision: allowlist, shells behind wrappers, operators, modes.

use super::*;
use crate::tools::exec::judge::{Judgement, Lookup, judge};

fn decide(f: &Fx, def: &ExecDef, line: &str) -> Judgement {
    let path = vec![
        f.bin.clone(),
        "/usr/local/bin".into(),
        "/usr/bin".into(),
        "/bin".into(),
    ];
    let lookup = Lookup {
        path: &path,
        cwd: &f.ws,
    };
    judge(def, &[], line, &lookup)
}

fn refused(j: &Judgement) -> bool {
    matches!(j, Judgement::Refuse(_))
}

#[tokio::test]
async fn shell_smuggling_is_refused_even_when_everything_is_allowed_and_nothing_is_created() {
    let f = fx();
    fs::create_dir(f.ws.join("x")).unwrap();
    fs::write(f.ws.join("x/keep"), "").unwrap();
    // "*" allows any single program; shells and operators still need shell = true.
    let d = def(ExecSecurity::Allowlist, vec![glob("*")]);
    let tool = f.tool(d.clone(), &[]);
    let attempts = [
        "ls; rm -rf x",
        "ls && touch made",
        "ls || touch made",
        "ls | tee made",
        "ls > made",
        "$(touch made)",
        "echo \"$(touch made)\"",
        "`touch made`",
        "ls\ntouch made",
        "sh -c 'touch made'",
        "bash -c \"touch made\"",
        "/bin/sh -c 'touch made'",
        "dash -c 'touch made'",
        "env sh -c 'touch made'",
        "env -i bash -c 'touch made'",
        "env -u HOME -- sh -c 'touch made'",
        "env -S 'touch made'",
        "env FOO=1 touch made",
        "FOO=1 touch made",
        "nice sh -c 'touch made'",
        "nice -n 5 bash -c 'touch made'",
        "nohup sh -c 'touch made'",
        "timeout 5 sh -c 'touch made'",
        "timeout -s KILL 5 sh -c 'touch made'",
        "stdbuf -oL sh -c 'touch made'",
        "xargs sh -c 'touch made'",
        "xargs -n 1 -I{} sh -c 'touch made'",
        "setsid sh -c 'touch made'",
        "find . -maxdepth 0 -exec sh -c 'touch made' \\;",
        "nice env timeout 5 sh -c 'touch made'",
        "busybox sh -c 'touch made'",
        "su -c 'touch made'",
        "watch touch made",
        "timeout --weird 5 touch made",
    ];
    for line in attempts {
        assert!(refused(&decide(&f, &d, line)), "{line:?} must be refused");
        let out = f.exec(&tool, line, None).await;
        assert_eq!(
            error_type(&out),
            "command_refused",
            "{line:?}: {}",
            out.text
        );
    }
    assert!(!f.ws.join("made").exists(), "no refused command ran");
    assert!(f.ws.join("x/keep").exists(), "rm never ran");
    let out = f.exec(&tool, "touch made", None).await;
    assert_eq!(
        out,
        ToolOutput::ok("exit code: 0\n"),
        "a plain program runs under *"
    );
}

#[test]
fn every_program_behind_a_wrapper_must_be_allowed() {
    let f = fx();
    let d = def(
        ExecSecurity::Allowlist,
        vec![
            glob("nice *"),
            glob("timeout *"),
            glob("ls *"),
            program("find", None, None),
        ],
    );
    assert!(matches!(decide(&f, &d, "nice ls -la"), Judgement::Run(_)));
    assert!(matches!(
        decide(&f, &d, "timeout 5 nice -n 3 ls -la"),
        Judgement::Run(_)
    ));
    assert!(
        refused(&decide(&f, &d, "nice rm -rf x")),
        "rm is not allowed"
    );
    assert!(refused(&decide(&f, &d, "timeout 5 rm x")));
    assert!(refused(&decide(&f, &d, "find . -exec rm {} \\;")));
    assert!(matches!(
        decide(&f, &d, "find . -name '*.rs'"),
        Judgement::Run(_)
    ));
}

#[test]
fn a_shell_runs_only_under_an_entry_that_allows_one() {
    let f = fx();
    let shell_entry = ExecRule::Command {
        pattern: "make test*".into(),
        shell: true,
    };
    let mut bash = program("bash", Some("^-c "), None);
    if let ExecRule::Program { shell, .. } = &mut bash {
        *shell = true;
    }
    let d = def(ExecSecurity::Allowlist, vec![shell_entry, bash]);
    match decide(&f, &d, "make test && make lint") {
        Judgement::Run(plan) => {
            assert_eq!(plan.argv, ["sh", "-c", "make test && make lint"]);
            assert!(plan.reason.contains("shell = true"), "{}", plan.reason);
        }
        other => panic!("the shell entry allows the line: {other:?}"),
    }
    assert!(matches!(
        decide(&f, &d, "bash -c 'echo hi'"),
        Judgement::Run(_)
    ));
    assert!(
        refused(&decide(&f, &d, "sh -c 'echo hi'")),
        "only bash was allowed"
    );
    assert!(refused(&decide(&f, &d, "ls; make test")));
}

#[test]
fn full_mode_runs_any_program_but_operators_need_exec_shell() {
    let f = fx();
    let mut d = def(ExecSecurity::Full, vec![]);
    assert!(matches!(decide(&f, &d, "rm -rf x"), Judgement::Run(_)));
    assert!(refused(&decide(&f, &d, "ls | wc -l")));
    assert!(refused(&decide(&f, &d, "no-such-program-here")));
    d.shell = true;
    assert!(matches!(decide(&f, &d, "ls | wc -l"), Judgement::Run(p) if p.argv[0] == "sh"));
}

#[test]
fn ask_mode_asks_for_unlisted_programs_but_refuses_shells() {
    let f = fx();
    let d = def(ExecSecurity::Ask, vec![glob("ls")]);
    assert!(matches!(decide(&f, &d, "ls"), Judgement::Run(_)));
    match decide(&f, &d, "touch 'a b'") {
        Judgement::Ask(plan) => assert_eq!(plan.shown, "touch 'a b'"),
        other => panic!("{other:?}"),
    }
    assert!(
        refused(&decide(&f, &d, "sh -c 'touch x'")),
        "shells are never asked about"
    );
    assert!(refused(&decide(&f, &d, "ls && touch x")));
    assert!(refused(&decide(
        &f,
        &def(ExecSecurity::Deny, vec![glob("*")]),
        "ls"
    )));
}
