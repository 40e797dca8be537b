//! `clawbus skills [--agent ID] [--json]`: every skill found for an agent, where it comes from,
//! and whether the model sees it or why not.
//!
//! Nothing is written: an agent that never ran is shown with the skills its seed folder
//! (`agents.d/<id>/skills/`) will bring, and locations outside the workspace are shown as the
//! `.skills/` copies the running agent will make. `--json` prints an array with one object per
//! agent: `{agent, workspace, skills: [{name, description, source, file, location, visible,
//! reasons, …}], warnings}`.

use super::{EXIT_USAGE, Global};
use crate::config::{AgentDef, Config};
use crate::skills::{FoundSkill, ScanResult, SkillCatalog};
use clap::Args;
use std::process::ExitCode;

/// Arguments of `clawbus skills`.
#[derive(Debug, Args)]
pub struct SkillsArgs {
    /// Only this agent (default: every agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clawbus skills`.
pub(super) fn run(global: &Global, args: SkillsArgs) -> ExitCode {
    let config = match global.load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let agents: Vec<&AgentDef> = match &args.agent {
        Some(id) => match config.agent(id) {
            Some(def) => vec![def],
            None => {
                let known: Vec<&str> = config.agents.iter().map(|a| a.id.as_str()).collect();
                eprintln!(
                    "error: no agent {id:?} in {} (expected one of: {})",
                    config.agents_dir.display(),
                    known.join(", ")
                );
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => config.agents.iter().collect(),
    };
    let reports: Vec<(&AgentDef, SkillCatalog, ScanResult)> = agents
        .into_iter()
        .map(|def| {
            let catalog = catalog(&config, def);
            let scan = catalog.scan();
            (def, catalog, scan)
        })
        .collect();
    let text = if args.json {
        let value: Vec<serde_json::Value> = reports
            .iter()
            .map(|(def, catalog, scan)| {
                serde_json::json!({
                    "agent": def.id.as_str(),
                    "workspace": catalog.workspace,
                    "skills": scan.skills.iter().map(json_skill).collect::<Vec<_>>(),
                    "warnings": scan.warnings,
                })
            })
            .collect();
        match serde_json::to_string_pretty(&value) {
            Ok(text) => text + "\n",
            Err(e) => {
                eprintln!("error: cannot render JSON: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    } else {
        reports
            .iter()
            .map(|(def, catalog, scan)| table(def, catalog, scan))
            .collect()
    };
    // A closed pipe (`clawbus skills | head`) ends the command quietly.
    super::out::write(&text);
    ExitCode::SUCCESS
}

fn catalog(config: &Config, def: &AgentDef) -> SkillCatalog {
    let workspace = SkillCatalog::preview_workspace(config, def);
    SkillCatalog::for_agent(config, def, &workspace)
}

fn json_skill(found: &FoundSkill) -> serde_json::Value {
    let mut value = serde_json::to_value(found).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("visible".to_string(), found.is_visible().into());
    }
    value
}

/// `agent <id>` then one line per skill: ✓/✗, name, source, location or reasons.
fn table(def: &AgentDef, catalog: &SkillCatalog, scan: &ScanResult) -> String {
    let visible = scan.skills.iter().filter(|f| f.is_visible()).count();
    let mut out = format!(
        "agent {} (workspace {}): {} skills found, {visible} visible\n",
        def.id,
        catalog.workspace.display(),
        scan.skills.len()
    );
    let width = scan
        .skills
        .iter()
        .map(|f| f.skill.name.chars().count())
        .max()
        .unwrap_or(0);
    for found in &scan.skills {
        let s = &found.skill;
        let (mark, detail) = if found.is_visible() {
            ("✓", s.location.clone())
        } else {
            ("✗", found.reasons.join("; "))
        };
        out.push_str(&format!(
            "  {mark} {:<width$}  {:<16}  {detail}\n",
            s.name,
            s.source.label()
        ));
    }
    for warning in &scan.warnings {
        out.push_str(&format!("  warning: {warning}\n"));
    }
    out
}
