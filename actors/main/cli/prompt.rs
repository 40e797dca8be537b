//! `clawbus prompt --agent ID [--session KEY] [--json]`: the system prompt an agent's next model
//! call would get, and where its characters go (per layer, per file, skills, tool schemas).
//!
//! Works offline: it loads the configuration, prepares the agent's workspace as `up` would
//! (copying missing seed files, never overwriting; materialising outside skills into
//! `.skills/`) and assembles the prompt; no gateway needed. Tool schemas are those of the agent's
//! policy for channel `cli`.
//! `--json` prints `{"system_prompt": "…", "report": {…}}` (see [`crate::prompt::PromptReport`]).

use super::out::{out, outln};
use super::{EXIT_USAGE, Global};
use crate::agent::tools::ToolServices;
use crate::prompt::{PromptBuilder, ToolsReport, TurnInfo};
use crate::secrets::Secrets;
use crate::skills::{SkillCatalog, SkillSnapshot};
use crate::workspace;
use clap::Args;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `clawbus prompt`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The agent whose prompt to assemble.
    #[arg(long)]
    pub agent: String,
    /// The session key the prompt is for (default `agent:<id>:cli:prompt`).
    #[arg(long)]
    pub session: Option<String>,
    /// Print JSON instead of the prompt and a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus prompt`.
pub(super) fn run(global: &Global, args: PromptArgs) -> ExitCode {
    let config = match global.load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let def = match super::agent_def(&config, &args.agent) {
        Ok(def) => def,
        Err(code) => return code,
    };
    let id = def.id.as_str();
    let ws = match workspace::prepare(&config.state_dir, id, def.seed_dir.as_deref()) {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!(
                "error: agent {id:?}: workspace {}: {e}",
                config.state_dir.join("workspaces").join(id).display()
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // The skills list as a new session of the running agent would take it (this copies outside
    // skills into `<workspace>/.skills/`, as the agent does).
    let snapshot = SkillSnapshot::build(&SkillCatalog::for_agent(&config, def, &ws));
    let secrets = Secrets::from_config(&config).with_names(snapshot.required_env_names());
    let xml = snapshot.render_xml();
    let builder = PromptBuilder::for_agent(def, &config, ws)
        .with_secrets(secrets)
        .with_skills(Arc::new(move |_: &str| xml.clone()));
    let session = args
        .session
        .unwrap_or_else(|| format!("agent:{id}:cli:prompt"));
    let mut assembled = builder.assemble(&TurnInfo {
        session,
        channel: "cli".into(),
    });
    let tools =
        crate::agent::tools::agent_tools(def, &config, &ToolServices::default()).for_channel("cli");
    assembled.report.tools = Some(ToolsReport::of(&tools));
    if args.json {
        let value = serde_json::json!({
            "system_prompt": assembled.text,
            "report": assembled.report,
        });
        match serde_json::to_string_pretty(&value) {
            Ok(text) => outln!("{text}"),
            Err(e) => {
                eprintln!("error: cannot render JSON: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    } else {
        outln!("{}", assembled.text);
        outln!("────────────────────────────────────────");
        out!("{}", assembled.report.render());
    }
    ExitCode::SUCCESS
}
