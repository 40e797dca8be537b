//! Splitting command lines, quoting, globs.

use super::super::argv::{ParseError, canonical, glob_escape, glob_match, parse};

fn words(line: &str) -> Vec<String> {
    let p = parse(line).unwrap();
    assert!(p.operators.is_empty(), "{line:?}: {:?}", p.operators);
    p.words
}

fn ops(line: &str) -> Vec<String> {
    parse(line).unwrap().operators
}

#[test]
fn quotes_and_escapes_split_like_a_shell() {
    assert_eq!(words("git  status\t--short"), ["git", "status", "--short"]);
    assert_eq!(
        words(r#"echo 'a b' "c d" e\ f"#),
        ["echo", "a b", "c d", "e f"]
    );
    assert_eq!(
        words(r#"echo "say \"hi\" \$HOME \n""#),
        ["echo", r#"say "hi" $HOME \n"#]
    );
    assert_eq!(words("echo '' \"\""), ["echo", "", ""]);
    assert_eq!(words("echo a'b'\"c\""), ["echo", "abc"]);
    assert_eq!(
        words("echo $HOME ~ *.rs"),
        ["echo", "$HOME", "~", "*.rs"],
        "nothing is expanded"
    );
    assert_eq!(words("echo a\\\nb"), ["echo", "ab"], "line continuation");
    assert_eq!(
        words("echo 'a;b|c>d'"),
        ["echo", "a;b|c>d"],
        "quoted operators are text"
    );
    assert_eq!(parse("echo 'open"), Err(ParseError::SingleQuote));
    assert_eq!(parse("echo \"open"), Err(ParseError::DoubleQuote));
    assert_eq!(parse("echo \\"), Err(ParseError::TrailingBackslash));
}

#[test]
fn every_shell_operator_is_reported() {
    let cases: &[(&str, &[&str])] = &[
        ("ls; rm -rf x", &[";"]),
        ("ls && touch x", &["&&"]),
        ("ls || touch x", &["||"]),
        ("ls | tee x", &["|"]),
        ("sleep 1 &", &["&"]),
        ("ls > x", &[">"]),
        ("ls >> x", &[">>"]),
        ("ls 2>&1", &[">&"]),
        ("cat < x", &["<"]),
        ("cat <<EOF", &["<<"]),
        ("$(touch x)", &["$(", ")"]),
        ("echo \"$(touch x)\"", &["$("]),
        ("`touch x`", &["`", "`"]),
        ("echo \"`touch x`\"", &["`", "`"]),
        ("ls\ntouch x", &["newline"]),
        ("(touch x)", &["(", ")"]),
        ("ls # comment", &["#"]),
        ("diff <(ls) x", &["<(", ")"]),
    ];
    for (line, expected) in cases {
        assert_eq!(ops(line), *expected, "{line:?}");
    }
    assert!(ops("echo a#b").is_empty(), "# inside a word is text");
}

#[test]
fn canonical_form_quotes_what_needs_it() {
    let argv: Vec<String> = ["git", "commit", "-m", "it's done", "a=b", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(canonical(&argv), r#"git commit -m 'it'\''s done' a=b ''"#);
    assert_eq!(
        words(&canonical(&argv)),
        argv,
        "the canonical form splits back the same"
    );
}

#[test]
fn globs_match_whole_lines() {
    assert!(glob_match("git status*", "git status"));
    assert!(glob_match("git status*", "git status --short"));
    assert!(!glob_match("git status*", "git stash"));
    assert!(!glob_match("ls", "ls -la"));
    assert!(glob_match("ls *", "ls -la /tmp"));
    assert!(glob_match("?s", "ls"));
    assert!(glob_match("a*b*c", "a123b456c"));
    assert!(!glob_match("a*b*c", "a123b456"));
    assert!(glob_match("*", ""));
    let exact = glob_escape("rm 'a*b?'");
    assert!(glob_match(&exact, "rm 'a*b?'"));
    assert!(
        !glob_match(&exact, "rm 'aXXb!'"),
        "an escaped glob matches only itself"
    );
}
