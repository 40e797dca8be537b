//! `clawbus up`: check, then run the daemon until SIGINT/SIGTERM.

use super::{EXIT_USAGE, Global};
use crate::daemon::{Daemon, StartOptions};
use clap::Args;
use std::io::Write;
use std::process::ExitCode;

/// Flags of `clawbus up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Port to listen on (overrides `gateway.port`).
    #[arg(long, env = "CLAWBUS_PORT")]
    pub port: Option<u16>,
    /// Allow binding a non-loopback address.
    #[arg(long)]
    pub allow_public: bool,
    /// The bus to run on (overrides `[bus] backend`): `local`, or a NATS JetStream URL such as
    /// `nats://127.0.0.1:4222` that several daemons share.
    #[arg(
        long = "bus",
        env = "CLAWBUS_BUS",
        value_name = "local|nats://HOST:PORT"
    )]
    pub bus: Option<String>,
    /// This daemon's name among the nodes of a shared bus (1-64 of A-Z a-z 0-9 - _).
    #[arg(long, env = "CLAWBUS_NODE_ID", value_name = "ID")]
    pub node_id: Option<String>,
    /// The agents this node hosts (runs tasks for), comma-separated; default every agent. The
    /// others are still posted to and called from here, and run on the nodes hosting them.
    #[arg(
        long,
        env = "CLAWBUS_AGENTS_HERE",
        value_name = "AGENT,…",
        value_delimiter = ','
    )]
    pub agents_here: Option<Vec<String>>,
}

/// Applies `--bus` and `--node-id` to the loaded configuration.
fn apply_bus_flags(config: &mut crate::config::Config, args: &UpArgs) -> Result<(), String> {
    if let Some(bus) = &args.bus {
        config.bus.backend =
            crate::config::BusBackend::parse(bus).map_err(|e| format!("--bus: {e}"))?;
    }
    if let Some(node) = &args.node_id {
        let ok = (1..=64).contains(&node.len())
            && node
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(format!(
                "--node-id: {node:?} must be 1-64 characters of A-Z a-z 0-9 - _"
            ));
        }
        config.bus.node_id = Some(node.clone());
    }
    if let Some(names) = &args.agents_here {
        config.bus.agents_here = Some(agents_here(config, names)?);
    }
    Ok(())
}

/// The agents `--agents-here` names, each one configured: an unknown name is refused, naming
/// it and the agents there are.
fn agents_here(
    config: &crate::config::Config,
    names: &[String],
) -> Result<Vec<crate::ids::AgentId>, String> {
    let mut here = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let Some(def) = config.agents.iter().find(|a| a.id.as_str() == name) else {
            let known: Vec<&str> = config.agents.iter().map(|a| a.id.as_str()).collect();
            return Err(format!(
                "--agents-here: unknown agent {name:?} (configured: {})",
                known.join(", ")
            ));
        };
        if !here.contains(&def.id) {
            here.push(def.id.clone());
        }
    }
    if here.is_empty() {
        return Err(
            "--agents-here: names no agent (give at least one, or leave it out for every agent)"
                .into(),
        );
    }
    Ok(here)
}

/// Runs the daemon in the foreground.
pub(super) fn run(global: &Global, args: UpArgs) -> ExitCode {
    let mut config = match global.load() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = apply_bus_flags(&mut config, &args) {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    // A sandbox the host cannot provide fails closed per command; say so once, at start.
    for problem in crate::tools::sandbox::host_problems(&config) {
        tracing::error!(%problem, "Sandboxed commands will be refused until this is fixed.");
    }
    // Before anything opens files: sessions, transcripts and sockets all take descriptors.
    crate::system::raise_nofile();
    let rt = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let handle = rt.handle().clone();
    // Actors live on the System's thread; HTTP and model calls run on the tokio workers.
    let system = actix_rt::System::with_tokio_rt(move || rt);
    let code = system.block_on(async move {
        let opts = StartOptions {
            port: args.port,
            allow_public: args.allow_public,
        };
        let daemon = match Daemon::start(config, opts).await {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
        // The start ran code spread over the whole binary: give its pages back before saying
        // the daemon serves; what runs from now on comes back from the page cache as it is used.
        release_start_pages(&daemon);
        idle_release(&daemon);
        // Registered before the daemon says it serves: a SIGTERM sent as soon as it says so is
        // a shutdown, not the default action (death by the signal).
        let mut signals = Signals::install();
        // A closed stdout is no reason not to serve.
        let mut out = std::io::stdout();
        let _ = writeln!(out, "listening on {}", daemon.url()).and_then(|()| out.flush());
        // A store that refuses writes after an error (a full disk) stays refused until the
        // database is opened again: once the state folder takes writes, restart in place.
        let recovered = tokio::select! {
            () = signals.recv() => None,
            fault = daemon.storage_recovered() => Some(fault),
        };
        if let Some(fault) = recovered {
            tracing::warn!(error = %fault, "The state folder takes writes again; restarting in place over a reopened store.");
            let port = daemon.addr().port();
            let report = daemon.shutdown_within(RESTART_GRACE).await;
            tracing::info!(stopped = report.stopped, "Stopped for the restart; unfinished tasks run again.");
            let e = restart_in_place(port);
            eprintln!("error: restart after a storage failure: {e}");
            return ExitCode::FAILURE;
        }
        let grace = daemon.system().config().gateway.shutdown_grace;
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "Shutting down: no new work; running turns may finish (a second signal exits at once)."
        );
        // A second signal during the drain exits at once; unfinished tasks stay in the store.
        tokio::spawn(async move {
            signals.recv().await;
            eprintln!("second signal: exiting now; unfinished tasks run on the next start");
            std::process::exit(130);
        });
        let report = daemon.shutdown().await;
        // Whoever started us may have stopped reading stdout: a closed pipe is no failure.
        let mut out = std::io::stdout();
        let _ = writeln!(
            out,
            "stopped: {} run(s) finished, {} left for the next start",
            report.finished, report.stopped
        )
        .and_then(|()| out.flush());
        ExitCode::SUCCESS
    });
    // Actors that a failed start left unpolled run their `started` when dropped, which needs the
    // tokio runtime: without it the process panicked after printing the real error.
    let _entered = handle.enter();
    drop(system);
    code
}

/// How often `clawbus up` looks whether it has been quiet.
const IDLE_LOOK: std::time::Duration = std::time::Duration::from_secs(10);
/// The most CPU ticks (1/100 s) a quiet stretch of [`IDLE_LOOK`] uses: the idle daemon's timers
/// take one or two.
const QUIET_TICKS: u64 = 10;

/// Gives the executable's pages back again after each stretch of work, once the daemon has
/// been quiet for [`IDLE_LOOK`] ([`crate::resident::IdleRelease`]), for as long as the process
/// runs. Nothing when the start's pages are kept.
fn idle_release(daemon: &Daemon) {
    if keep_start_pages() {
        return;
    }
    let clock = daemon.system().clock().clone();
    tokio::spawn(async move {
        let mut idle = crate::resident::IdleRelease::new(crate::resident::cpu_ticks(), QUIET_TICKS);
        loop {
            clock.sleep(IDLE_LOOK).await;
            if !idle.look(crate::resident::cpu_ticks()) {
                continue;
            }
            match crate::resident::release_start_pages() {
                Ok(r) => tracing::debug!(
                    resident_kib = r.resident_kib,
                    "Quiet: released the executable's pages the work used."
                ),
                Err(e) => tracing::debug!(error = %e, "Could not release the executable's pages."),
            }
        }
    });
}

/// Whether [`KEEP_START_PAGES`] is set.
fn keep_start_pages() -> bool {
    std::env::var_os(KEEP_START_PAGES).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Set (to anything but `0`), `clawbus up` keeps the pages its start faulted in: for measuring
/// what a start touches, or memory that must not include code faulted back in later.
const KEEP_START_PAGES: &str = "CLAWBUS_KEEP_START_PAGES";

/// Releases the executable's pages the start faulted in ([`crate::resident`]) and exports how
/// much that was as `clawbus_start_pages_released_bytes`.
fn release_start_pages(daemon: &Daemon) {
    if keep_start_pages() {
        tracing::debug!("{KEEP_START_PAGES} is set: the start's pages stay mapped.");
        return;
    }
    match crate::resident::release_start_pages() {
        Ok(r) => {
            tracing::debug!(
                mappings = r.mappings,
                resident_kib = r.resident_kib,
                "Released the executable's pages the start used."
            );
            daemon
                .metrics()
                .gauge(
                    "clawbus_start_pages_released_bytes",
                    "Resident bytes of the executable's and its shared libraries' code and constant data given back once the daemon served (the start's pages).",
                    &[],
                )
                .set(i64::try_from(r.resident_kib.saturating_mul(1024)).unwrap_or(i64::MAX));
        }
        Err(e) => tracing::debug!(error = %e, "Could not release the start's pages; keeping them."),
    }
}

/// How long running turns get to finish before a restart in place (they cannot record
/// anything while the store refuses writes).
const RESTART_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Replaces this process with a fresh `clawbus` run with the same arguments and environment,
/// pinned to `port` (the one it listened on): the same process id, the same address, every
/// store opened afresh. Every descriptor the daemon opened closes (they are close-on-exec),
/// the database lock with them. Returns only when the exec failed.
fn restart_in_place(port: u16) -> std::io::Error {
    use std::os::unix::process::CommandExt as _;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return e,
    };
    let mut args = std::env::args_os().skip(1);
    let mut kept = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--port" {
            args.next();
        } else if !arg.to_string_lossy().starts_with("--port=") {
            kept.push(arg);
        }
    }
    kept.push("--port".into());
    kept.push(port.to_string().into());
    std::process::Command::new(exe).args(kept).exec()
}

/// SIGINT and SIGTERM, registered: from [`Signals::install`] on, either is waited for by
/// [`Signals::recv`] instead of ending the process.
struct Signals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Self(Some((int, term))),
            _ => {
                tracing::warn!("Signal handlers unavailable; waiting for Ctrl-C only.");
                Self(None)
            }
        }
    }

    /// Returns at the next SIGINT or SIGTERM.
    async fn recv(&mut self) {
        match &mut self.0 {
            Some((int, term)) => {
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}
