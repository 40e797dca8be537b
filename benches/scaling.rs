//! Figures, printed, never asserted: `cargo bench --bench scaling`.
//!
//! Durable turns per second of the release daemon pinned to 1 and to 2 cores, 256 concurrent
//! sessions. For each core set (`SCALING_CPUS`, default `0;0,1`) a fresh project with one `echo`
//! agent on the built-in `scripted/echo` model is started as `taskset -c <set> clawbus up --port 0`;
//! `[lanes] main = 256`, so the global lane (4 by default) is not the cap, and `[sessions] max_live`
//! is far above 256, so no session actor is evicted. 256 client tasks each loop on
//! `POST /v1/agents/echo/tasks {"text", "wait": true, "session": "s<i>"}` over one keep-alive
//! HTTP/1 client (a connection per task): every answer counted is `succeeded`, so its transcript
//! line was synced and its outcome committed to the task journal before it came back. A warm-up (`SCALING_WARMUP`
//! seconds, default 2) opens every session and connection first; then the measured window
//! (`SCALING_SECS`, default 10) counts turns that finished inside it, with median and p99 latency.
//!
//! The load generator is pinned (all its threads, with `taskset -a -p`) to the online cores the
//! daemon does not use; when there are none (the 2-core run on a 2-core machine) it runs on every
//! core, sharing them with the daemon, and that row is a lower bound. Each row also shows the CPU
//! the daemon and the generator used in the window, and the daemon's busiest threads: CPU share,
//! and the share of 2 ms samples in which each was runnable (R) or waiting on the disk (D). Thread
//! names are the kernel's 15-character `comm`: `clawbus` is the main thread, which is the actix
//! System thread (broker, agent and lane actors); `actix-rt|system` are the session-shard arbiters
//! (`actix-rt|system:0|arbiter:N`, cut short); `tokio-rt-worker` the HTTP runtime;
//! `clawbus-commit` the sled group commit; `sled-io-*` / `sled-flusher` sled's own.
//!
//! Environment: `CLAWBUS_BIN` (the binary; default the one this package built), `SCALING_CPUS`,
//! `SCALING_SESSIONS` (256), `SCALING_SECS`, `SCALING_WARMUP`, `SCALING_PROFILE` (a shell command run
//! during the measured window, `{pid}` and `{secs}` replaced, its output printed: e.g.
//! `perf stat -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p {pid} -- sleep {secs}`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods, reason = "a bench measures real time")]

use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const STARTUP: Duration = Duration::from_secs(30);
const SHUTDOWN: Duration = Duration::from_secs(30);
const DRAIN: Duration = Duration::from_secs(30);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Row {
    cpus: String,
    generator: String,
    turns: usize,
    errors: usize,
    secs: f64,
    p50: Duration,
    p99: Duration,
    daemon_cpu: f64,
    gen_cpu: f64,
    /// CPU used in the window by everything else on the machine (a noisy neighbour spoils a row).
    other_cpu: f64,
    threads: Vec<ThreadUse>,
    shards: usize,
}

fn main() {
    let bin = std::env::var("CLAWBUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_BIN_EXE_clawbus")));
    assert!(bin.exists(), "no clawbus binary at {}", bin.display());
    let sets: Vec<String> = std::env::var("SCALING_CPUS")
        .unwrap_or_else(|_| "0;0,1".into())
        .split(';')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let sessions: usize = env_or("SCALING_SESSIONS", 256);
    let secs: f64 = env_or("SCALING_SECS", 10.0);
    let warmup: f64 = env_or("SCALING_WARMUP", 2.0);
    let online = online_cpus();
    println!(
        "scaling: {} ({} sessions, {warmup}s warm-up, {secs}s measured, online cores {online:?})",
        bin.display(),
        sessions
    );

    let mut rows = Vec::new();
    for set in &sets {
        rows.push(run_one(&bin, set, &online, sessions, warmup, secs));
    }

    println!();
    println!(
        "| daemon cores | shards | generator on | turns | turns/s | median | p99 | errors | daemon CPU | generator CPU | other CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {} | {:.0}% | {:.0}% | {:.0}% |",
            r.cpus,
            r.shards,
            r.generator,
            r.turns,
            r.turns as f64 / r.secs,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.errors,
            r.daemon_cpu * 100.0,
            r.gen_cpu * 100.0,
            r.other_cpu * 100.0
        );
    }
    for r in &rows {
        let top: Vec<String> = r
            .threads
            .iter()
            .take(8)
            .map(|t| {
                format!(
                    "{} cpu {:.0}% R {:.0}% D {:.0}%",
                    t.name,
                    t.cpu * 100.0,
                    t.runnable * 100.0,
                    t.disk_wait * 100.0
                )
            })
            .collect();
        println!("daemon threads on {}:\n  {}", r.cpus, top.join("\n  "));
    }
    if rows.len() >= 2 {
        let a = rows[0].turns as f64 / rows[0].secs;
        let b = rows[rows.len() - 1].turns as f64 / rows[rows.len() - 1].secs;
        println!(
            "ratio {} / {}: {:.2}x (goal ≥ 1.7x){}",
            rows[rows.len() - 1].cpus,
            rows[0].cpus,
            b / a,
            if rows[rows.len() - 1].generator.contains("shared") {
                "; the generator shared the daemon's cores in the last row, so it is a lower bound"
            } else {
                ""
            }
        );
    }
}

fn run_one(
    bin: &Path,
    set: &str,
    online: &[usize],
    sessions: usize,
    warmup: f64,
    secs: f64,
) -> Row {
    let daemon_cpus = parse_cpus(set);
    let free: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !daemon_cpus.contains(c))
        .collect();
    let (gen_set, generator) = if free.is_empty() {
        (join_cpus(online), format!("{} (shared)", join_cpus(online)))
    } else {
        (join_cpus(&free), join_cpus(&free))
    };

    let dir = tempfile::tempdir().unwrap();
    let project = dir.path();
    std::fs::create_dir_all(project.join("agents.d")).unwrap();
    std::fs::write(project.join("agents.d/echo.toml"), "").unwrap();
    std::fs::write(
        project.join("clawbus.toml"),
        "[lanes]\nmain = 256\n\n[sessions]\nmax_live = 5000\n",
    )
    .unwrap();
    let state = project.join(".clawbus");
    let log = std::fs::File::create(project.join("daemon.log")).unwrap();
    let mut child = Command::new("taskset")
        .arg("-c")
        .arg(set)
        .arg(bin)
        .arg("up")
        .args(["--port", "0"])
        .arg("--config")
        .arg(project.join("clawbus.toml"))
        .arg("--agents")
        .arg(project.join("agents.d"))
        .arg("--state-dir")
        .arg(&state)
        .current_dir(project)
        .env("RUST_LOG", "warn,clawbus_runtime::session::shards=info")
        .env_remove("CLAWBUS_MODEL")
        .env_remove("CLAWBUS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = child.id();
    let url = match wait_listening(&mut child) {
        Some(u) => u,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "daemon on {set} did not print `listening on` within {STARTUP:?}; log:\n{}",
                std::fs::read_to_string(project.join("daemon.log")).unwrap_or_default()
            );
        }
    };
    let token = std::fs::read_to_string(state.join("gateway.token"))
        .unwrap()
        .trim()
        .to_string();

    // Pin this process (every thread, including ones the runtime starts later, which inherit it).
    taskset_self(&gen_set);
    let gen_threads = if free.is_empty() {
        online.len()
    } else {
        free.len()
    }
    .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(gen_threads)
        .enable_all()
        .build()
        .unwrap();
    let profile = std::env::var("SCALING_PROFILE").ok();
    let (turns, errors, mut lat, daemon_cpu, gen_cpu, other_cpu, threads, elapsed) =
        rt.block_on(async {
            let http = reqwest::Client::builder()
                .pool_max_idle_per_host(sessions)
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap();
            let endpoint = format!("{url}/v1/agents/echo/tasks");
            // Warm-up: open every session and connection.
            drive(
                &http,
                &endpoint,
                &token,
                sessions,
                Duration::from_secs_f64(warmup),
                "w",
            )
            .await;

            let sampler = StateSampler::start(pid);
            let t_busy = busy_ticks();
            let t_daemon = proc_cpu_ticks(pid);
            let t_threads = thread_ticks(pid);
            let t_self = proc_cpu_ticks(std::process::id());
            let mut prof = profile.as_ref().map(|cmd| {
                let cmd = cmd
                    .replace("{pid}", &pid.to_string())
                    .replace("{secs}", &format!("{}", secs.ceil() as u64));
                Command::new("sh")
                    .args(["-c", &cmd])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            });
            let started = Instant::now();
            let (turns, errors, lat) = drive(
                &http,
                &endpoint,
                &token,
                sessions,
                Duration::from_secs_f64(secs),
                "m",
            )
            .await;
            let elapsed = started.elapsed().as_secs_f64().min(secs).max(1e-9);
            let window = started.elapsed().as_secs_f64();
            let hz = clock_ticks();
            let daemon_cpu = (proc_cpu_ticks(pid) - t_daemon) as f64 / hz / window;
            let gen_cpu = (proc_cpu_ticks(std::process::id()) - t_self) as f64 / hz / window;
            let busy = (busy_ticks() - t_busy) as f64 / hz / window;
            let other_cpu = (busy - daemon_cpu - gen_cpu).max(0.0);
            let states = sampler.stop();
            let mut threads: Vec<ThreadUse> = {
                let now = thread_ticks(pid);
                let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                now.iter()
                    .map(|(tid, (name, t))| {
                        let before = t_threads.get(tid).map_or(0, |(_, b)| *b);
                        let k = seen.entry(name.clone()).or_default();
                        *k += 1;
                        let (d, r, n) = states.get(tid).copied().unwrap_or((0, 0, 0));
                        ThreadUse {
                            name: format!("{name}#{k}"),
                            cpu: t.saturating_sub(before) as f64 / hz / window,
                            disk_wait: d as f64 / n.max(1) as f64,
                            runnable: r as f64 / n.max(1) as f64,
                        }
                    })
                    .collect()
            };
            threads.sort_by(|a, b| (b.cpu + b.disk_wait).total_cmp(&(a.cpu + a.disk_wait)));
            if let Some(p) = prof.as_mut() {
                let deadline = Instant::now() + Duration::from_secs(15);
                while p.try_wait().unwrap().is_none() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                if p.try_wait().unwrap().is_none() {
                    let _ = p.kill();
                }
            }
            if let Some(p) = prof {
                let out = p.wait_with_output().unwrap();
                println!(
                    "profile on {set}:\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            (
                turns, errors, lat, daemon_cpu, gen_cpu, other_cpu, threads, elapsed,
            )
        });
    drop(rt);
    taskset_self(&join_cpus(online));

    let shards = std::fs::read_to_string(project.join("daemon.log"))
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|x| x.contains("shards"))
                .and_then(|x| x.split("shards=").nth(1).map(str::to_string))
        })
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(daemon_cpus.len());
    stop(&mut child, set);

    let (p50, p99) = percentiles(&mut lat);
    println!(
        "daemon on cores {set}: {turns} turns in {elapsed:.1}s = {:.0} turns/s, median {:.2} ms, p99 {:.2} ms, {errors} errors",
        turns as f64 / elapsed,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    Row {
        cpus: set.to_string(),
        generator,
        turns,
        errors,
        secs: elapsed,
        p50,
        p99,
        daemon_cpu,
        gen_cpu,
        other_cpu,
        threads,
        shards,
    }
}

/// `sessions` tasks, each looping on its own session until `dur` is over; returns the turns that
/// finished `succeeded` inside the window, the failures, and the latencies of the counted turns.
async fn drive(
    http: &reqwest::Client,
    endpoint: &str,
    token: &str,
    sessions: usize,
    dur: Duration,
    tag: &str,
) -> (usize, usize, Vec<Duration>) {
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + dur;
    let mut joins = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let (http, endpoint, token, stop, tag) = (
            http.clone(),
            endpoint.to_string(),
            token.to_string(),
            stop.clone(),
            tag.to_string(),
        );
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let t = Instant::now();
                let res = http
                    .post(&endpoint)
                    .bearer_auth(&token)
                    .json(&json!({
                        "text": format!("hello {tag}{i}"),
                        "wait": true,
                        "session": format!("s{s}"),
                        "timeout_ms": 60_000,
                    }))
                    .send()
                    .await;
                i += 1;
                let ok = match res {
                    Ok(r) => match r.json::<serde_json::Value>().await {
                        Ok(v) => v["state"] == "succeeded",
                        Err(_) => false,
                    },
                    Err(_) => false,
                };
                let done = Instant::now();
                if done > deadline {
                    break; // finished after the window: not counted
                }
                if ok {
                    lat.push(done - t);
                } else {
                    errors += 1;
                    if errors > 100 {
                        break;
                    }
                }
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    let all = futures::future::join_all(joins);
    match tokio::time::timeout(dur + DRAIN, all).await {
        Ok(results) => {
            for r in results {
                let (l, e) = r.unwrap();
                lat.extend(l);
                errors += e;
            }
        }
        Err(_) => {
            stop.store(true, Ordering::Relaxed);
            panic!("clients did not finish within {DRAIN:?} after the window");
        }
    }
    (lat.len(), errors, lat)
}

/// Reads the daemon's stdout until `listening on <url>` (bounded by [`STARTUP`]).
fn wait_listening(child: &mut Child) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(u) = line.strip_prefix("listening on ") {
                    let _ = tx.send(u.trim().to_string());
                    sent = true;
                }
            }
            // Keep draining so the daemon never blocks on a full pipe.
        }
    });
    rx.recv_timeout(STARTUP).ok()
}

/// SIGTERM, then wait at most [`SHUTDOWN`]; SIGKILL after that.
fn stop(child: &mut Child, set: &str) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let deadline = Instant::now() + SHUTDOWN;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    println!("daemon on {set} exited with {status}");
                }
                return;
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                println!("daemon on {set} did not stop within {SHUTDOWN:?}; killed");
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
        }
    }
}

fn taskset_self(cpus: &str) {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &std::process::id().to_string()])
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        _ => println!("(could not pin the generator to {cpus}; it runs unpinned)"),
    }
}

fn online_cpus() -> Vec<usize> {
    // The cores this process may run on (respects an outer taskset).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| parse_cpus(l.trim()))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

fn parse_cpus(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                v.extend(a..=b);
            }
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

fn join_cpus(c: &[usize]) -> String {
    c.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a `/proc/.../stat` file; (comm, ticks).
fn stat_ticks(path: &Path) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(path).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let name = s[open + 1..close].to_string();
    let f: Vec<&str> = s[close + 2..].split_whitespace().collect();
    // Fields after `) `: state is index 0, utime is field 14 of the line (index 11), stime 12.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks))
}

/// Ticks every core spent busy (not idle or waiting on I/O), machine-wide.
fn busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    v.iter().take(8).sum::<u64>() - v.get(3).copied().unwrap_or(0) - v.get(4).copied().unwrap_or(0)
}

fn proc_cpu_ticks(pid: u32) -> u64 {
    stat_ticks(Path::new(&format!("/proc/{pid}/stat"))).map_or(0, |(_, t)| t)
}

/// Per thread of `pid`: tid → (name, ticks).
fn thread_ticks(pid: u32) -> BTreeMap<u64, (String, u64)> {
    let mut m = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in rd.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            if let Some(v) = stat_ticks(&e.path().join("stat")) {
                m.insert(tid, v);
            }
        }
    }
    m
}

/// CPU time and sampled states of one daemon thread over the measured window.
struct ThreadUse {
    name: String,
    cpu: f64,
    /// Share of samples in state D (uninterruptible: waiting on the disk, e.g. in fsync).
    disk_wait: f64,
    /// Share of samples in state R (running or waiting for a core).
    runnable: f64,
}

/// Samples every thread's state (`/proc/<pid>/task/<tid>/stat`) every 2 ms on its own thread.
struct StateSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<u64, (u64, u64, u64)>>,
}

impl StateSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            // tid → (samples in D, samples in R, samples)
            let mut m: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                    for e in rd.flatten() {
                        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
                            continue;
                        };
                        let Ok(s) = std::fs::read_to_string(e.path().join("stat")) else {
                            continue;
                        };
                        let state = s.rfind(')').and_then(|i| s[i + 2..].chars().next());
                        let c = m.entry(tid).or_default();
                        c.2 += 1;
                        match state {
                            Some('D') => c.0 += 1,
                            Some('R') => c.1 += 1,
                            _ => {}
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            m
        });
        Self { stop, thread }
    }

    fn stop(self) -> BTreeMap<u64, (u64, u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    if samples.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}
