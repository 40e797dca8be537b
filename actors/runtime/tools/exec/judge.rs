//! The exec decision: what a command line will run, and whether this agent may run it.
//!
//! The line is split into argv without a shell ([`argv::parse`]). Under `allowlist` and `ask`:
//! shell operators are refused unless a `command` entry with `shell = true` matches the whole
//! line; every program that will run — the one written, and behind each wrapper (`env`, `nice`,
//! `timeout`, `xargs`, `find -exec` …) the one it starts — must match an entry; a shell anywhere
//! needs an entry with `shell = true`; a `deny_args` match refuses whatever else matches.

use super::argv::{self, canonical, glob_match};
use super::wrap::{self, Unwrapped};
use clawbus_core::config::{ExecDef, ExecRule, ExecSecurity};
use std::path::{Path, PathBuf};

/// Wrappers inside wrappers deeper than this are refused.
const MAX_DEPTH: usize = 8;

/// Where programs are looked up: the child's `PATH` directories and its working directory.
#[derive(Debug, Clone)]
pub(crate) struct Lookup<'a> {
    /// Absolute directories, in order.
    pub path: &'a [PathBuf],
    /// The working directory (the workspace), for programs written with a `/`.
    pub cwd: &'a Path,
}

impl Lookup<'_> {
    /// The executable file `program` names: a path (relative to `cwd`) when it has a `/`,
    /// otherwise the first match on `PATH`.
    pub(crate) fn resolve(&self, program: &str) -> Option<PathBuf> {
        if program.is_empty() {
            return None;
        }
        if program.contains('/') {
            let p = self.cwd.join(program);
            return is_executable(&p).then_some(p);
        }
        self.path
            .iter()
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The executable, resolved.
    pub program: PathBuf,
    /// The argv, `argv[0]` as written.
    pub argv: Vec<String>,
    /// The command as shown in logs and approvals (canonical, or the line run through a shell).
    pub shown: String,
    /// Why it may run (the entry or the mode).
    pub reason: String,
}

/// Why a command may not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The program concerned, for logs.
    pub program: String,
    /// What is wrong, for the model and the log.
    pub reason: String,
    /// What to do instead.
    pub suggestion: Option<String>,
}

/// The decision on one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// Run it.
    Run(Plan),
    /// Ask a person first (`ask` mode, not on the allowlist).
    Ask(Plan),
    /// Do not run it.
    Refuse(Refusal),
}

fn refuse(program: &str, reason: impl Into<String>, suggestion: Option<&str>) -> Refusal {
    Refusal {
        program: wrap::base(program).to_string(),
        reason: reason.into(),
        suggestion: suggestion.map(str::to_string),
    }
}

/// Decides what happens to `line` under `def`, with `extra` entries (approved with `--always`).
pub(crate) fn judge(def: &ExecDef, extra: &[ExecRule], line: &str, lookup: &Lookup) -> Judgement {
    let rules: Vec<&ExecRule> = def.allow.iter().chain(extra).collect();
    if def.security == ExecSecurity::Deny {
        return Judgement::Refuse(refuse(
            "",
            "exec is disabled (exec.security = \"deny\")",
            None,
        ));
    }
    let parsed = match argv::parse(line) {
        Ok(p) => p,
        Err(e) => {
            let reason = format!("cannot split the command: {e}");
            return Judgement::Refuse(refuse("", reason, Some("check the quoting")));
        }
    };
    let trimmed = line.trim();
    if !parsed.operators.is_empty() {
        return operators(def, &rules, trimmed, &parsed.operators, lookup);
    }
    let argv = parsed.words;
    let Some(first) = argv.first() else {
        return Judgement::Refuse(refuse("", "the command is empty", None));
    };
    let Some(program) = lookup.resolve(first) else {
        return Judgement::Refuse(refuse(
            first,
            format!("program {first:?} not found on PATH"),
            None,
        ));
    };
    let shown = canonical(&argv);
    if def.security == ExecSecurity::Full {
        let reason = "exec.security = \"full\"".to_string();
        return Judgement::Run(Plan {
            program,
            argv,
            shown,
            reason,
        });
    }
    let mut walk = Walk {
        rules: &rules,
        lookup,
        unlisted: Vec::new(),
        allowed_by: Vec::new(),
    };
    if let Err(refusal) = walk.level(&argv, 0) {
        return Judgement::Refuse(refusal);
    }
    let plan = |reason: String| Plan {
        program: program.clone(),
        argv: argv.clone(),
        shown: shown.clone(),
        reason,
    };
    match (walk.unlisted.first(), def.security) {
        (None, _) => Judgement::Run(plan(format!("allowed by {}", walk.allowed_by.join(", ")))),
        (Some(_), ExecSecurity::Ask) => Judgement::Ask(plan("approved by a person".into())),
        (Some(missing), _) => Judgement::Refuse(refuse(
            first,
            format!("`{missing}` is not in this agent's exec allowlist"),
            Some("use a command the allowlist permits, or ask for it to be added to [exec] allow"),
        )),
    }
}

/// A line with shell operators: runs through `/bin/sh -c` only when explicitly allowed.
fn operators(
    def: &ExecDef,
    rules: &[&ExecRule],
    line: &str,
    ops: &[String],
    lookup: &Lookup,
) -> Judgement {
    let by_rule = rules.iter().find(
        |r| matches!(r, ExecRule::Command { pattern, shell: true } if glob_match(pattern, line)),
    );
    let reason = match (def.security, by_rule) {
        (ExecSecurity::Full, _) if def.shell => {
            "exec.security = \"full\" with exec.shell = true".to_string()
        }
        (ExecSecurity::Allowlist | ExecSecurity::Ask, Some(rule)) => format!("allowed by {rule}"),
        _ => {
            let mut seen: Vec<&str> = Vec::new();
            for op in ops {
                if !seen.contains(&op.as_str()) {
                    seen.push(op);
                }
            }
            return Judgement::Refuse(refuse(
                "",
                format!(
                    "the command uses shell operators ({}); commands run without a shell, so these are refused",
                    seen.join(" ")
                ),
                Some("run one program per exec call, without ; && || | & > < $( ) or backticks"),
            ));
        }
    };
    let Some(program) = lookup.resolve("sh") else {
        return Judgement::Refuse(refuse("sh", "no sh on PATH", None));
    };
    Judgement::Run(Plan {
        program,
        argv: vec!["sh".into(), "-c".into(), line.to_string()],
        shown: line.to_string(),
        reason,
    })
}

struct Walk<'r, 'l> {
    rules: &'r [&'r ExecRule],
    lookup: &'l Lookup<'l>,
    /// Programs (canonical argv) no entry matched.
    unlisted: Vec<String>,
    /// The entries that matched, for the log.
    allowed_by: Vec<String>,
}

impl Walk<'_, '_> {
    /// Judges one program that will run, then what it runs.
    fn level(&mut self, argv: &[String], depth: usize) -> Result<(), Refusal> {
        let program = &argv[0];
        if depth > MAX_DEPTH {
            return Err(refuse(program, "wrappers are nested too deeply", None));
        }
        if program.split('/').any(|part| part == "..") {
            return Err(refuse(
                program,
                format!("program path {program:?} has a \"..\" component"),
                Some("name the program by its own path or by its name on PATH"),
            ));
        }
        if wrap::is_assignment(program) {
            return Err(refuse(
                program,
                "variable assignments are not supported: commands run without a shell",
                Some("extra environment variables come only from exec.env in the agent's config"),
            ));
        }
        let Some(resolved) = self.lookup.resolve(program) else {
            return Err(refuse(
                program,
                format!("program {program:?} not found on PATH"),
                None,
            ));
        };
        let shown = canonical(argv);
        let args = argv[1..].join(" ");
        for rule in self.rules {
            if let ExecRule::Program {
                program: glob,
                deny_args: Some(deny),
                ..
            } = rule
                && program_matches(glob, program)
                && deny.0.is_match(&args)
            {
                return Err(refuse(
                    program,
                    format!("`{shown}` is refused by exec.allow entry {rule}: deny_args matches"),
                    None,
                ));
            }
        }
        let matching: Vec<&ExecRule> = self
            .rules
            .iter()
            .copied()
            .filter(|r| rule_matches(r, program, &shown, &args))
            .collect();
        let shell_ok = matching.iter().any(|r| r.allows_shell());
        if let Some(rule) = matching.first() {
            self.allowed_by.push(rule.to_string());
        } else {
            self.unlisted.push(shown.clone());
        }
        let shell_refusal = |why: String| {
            if shell_ok {
                Ok(())
            } else {
                Err(refuse(
                    program,
                    format!(
                        "`{shown}`: {why}; a shell needs an exec.allow entry with shell = true"
                    ),
                    Some("run the program directly, without sh -c"),
                ))
            }
        };
        if is_shell(program, &resolved) {
            return shell_refusal(format!("{} is a shell", wrap::base(program)));
        }
        match wrap::unwrap(argv) {
            Unwrapped::Program | Unwrapped::Nothing => Ok(()),
            Unwrapped::Shell(why) => shell_refusal(why),
            Unwrapped::Refused(why) => Err(refuse(program, why, None)),
            Unwrapped::Unclear(what) => Err(refuse(
                program,
                format!("cannot tell what `{shown}` runs ({what} is not understood)"),
                None,
            )),
            Unwrapped::Wraps(inner) => {
                for argv in inner {
                    self.level(argv, depth + 1)?;
                }
                Ok(())
            }
        }
    }
}

/// A shell by the name it is called, or by the file it really is (`sh` → `dash`).
fn is_shell(program: &str, resolved: &Path) -> bool {
    wrap::is_shell_name(wrap::base(program))
        || resolved
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .is_some_and(|n| wrap::is_shell_name(&n))
}

/// A program glob without `/` matches bare names only (looked up on `PATH`), so `./git` or
/// `/tmp/x/git` never pass for `git`; one with `/` matches the path as written.
fn program_matches(glob: &str, program: &str) -> bool {
    if glob.contains('/') {
        glob_match(glob, program)
    } else {
        !program.contains('/') && glob_match(glob, program)
    }
}

fn rule_matches(rule: &ExecRule, program: &str, shown: &str, args: &str) -> bool {
    match rule {
        ExecRule::Command { pattern, .. } => glob_match(pattern, shown),
        ExecRule::Program {
            program: glob,
            args: pattern,
            ..
        } => program_matches(glob, program) && pattern.as_ref().is_none_or(|p| p.0.is_match(args)),
    }
}
