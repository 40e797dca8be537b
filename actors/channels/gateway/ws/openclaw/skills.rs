//! Skills and catalogs in OpenClaw's shapes, as its Control UI reads them: `skills.status` (its
//! `SkillStatusReport`: clawbus's skills of one agent with their requirements and what is
//! missing), the empty skill library, workshop and verdicts, `chat.metadata`
//! (`ChatMetadataResult`: the agents' models as `ModelChoice`s, no commands) and
//! `plugins.catalog.browse` (`PluginsCatalogBrowseResult`, empty: no plugin catalog here).

use clawbus_runtime::skills::{FoundSkill, ScanResult, SkillSource};
use serde_json::{Value, json};
use std::path::Path;

/// OpenClaw's name for where a skill was found.
pub(crate) fn source(s: SkillSource) -> &'static str {
    match s {
        SkillSource::Workspace => "openclaw-workspace",
        SkillSource::WorkspaceAgents => "agents-skills-project",
        SkillSource::PersonalAgents => "agents-skills-personal",
        SkillSource::Managed => "openclaw-managed",
        SkillSource::Bundled => "openclaw-bundled",
        SkillSource::Extra => "openclaw-extra",
    }
}

/// The `skills.bins` answer (`{bins}`): every program the skills of these scans need, all or
/// any of (`requires.bins`, `requires.anyBins`), once each, sorted; as OpenClaw, skills an
/// agent's filter leaves out count too.
pub(crate) fn bins(scans: &[ScanResult]) -> Value {
    let bins: std::collections::BTreeSet<&str> = scans
        .iter()
        .flat_map(|scan| &scan.skills)
        .flat_map(|f| {
            f.skill
                .requires
                .bins
                .iter()
                .chain(&f.skill.requires.any_bins)
        })
        .map(|b| b.trim())
        .filter(|b| !b.is_empty())
        .collect();
    json!({ "bins": bins })
}

/// Where a report's skills come from.
pub(crate) struct Place<'a> {
    /// The agent.
    pub(crate) agent: &'a str,
    /// Its workspace (or the seed folder it will be copied from).
    pub(crate) workspace: &'a Path,
    /// `<state-dir>/skills`.
    pub(crate) managed: &'a Path,
}

/// The `skills.status` answer: every skill the agent's scan found but those another source
/// shadows (OpenClaw lists the merged set), in scan order.
pub(crate) fn status_report(place: &Place<'_>, scan: &ScanResult) -> Value {
    let skills: Vec<Value> = scan
        .skills
        .iter()
        .filter(|f| !f.reasons.iter().any(|r| r.starts_with("shadowed by ")))
        .map(status_row)
        .collect();
    json!({
        "workspaceDir": place.workspace.display().to_string(),
        "managedSkillsDir": place.managed.display().to_string(),
        "agentId": place.agent,
        "skills": skills,
    })
}

/// One skill as a `SkillStatusEntry`. What is missing is read back from the gate's reasons.
fn status_row(f: &FoundSkill) -> Value {
    let s = &f.skill;
    let req = &s.requires;
    let (mut bins, mut any_bins, mut env, mut config, mut os) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut filtered = false;
    for r in &f.reasons {
        if let Some(b) = r.strip_prefix("missing bin ") {
            bins.push(b.to_string());
        } else if r.starts_with("missing any of bins ") {
            any_bins.clone_from(&req.any_bins);
        } else if let Some(e) = r
            .strip_prefix("env ")
            .and_then(|x| x.strip_suffix(" unset"))
        {
            env.push(e.to_string());
        } else if let Some(c) = r
            .strip_prefix("config ")
            .and_then(|x| x.strip_suffix(" is falsy"))
        {
            config.push(c.to_string());
        } else if r.starts_with("os ") {
            os.clone_from(&s.os);
        } else if r == "not in the agent's skills.allow" {
            filtered = true;
        }
    }
    let eligible = os.is_empty()
        && (s.always
            || bins.is_empty() && any_bins.is_empty() && env.is_empty() && config.is_empty());
    let checks: Vec<Value> = req
        .config
        .iter()
        .map(|p| json!({ "path": p, "satisfied": !config.contains(p) }))
        .collect();
    json!({
        "name": s.name,
        "description": s.description,
        "source": source(s.source),
        "bundled": s.source == SkillSource::Bundled,
        "filePath": s.file.display().to_string(),
        "baseDir": s.dir.display().to_string(),
        "skillKey": s.name,
        "always": s.always,
        "disabled": false,
        "blockedByAllowlist": false,
        "blockedByAgentFilter": filtered,
        "eligible": eligible,
        "platformIncompatible": !os.is_empty(),
        "modelVisible": f.is_visible(),
        "userInvocable": false,
        "commandVisible": false,
        "requirements": {
            "bins": req.bins, "anyBins": req.any_bins, "env": req.env, "config": req.config, "os": s.os,
        },
        "missing": { "bins": bins, "anyBins": any_bins, "env": env, "config": config, "os": os },
        "configChecks": checks,
        "install": [],
    })
}

/// `skills.library.list`: OpenClaw's uploaded-skill library, which clawbus does not have.
pub(crate) fn library() -> Value {
    json!({
        "entries": [],
        "profileId": null,
        "multipleProfiles": false,
        "defaultTarget": "unavailable",
        "canManageWorkspace": false,
        "defaultSelectionLimit": 64,
    })
}

/// `skills.proposals.list`: no skill workshop here; the installed skills are listed.
pub(crate) fn proposals(scan: &ScanResult, now_iso: &str) -> Value {
    let installed: Vec<Value> = scan
        .skills
        .iter()
        .filter(|f| !f.reasons.iter().any(|r| r.starts_with("shadowed by ")))
        .map(|f| json!({ "name": f.skill.name, "skillKey": f.skill.name, "description": f.skill.description }))
        .collect();
    json!({
        "schema": "openclaw.skill-workshop.proposals-manifest.v1",
        "updatedAt": now_iso,
        "proposals": [],
        "installedSkills": installed,
    })
}

/// Unix ms as an ISO 8601 UTC time (`2026-12-02T01:02:03.004Z`).
pub(crate) fn iso_utc(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// `skills.search`: no skill registry (ClawHub) here, so no results.
pub(crate) fn registry_search() -> Value {
    json!({ "results": [] })
}

/// `skills.securityVerdicts`: no registry verdicts (no ClawHub installs here).
pub(crate) fn verdicts() -> Value {
    json!({ "schema": "openclaw.skills.security-verdicts.v1", "items": [] })
}

/// A model (`provider/id`) as a `ModelChoice`.
pub(crate) fn model_choice(model: &str) -> Value {
    let (provider, id) = model.split_once('/').unwrap_or(("", model));
    let provider = if provider.is_empty() {
        "default"
    } else {
        provider
    };
    json!({ "id": id, "name": id, "provider": provider })
}

/// `chat.metadata`: the models, no slash commands, no swarm.
pub(crate) fn chat_metadata(models: &[String]) -> Value {
    let rows: Vec<Value> = models.iter().map(|m| model_choice(m)).collect();
    json!({ "commands": [], "models": rows, "swarmEnabled": false })
}

/// `plugins.catalog.browse`: an empty page (no plugin catalog here).
pub(crate) fn plugins_catalog() -> Value {
    json!({ "items": [], "categories": [] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawbus_runtime::skills::{Requirements, Skill};
    use std::path::PathBuf;

    fn found(name: &str, source: SkillSource, reasons: &[&str]) -> FoundSkill {
        FoundSkill {
            skill: Skill {
                name: name.into(),
                description: format!("does {name}"),
                source,
                dir: PathBuf::from(format!("/s/{name}")),
                file: PathBuf::from(format!("/s/{name}/SKILL.md")),
                location: format!("skills/{name}/SKILL.md"),
                materialised: false,
                requires: Requirements {
                    bins: vec!["jq".into()],
                    any_bins: vec![],
                    env: vec!["TOKEN".into()],
                    config: vec!["web.key".into()],
                },
                os: vec![],
                always: false,
            },
            reasons: reasons.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn skills_status_lists_the_merged_skills_with_what_is_missing_in_openclaws_shape() {
        let scan = ScanResult {
            skills: vec![
                found("daily-log", SkillSource::Workspace, &[]),
                found(
                    "triage",
                    SkillSource::Bundled,
                    &[
                        "missing bin jq",
                        "env TOKEN unset",
                        "config web.key is falsy",
                    ],
                ),
                found(
                    "daily-log",
                    SkillSource::Bundled,
                    &["shadowed by workspace"],
                ),
            ],
            warnings: vec![],
        };
        let place = Place {
            agent: "main",
            workspace: Path::new("/ws"),
            managed: Path::new("/state/skills"),
        };
        let report = status_report(&place, &scan);
        assert_eq!(report["agentId"], "main");
        assert_eq!(report["workspaceDir"], "/ws");
        let rows = report["skills"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "the shadowed copy is not listed: {report}");
        assert_eq!(rows[0]["source"], "openclaw-workspace");
        assert_eq!(rows[0]["eligible"], true);
        assert_eq!(rows[0]["modelVisible"], true);
        assert_eq!(rows[1]["bundled"], true);
        assert_eq!(rows[1]["eligible"], false);
        assert_eq!(
            rows[1]["missing"],
            json!({ "bins": ["jq"], "anyBins": [], "env": ["TOKEN"], "config": ["web.key"], "os": [] })
        );
        assert_eq!(
            rows[1]["configChecks"],
            json!([{ "path": "web.key", "satisfied": false }])
        );
        assert_eq!(rows[1]["requirements"]["bins"], json!(["jq"]));
        let p = proposals(&scan, "2026-12-02T00:00:00Z");
        assert_eq!(p["proposals"], json!([]));
        assert_eq!(p["installedSkills"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn chat_metadata_and_the_plugin_catalog_answer_openclaws_required_fields() {
        let m = chat_metadata(&["mock/m".into(), "bare".into()]);
        assert_eq!(m["swarmEnabled"], false);
        assert_eq!(m["commands"], json!([]));
        assert_eq!(
            m["models"],
            json!([
                { "id": "m", "name": "m", "provider": "mock" },
                { "id": "bare", "name": "bare", "provider": "default" }
            ])
        );
        assert_eq!(plugins_catalog()["items"], json!([]));
        assert_eq!(library()["entries"], json!([]));
        assert_eq!(verdicts()["items"], json!([]));
        assert_eq!(registry_search(), json!({ "results": [] }));
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(1_796_173_323_004), "2026-12-02T01:02:03.004Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
