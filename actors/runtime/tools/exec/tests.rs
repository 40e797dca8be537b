//! The exec tool: parsing, the decision, the child process.

mod bypass;
mod container;
mod judging;
mod network;
mod parsing;
mod sandboxed;

use super::*;
use crate::tools::{ToolContext, ToolSet};
use clawbus_core::config::ArgsPattern;
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tempfile::TempDir;

/// A workspace, a `bin/` folder first on the child's PATH, and the tool's context.
pub(super) struct Fx {
    _dir: TempDir,
    pub ws: PathBuf,
    pub bin: PathBuf,
    pub ctx: ToolContext,
}

pub(super) fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let (ws, bin) = (top.join("ws"), top.join("bin"));
    fs::create_dir(&ws).unwrap();
    fs::create_dir(&bin).unwrap();
    let ctx = ToolContext {
        workspace: ws.clone(),
        agent: clawbus_core::ids::AgentId::new("tester"),
        session: clawbus_core::ids::SessionKey::parse("agent:tester:test").unwrap(),
        channel: "api".into(),
        run: None,
    };
    Fx {
        _dir: dir,
        ws,
        bin,
        ctx,
    }
}

/// Writes an executable script.
pub(super) fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

pub(super) fn def(security: ExecSecurity, allow: Vec<ExecRule>) -> ExecDef {
    ExecDef {
        security,
        allow,
        ..ExecDef::default()
    }
}

pub(super) fn glob(pattern: &str) -> ExecRule {
    ExecRule::Command {
        pattern: pattern.into(),
        shell: false,
    }
}

pub(super) fn program(program: &str, args: Option<&str>, deny: Option<&str>) -> ExecRule {
    let re = |s: &str| ArgsPattern(regex::Regex::new(s).unwrap());
    ExecRule::Program {
        program: program.into(),
        args: args.map(re),
        deny_args: deny.map(re),
        shell: false,
    }
}

impl Fx {
    /// The tool with `def`, PATH = bin/ then the system folders, plus `extra` variables.
    pub(super) fn tool(&self, def: ExecDef, extra: &[(&str, &str)]) -> ExecTool {
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display());
        let mut vars: Vec<(String, String)> = vec![("PATH".into(), path)];
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        ExecTool::new("tester", def, None).with_parent_env(Arc::new(move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }))
    }

    pub(super) async fn exec(
        &self,
        tool: &ExecTool,
        command: &str,
        timeout_s: Option<u64>,
    ) -> ToolOutput {
        let mut args = json!({ "command": command });
        if let Some(t) = timeout_s {
            args["timeout_s"] = json!(t);
        }
        ToolSet::default()
            .with(tool.clone())
            .invoke(&self.ctx, "exec", &args.to_string(), 100_000)
            .await
    }
}

pub(super) fn error_type(out: &ToolOutput) -> String {
    assert!(out.is_error, "expected an error, got {}", out.text);
    let v: Value = serde_json::from_str(&out.text).unwrap();
    v["error"]["type"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_allowlisted_command_runs_in_the_workspace() {
    let f = fx();
    fs::write(f.ws.join("hello.txt"), "hi\n").unwrap();
    let tool = f.tool(
        def(ExecSecurity::Allowlist, vec![glob("cat *"), glob("pwd")]),
        &[],
    );
    let out = f.exec(&tool, "cat 'hello.txt'", None).await;
    assert_eq!(out, ToolOutput::ok("exit code: 0\nhi\n"));
    let out = f.exec(&tool, "pwd", None).await;
    assert_eq!(out.text, format!("exit code: 0\n{}\n", f.ws.display()));
    let out = f.exec(&tool, "cat missing.txt", None).await;
    assert!(
        !out.is_error && out.text.starts_with("exit code: 1\n") && out.text.contains("missing.txt"),
        "a failing command reports its code and stderr: {}",
        out.text
    );
}

#[tokio::test]
async fn git_push_runs_and_git_push_force_is_refused_by_deny_args() {
    let f = fx();
    script(&f.bin.join("git"), "echo \"fake git $*\"\n");
    let rule = program("git", Some("^push( |$)"), Some("--force"));
    let tool = f.tool(def(ExecSecurity::Allowlist, vec![rule]), &[]);
    let out = f.exec(&tool, "git push origin main", None).await;
    assert_eq!(
        out,
        ToolOutput::ok("exit code: 0\nfake git push origin main\n")
    );
    let out = f.exec(&tool, "git push --force origin main", None).await;
    assert_eq!(error_type(&out), "command_refused");
    assert!(out.text.contains("deny_args"), "{}", out.text);
    let out = f.exec(&tool, "git pull", None).await;
    assert_eq!(error_type(&out), "command_refused", "only push is allowed");
    script(&f.ws.join("git"), "touch pwned\n");
    let out = f.exec(&tool, "./git push", None).await;
    assert_eq!(
        error_type(&out),
        "command_refused",
        "a git in the workspace is not git"
    );
    assert!(!f.ws.join("pwned").exists());
}

#[tokio::test]
async fn the_child_sees_only_the_base_variables_and_those_listed() {
    let f = fx();
    let mut d = def(ExecSecurity::Allowlist, vec![glob("env")]);
    d.env = vec!["GIT_AUTHOR_NAME".into()];
    let planted = [
        ("HOME", "/home/tester"),
        ("LANG", "C.UTF-8"),
        ("GIT_AUTHOR_NAME", "Ada"),
        ("CLAWBUS_PLANTED_SECRET", "hunter2-planted"),
        ("OPENAI_API_KEY", "sk-planted"),
    ];
    let out = f.exec(&f.tool(d.clone(), &planted), "env", None).await;
    assert!(
        !out.text.contains("planted"),
        "no secret reaches the child: {}",
        out.text
    );
    let mut names: Vec<&str> = out
        .text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort();
    assert_eq!(names, ["GIT_AUTHOR_NAME", "HOME", "LANG", "PATH"]);
    // And with the real process environment, which holds cargo's variables.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let real = ExecTool::new("tester", d, None);
    let out = f.exec(&real, "env", None).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(!out.text.contains("CARGO_"), "{}", out.text);
}

/// Waits (safety net: 10 s) until process `pid` has exited; false if it is still running.
fn exited(pid: i32) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(pid) = Pid::from_raw(pid) else {
        return true;
    };
    let fd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) if e == rustix::io::Errno::SRCH => return true,
        Err(e) => panic!("pidfd_open: {e}"),
    };
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let limit = Timespec {
        tv_sec: 10,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&limit)).unwrap() == 1
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_grandchildren() {
    let f = fx();
    script(
        &f.ws.join("spawn.sh"),
        "sleep 300 &\necho $! > grandchild.pid\necho $$ > child.pid\necho started\nsleep 300\n",
    );
    let tool = f.tool(def(ExecSecurity::Allowlist, vec![glob("./spawn.sh")]), &[]);
    let out = f.exec(&tool, "./spawn.sh", Some(1)).await;
    assert_eq!(error_type(&out), "timeout");
    assert!(
        out.text.contains("started"),
        "the output so far is kept: {}",
        out.text
    );
    for file in ["child.pid", "grandchild.pid"] {
        let pid: i32 = fs::read_to_string(f.ws.join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(exited(pid), "{file}: process {pid} must be gone");
    }
}

#[tokio::test]
async fn the_call_timeout_is_capped_by_the_agent_limit() {
    let f = fx();
    let mut d = def(ExecSecurity::Allowlist, vec![glob("sleep *")]);
    d.timeout = Duration::from_secs(1);
    let out = f.exec(&f.tool(d, &[]), "sleep 30", Some(3600)).await;
    assert_eq!(error_type(&out), "timeout");
    assert!(out.text.contains("at most 1"), "{}", out.text);
}

#[tokio::test]
async fn output_is_capped_and_the_total_is_reported() {
    let f = fx();
    let tool = f.tool(
        def(ExecSecurity::Allowlist, vec![glob("head -c * /dev/zero")]),
        &[],
    );
    let n = MAX_OUTPUT_BYTES + 5000;
    let args = json!({ "command": format!("head -c {n} /dev/zero") });
    let out = tool.call(&f.ctx, args).await;
    assert!(
        out.text.contains(&format!(
            "[output capped at {MAX_OUTPUT_BYTES} of {n} bytes]"
        )),
        "{}",
        &out.text[out.text.len().saturating_sub(200)..]
    );
}

#[tokio::test]
async fn deny_mode_and_an_empty_allowlist_leave_exec_unavailable() {
    let f = fx();
    assert!(
        f.tool(def(ExecSecurity::Deny, vec![glob("*")]), &[])
            .available()
            .is_err()
    );
    assert!(
        f.tool(def(ExecSecurity::Allowlist, vec![]), &[])
            .available()
            .is_err()
    );
    assert!(
        f.tool(def(ExecSecurity::Ask, vec![]), &[])
            .available()
            .is_ok()
    );
    assert!(
        f.tool(def(ExecSecurity::Full, vec![]), &[])
            .available()
            .is_ok()
    );
    let out = f
        .exec(&f.tool(def(ExecSecurity::Ask, vec![]), &[]), "ls", None)
        .await;
    assert_eq!(
        error_type(&out),
        "command_refused",
        "ask without an approval service"
    );
}
