//! `clawbus browser status [--json]`: the agents' running browsers (pid, memory, tabs), read
//! from the status files the daemon writes under `<state>/browser/<agent>/` and from `/proc`.
//!
//! It works without a gateway call: a browser whose pid is gone is shown as `stale` (the
//! daemon was killed before it could remove the file). Also says whether Chromium is found.

use super::Global;
use super::out::outln;
use crate::tools::browser::find_chromium;
use crate::tools::browser::pool::STATUS_FILE;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::process::ExitCode;

/// `clawbus browser …`.
#[derive(Debug, Subcommand)]
pub enum BrowserCommand {
    /// The running browsers: agent, pid, resident memory, tabs (id, title, URL).
    Status(BrowserStatusArgs),
}

/// Arguments of `clawbus browser status`.
#[derive(Debug, Args)]
pub struct BrowserStatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus browser …`.
pub(super) fn run(global: &Global, cmd: BrowserCommand) -> ExitCode {
    let BrowserCommand::Status(args) = cmd;
    let config = match global.load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let chromium = find_chromium(&config.browser);
    let mut browsers = Vec::new();
    for agent in &config.agents {
        let path = config
            .state_dir
            .join("browser")
            .join(agent.id.as_str())
            .join(STATUS_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(mut status) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let pid = status["pid"].as_u64().unwrap_or(0);
        let alive = pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists();
        status["agent"] = Value::from(agent.id.as_str());
        status["running"] = Value::from(alive);
        if alive {
            status["rss_bytes"] = Value::from(crate::tools::browser::group_rss(pid as u32));
        }
        browsers.push(status);
    }
    if args.json {
        let out = json!({
            "chromium": chromium.as_ref().map(|p| p.display().to_string()).ok(),
            "chromium_missing": chromium.as_ref().err(),
            "browsers": browsers,
        });
        outln!("{out}");
        return ExitCode::SUCCESS;
    }
    match &chromium {
        Ok(p) => outln!("chromium: {}", p.display()),
        Err(why) => outln!("chromium: missing: {why}"),
    }
    if browsers.is_empty() {
        outln!("no browser running");
    }
    for b in &browsers {
        let tabs = b["tabs"].as_array().cloned().unwrap_or_default();
        outln!(
            "{}: pid {} {}, {} MiB, {} tab(s)",
            b["agent"].as_str().unwrap_or_default(),
            b["pid"],
            if b["running"] == true {
                "running"
            } else {
                "stale (not running)"
            },
            b["rss_bytes"].as_u64().unwrap_or(0) / (1 << 20),
            tabs.len()
        );
        for t in tabs {
            outln!(
                "  {} {:?} {}",
                t["id"].as_str().unwrap_or_default(),
                t["title"].as_str().unwrap_or_default(),
                t["url"].as_str().unwrap_or_default()
            );
        }
    }
    ExitCode::SUCCESS
}
