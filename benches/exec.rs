//! Figures, printed, never asserted: `cargo bench --bench exec`.
//!
//! exec round-trip overhead for `true`, 200 runs each, median and p99:
//! 1. `std::process::Command::new("true").output()` — the floor: a fork/exec and a wait.
//! 2. The `exec` tool through `ToolSet::invoke` (argument validation, the allowlist decision with
//!    PATH lookup, clean environment, its own process group, one capped pipe, group kill, the
//!    result text) — spawn to result.
//! 3. The same in a sandboxed session (`[sandbox] mode = "all"`: cgroups made and removed,
//!    `sh` joining them, `prlimit`, bubblewrap with every namespace) — spawn to result.
//! 4. The same with `network = "allow"` (the proxy started and stopped, the forwarder — the
//!    `clawbus` binary — started inside in front of the command) — spawn to result.
//! 5. Memory per running sandbox: the daemon's resident set grown while 20 sandboxed `sleep`s run
//!    at once, per sandbox, and the resident set of the bubblewrap processes per sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use clawbus::config::{ExecDef, ExecRule, ExecSecurity, NetworkMode, SandboxDef, SandboxMode, Set};
use clawbus::tools::sandbox::{Forwarder, Sandbox};
use clawbus::tools::{ExecTool, ToolContext, ToolSet};
use std::time::{Duration, Instant};

const RUNS: usize = 200;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let floor = measure(|| {
        let out = std::process::Command::new("true").output().unwrap();
        assert!(out.status.success());
    });
    report("std Command `true` (floor)", &floor);

    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext {
        workspace: dir.path().canonicalize().unwrap(),
        agent: clawbus::ids::AgentId::new("bench"),
        session: clawbus::ids::SessionKey::parse("agent:bench:main").unwrap(),
        channel: "api".into(),
        run: None,
    };
    let def = ExecDef {
        security: ExecSecurity::Allowlist,
        allow: vec![ExecRule::Command {
            pattern: "true".into(),
            shell: false,
        }],
        ..ExecDef::default()
    };
    let tools = ToolSet::default().with(ExecTool::new("bench", def.clone(), None));
    let tool = rt.block_on(async {
        let mut samples = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            let out = tools
                .invoke(&ctx, "exec", r#"{"command":"true"}"#, 16_000)
                .await;
            samples.push(started.elapsed());
            assert_eq!(out.text, "exit code: 0\n");
        }
        samples
    });
    report("exec tool `true` (spawn to result)", &tool);
    let overhead = median(&tool).saturating_sub(median(&floor));
    println!(
        "exec overhead over the floor (median): {:.3} ms",
        overhead.as_secs_f64() * 1e3
    );
    sandboxed(&rt, ctx, def, &tool);
}

/// Figures 3 and 4; skipped with a reason where the host cannot sandbox.
fn sandboxed(
    rt: &tokio::runtime::Runtime,
    mut ctx: ToolContext,
    mut def: ExecDef,
    plain: &[Duration],
) {
    let sandbox = SandboxDef {
        mode: Set {
            value: SandboxMode::All,
            origin: None,
        },
        ..SandboxDef::default()
    };
    let sandbox = Sandbox::new(sandbox);
    if let Err(e) = sandbox.locate() {
        println!("sandboxed exec: skipped: {e}");
        return;
    }
    ctx.session = clawbus::ids::SessionKey::parse("agent:bench:api:direct:bench").unwrap();
    def.allow.push(ExecRule::Command {
        pattern: "sleep *".into(),
        shell: false,
    });
    let tools =
        ToolSet::default().with(ExecTool::new("bench", def.clone(), None).with_sandbox(sandbox));
    let boxed = rt.block_on(async {
        let mut samples = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            let out = tools
                .invoke(&ctx, "exec", r#"{"command":"true"}"#, 16_000)
                .await;
            samples.push(started.elapsed());
            assert_eq!(out.text, "exit code: 0\n", "the sandbox must run here");
        }
        samples
    });
    report("sandboxed exec tool `true` (spawn to result)", &boxed);
    println!(
        "sandbox start-up cost over the plain exec tool (median): {:.3} ms",
        median(&boxed).saturating_sub(median(plain)).as_secs_f64() * 1e3
    );
    allowed(rt, &ctx, &def, &boxed);
    const AT_ONCE: usize = 20;
    let before = rss_kib(std::process::id());
    let (daemon, helpers) = rt.block_on(async {
        let calls: Vec<_> = (0..AT_ONCE)
            .map(|_| {
                let (tools, ctx) = (tools.clone(), ctx.clone());
                tokio::spawn(async move {
                    tools
                        .invoke(&ctx, "exec", r#"{"command":"sleep 3"}"#, 16_000)
                        .await
                })
            })
            .collect();
        // A figure, not a test: give every sandbox time to be up.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let daemon = rss_kib(std::process::id()).saturating_sub(before);
        let helpers: u64 = bwrap_pids().into_iter().map(rss_kib).sum();
        for c in calls {
            c.await.unwrap();
        }
        (daemon, helpers)
    });
    println!(
        "memory per running sandbox ({AT_ONCE} at once): daemon {} KiB, bubblewrap processes {} KiB",
        daemon / AT_ONCE as u64,
        helpers / AT_ONCE as u64
    );
}

/// Figure 4: `true` with `network = "allow"`, against `network = "none"` (`boxed`).
fn allowed(rt: &tokio::runtime::Runtime, ctx: &ToolContext, def: &ExecDef, boxed: &[Duration]) {
    fn set<T>(value: T) -> Set<T> {
        Set {
            value,
            origin: None,
        }
    }
    let sandbox = SandboxDef {
        mode: set(SandboxMode::All),
        network: set(NetworkMode::Allow),
        allow_domains: set(vec!["example.com".to_string()]),
        ..SandboxDef::default()
    };
    let sandbox =
        Sandbox::new(sandbox).with_forwarder(Forwarder::program(env!("CARGO_BIN_EXE_clawbus")));
    let tools =
        ToolSet::default().with(ExecTool::new("bench", def.clone(), None).with_sandbox(sandbox));
    let samples = rt.block_on(async {
        let mut samples = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            let out = tools
                .invoke(ctx, "exec", r#"{"command":"true"}"#, 16_000)
                .await;
            samples.push(started.elapsed());
            assert_eq!(
                out.text, "exit code: 0\n",
                "the allow sandbox must run here"
            );
        }
        samples
    });
    report("sandboxed exec tool `true`, network = allow", &samples);
    println!(
        "network = allow over network = none (median): {:.3} ms",
        median(&samples).saturating_sub(median(boxed)).as_secs_f64() * 1e3
    );
}

/// `VmRSS` of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The running bubblewrap processes.
fn bwrap_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "bwrap")
        })
        .collect()
}

fn measure(mut f: impl FnMut()) -> Vec<Duration> {
    (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect()
}

fn median(samples: &[Duration]) -> Duration {
    let mut s = samples.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn report(what: &str, samples: &[Duration]) {
    let mut s = samples.to_vec();
    s.sort();
    let p99 = s[(s.len() * 99 / 100).min(s.len() - 1)];
    println!(
        "{what}: median {:.3} ms, p99 {:.3} ms over {} runs",
        median(&s).as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        s.len()
    );
}
