//! The `clawbus` command line: `up`, `check`, `post`, `chat`, `tasks`, `cron`, `flow`, `sessions`,
//! `approvals`, `prompt`, `sandbox`, `skills`, `tools`, `mcp`, `browser`.
//!
//! Exit codes, the same for every subcommand: 0 success; 1 a failed task, a check that found
//! problems, or a cancel or approval answer that came after the task or request had ended; 2 bad
//! usage, a config problem, an unknown agent/task/session/request, or no gateway; 3 a `--wait`
//! that ran out.

mod approvals;
mod browser;
mod chat;
mod client;
mod cron;
mod flow;
mod mcp;
mod mcp_serve;
mod nodes;
mod out;
mod post;
mod prompt;
mod sandbox;
mod sessions;
mod skills;
mod spend;
mod status;
mod tail;
mod tasks;
mod tools;
mod up;

use crate::config::{self, Config, LoadOptions};
use clap::{Args, Parser, Subcommand};
use out::{out, outln};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code: a task failed, or a check found problems.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad usage, bad config, or the gateway could not be reached.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the wait ran out before the task finished.
pub const EXIT_TIMEOUT: u8 = 3;
/// Exit code: the gateway refused for now (503: its bus's server is unreachable, or it is
/// draining); nothing was accepted, the same command may be run again.
pub const EXIT_UNAVAILABLE: u8 = 4;

/// clawbus: cooperating AI agents as actors on a message bus.
#[derive(Debug, Parser)]
#[command(name = "clawbus", version, about)]
pub struct Cli {
    /// Options every subcommand takes.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every subcommand.
#[derive(Debug, Args)]
pub struct Global {
    /// Gateway-wide settings file [default: clawbus.toml, all defaults when it is absent]. A
    /// file named here or in CLAWBUS_CONFIG must exist.
    #[arg(long, global = true, env = "CLAWBUS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Folder of agent definitions.
    #[arg(
        long,
        global = true,
        env = "CLAWBUS_AGENTS",
        default_value = "agents.d"
    )]
    pub agents: PathBuf,
    /// Where state lives (token, database, workspaces); overrides `state_dir` in the config.
    #[arg(long, global = true, env = "CLAWBUS_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// The gateway's URL, for subcommands that talk to a running gateway.
    #[arg(long, global = true, env = "CLAWBUS_URL")]
    pub url: Option<String>,
    /// Model for every agent, as `provider/model` (overrides the files).
    #[arg(long, global = true, env = "CLAWBUS_MODEL")]
    pub model: Option<String>,
}

/// The settings file read when `--config` is not given.
pub const DEFAULT_CONFIG: &str = "clawbus.toml";

impl Global {
    fn load_options(&self) -> LoadOptions {
        LoadOptions {
            config: self
                .config
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG)),
            agents_dir: self.agents.clone(),
            state_dir: self.state_dir.clone(),
            model_override: self.model.clone(),
        }
    }

    /// A `--config` that names no file: only the default file may be absent.
    fn missing_config(&self) -> Result<(), ExitCode> {
        match &self.config {
            Some(path) if !path.exists() => Err(client::usage(format!(
                "--config {}: file not found (expected an existing clawbus.toml; leave --config and CLAWBUS_CONFIG unset to use {DEFAULT_CONFIG} or all defaults)",
                path.display()
            ))),
            _ => Ok(()),
        }
    }

    /// Loads and validates the configuration, printing every problem on failure.
    fn load(&self) -> Result<Config, ExitCode> {
        self.missing_config()?;
        config::load(&self.load_options()).map_err(|report| {
            eprint!("{}", report.render());
            ExitCode::from(EXIT_USAGE)
        })
    }
}

/// The agent `id` of the configuration, or the usage error that lists the agents there are.
fn agent_def<'a>(config: &'a Config, id: &str) -> Result<&'a config::AgentDef, ExitCode> {
    config.agent(id).ok_or_else(|| {
        let known: Vec<&str> = config.agents.iter().map(|a| a.id.as_str()).collect();
        client::usage(format!(
            "no agent {id:?} in {} (expected one of: {})",
            config.agents_dir.display(),
            known.join(", ")
        ))
    })
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the configuration, then run the gateway, the bus and every agent.
    Up(up::UpArgs),
    /// Check `clawbus.toml`, `agents.d/` and `flows.d/`; print ✓/✗ per file and every problem.
    Check,
    /// Talk to an agent in the terminal, answers streaming, over the WebSocket gateway.
    Chat(chat::ChatArgs),
    /// Post a task to an agent topic (`agent.<id>`), optionally waiting for the reply.
    Post(post::PostArgs),
    /// Print the tools an agent is offered and, for each removed one, which policy layer removed it.
    Tools(tools::ToolsArgs),
    /// List pending approval requests, or answer one: `approvals allow|deny <id> [--always]`.
    Approvals(approvals::ApprovalsArgs),
    /// List sessions (key, id, state, turns, last activity), or show one's transcript.
    Sessions(sessions::SessionsArgs),
    /// Print bus traffic matching a topic pattern (default `>`), one JSON line per message.
    Tail(tail::TailArgs),
    /// Show or cancel a task.
    #[command(subcommand)]
    Tasks(tasks::TasksCommand),
    /// Manage cron jobs: add, list, rm, enable, disable, run, runs.
    #[command(subcommand)]
    Cron(cron::CronCommand),
    /// Flows (`flows.d/`): check, run, status, watch, cancel, list.
    #[command(subcommand)]
    Flow(flow::FlowCommand),
    /// Print the system prompt an agent would get and where its characters go (works offline).
    Prompt(prompt::PromptArgs),
    /// The effective OS sandbox of an agent's session, and which config line set each value.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// List every skill an agent could use: its source, and whether the model sees it or why not.
    Skills(skills::SkillsArgs),
    /// Tokens and cost per agent and model, summed over the task records in the store.
    Usage(spend::UsageArgs),
    /// The running daemon's agents, their models and fallbacks, and each model provider's
    /// circuit breaker.
    Status(status::StatusArgs),
    /// The live nodes sharing this gateway's bus: their agents, lanes, gateways and link to the
    /// server (from their heartbeats).
    Nodes(nodes::NodesArgs),
    /// MCP: `mcp list` starts each configured server and prints its state, versions and tools;
    /// `mcp serve` is an MCP server on stdio exposing the `[mcp.serve]` agents as tools.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// The agents' browsers (the `browser` tool): `browser status` lists the running ones with
    /// their pid, memory and tabs, and says whether Chromium is found.
    #[command(subcommand)]
    Browser(browser::BrowserCommand),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Up(args) => up::run(&cli.global, args),
        Command::Check => check(&cli.global),
        Command::Post(args) => post::run(&cli.global, args),
        Command::Chat(args) => chat::run(&cli.global, args),
        Command::Tools(args) => tools::run(&cli.global, args),
        Command::Approvals(args) => approvals::run(&cli.global, args),
        Command::Sessions(args) => sessions::run(&cli.global, args),
        Command::Tail(args) => tail::run(&cli.global, args),
        Command::Tasks(cmd) => tasks::run(&cli.global, cmd),
        Command::Cron(cmd) => cron::run(&cli.global, cmd),
        Command::Flow(cmd) => flow::run(&cli.global, cmd),
        Command::Prompt(args) => prompt::run(&cli.global, args),
        Command::Sandbox(cmd) => sandbox::run(&cli.global, cmd),
        Command::Skills(args) => skills::run(&cli.global, args),
        Command::Usage(args) => spend::run(&cli.global, args),
        Command::Status(args) => status::run(&cli.global, args),
        Command::Nodes(args) => nodes::run(&cli.global, args),
        Command::Mcp(cmd) => mcp::run(&cli.global, cmd),
        Command::Browser(cmd) => browser::run(&cli.global, cmd),
    }
}

fn check(global: &Global) -> ExitCode {
    if let Err(code) = global.missing_config() {
        return code;
    }
    let opts = global.load_options();
    let (mut report, loaded) = config::check(&opts);
    // What the host lacks for the sandboxes the files turn on (bwrap, cgroups), at the line
    // that turned each on.
    for problem in loaded
        .as_ref()
        .map(crate::tools::sandbox::host_problems)
        .unwrap_or_default()
    {
        match report.files.iter_mut().find(|f| f.path == problem.path) {
            Some(file) => file.problems.push(problem),
            None => report.files.push(config::FileReport {
                path: problem.path.clone(),
                problems: vec![problem],
            }),
        }
    }
    // The rules files of scripted models (`agents.d/<id>/<name>.rules.toml`), which `up` would
    // refuse to load: checked whatever the other files hold, reported in the same format.
    report.files.extend(
        config::rules::rules_files(&opts.agents_dir)
            .iter()
            .map(|path| crate::model::ScriptedModel::check_rules_file(path)),
    );
    out!("{}", report.render());
    if let Some(note) = loaded.as_ref().and_then(browser_note) {
        outln!("{note}");
    }
    if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// Why the agents whose policy allows `browser` will not be offered it, when Chromium is missing.
fn browser_note(config: &config::Config) -> Option<String> {
    let why = crate::tools::browser::find_chromium(&config.browser).err()?;
    let agents: Vec<&str> = config
        .agents
        .iter()
        .filter(|a| a.tools.rule("browser") == config::AgentRule::Allowed)
        .map(|a| a.id.as_str())
        .collect();
    (!agents.is_empty()).then(|| {
        format!(
            "note: tool \"browser\" will not be offered to {}: {why}",
            agents.join(", ")
        )
    })
}

/// The most threads the runtime runs blocking work on (a transcript's sync, a tool's file work).
/// tokio's default is 512: under load each turn's sync took a thread of its own, 45 of them at
/// 32 turns at once, each keeping its own allocator heap (megabytes, never given back while the
/// load lasts); queued on 16, the syncs of one disk take as long.
const BLOCKING_THREADS: usize = 16;

/// The tokio runtime of a command: the CLI's own HTTP calls, the daemon's workers.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    // As many workers as cores this process may use (`taskset` is respected), at least 2.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::from(EXIT_USAGE)
        })
}
