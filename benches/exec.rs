//! Figures, printed, never asserted: `cargo bench --bench exec`.
//!
//! exec round-trip overhead for `true`, 200 runs each, median and p99:
//! 1. `std::process::Command::new("true").output()` — the floor: a fork/exec and a wait.
//! 2. The `exec` tool through `ToolSet::invoke` (argument validation, the allowlist decision with
//!    PATH lookup, clean environment, its own process group, one capped pipe, group kill, the
//!    result text) — spawn to result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use clawbus::config::{ExecDef, ExecRule, ExecSecurity};
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
    let tools = ToolSet::default().with(ExecTool::new("bench", def, None));
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
