//! The Control UI's catalog methods: `skills.status`, `skills.library.list`,
//! `skills.proposals.list`, `skills.securityVerdicts` and `skills.search` (clawbus's skills of one agent, from the
//! same scan `clawbus skills list` makes; the library, workshop, registry search and verdicts OpenClaw
//! has and clawbus has not answer empty), `skills.bins` (the programs every agent's skills
//! need), `chat.metadata` (the agents' models) and `plugins.catalog.browse` (empty), in
//! OpenClaw's shapes (see [`super::openclaw::skills`]).

use super::frames::{ErrorCode, ErrorShape};
use super::methods::{Method, params};
use super::openclaw::skills as oc;
use crate::gateway::api::ApiState;
use clawbus_core::config::AgentDef;
use clawbus_runtime::skills::SkillCatalog;
use serde::Deserialize;
use serde_json::Value;

/// Runs one of the catalog methods.
pub(super) fn call(state: &ApiState, method: Method, p: Value) -> Result<Value, ErrorShape> {
    let empty = |answer: Value| {
        tracing::debug!(
            method = method.as_str(),
            "No counterpart here; answered empty."
        );
        Ok(answer)
    };
    match method {
        Method::SkillsStatus => {
            let q: AgentParams = params(method, p)?;
            let agent = agent(state, q.agent_id.as_deref())?;
            let workspace = SkillCatalog::preview_workspace(&state.config, agent);
            let scan = SkillCatalog::for_agent(&state.config, agent, &workspace).scan();
            let managed = state.config.state_dir.join("skills");
            let place = oc::Place {
                agent: agent.id.as_str(),
                workspace: &workspace,
                managed: &managed,
            };
            Ok(oc::status_report(&place, &scan))
        }
        Method::SkillsProposalsList => {
            let q: AgentOnly = params(method, p)?;
            let agent = agent(state, q.agent_id.as_deref())?;
            let workspace = SkillCatalog::preview_workspace(&state.config, agent);
            let scan = SkillCatalog::for_agent(&state.config, agent, &workspace).scan();
            Ok(oc::proposals(&scan, &oc::iso_utc(state.clock.now_ms())))
        }
        Method::SkillsLibraryList => {
            params::<LibraryParams>(method, p).and_then(|_| empty(oc::library()))
        }
        Method::SkillsSecurityVerdicts => {
            params::<AgentOnly>(method, p).and_then(|_| empty(oc::verdicts()))
        }
        Method::SkillsSearch => {
            params::<SearchParams>(method, p).and_then(|_| empty(oc::registry_search()))
        }
        Method::SkillsBins => {
            params::<super::methods::Empty>(method, p)?;
            let scans: Vec<_> = state
                .config
                .agents
                .iter()
                .map(|agent| {
                    let workspace = SkillCatalog::preview_workspace(&state.config, agent);
                    SkillCatalog::for_agent(&state.config, agent, &workspace).scan()
                })
                .collect();
            Ok(oc::bins(&scans))
        }
        Method::ChatMetadata => {
            let q: MetadataParams = params(method, p)?;
            let agents: Vec<&AgentDef> = match q.agent_id.as_deref() {
                Some(id) => vec![agent(state, Some(id))?],
                None => state.config.agents.iter().collect(),
            };
            let mut models: Vec<String> = agents
                .iter()
                .flat_map(|a| std::iter::once(&a.model).chain(&a.fallbacks))
                .map(ToString::to_string)
                .collect();
            models.sort();
            models.dedup();
            Ok(oc::chat_metadata(&models))
        }
        Method::PluginsCatalogBrowse => {
            params::<BrowseParams>(method, p).and_then(|_| empty(oc::plugins_catalog()))
        }
        other => Err(ErrorShape::invalid(format!(
            "{} is not one of the catalog methods",
            other.as_str()
        ))),
    }
}

/// The agent `id` names, else the first one.
fn agent<'a>(state: &'a ApiState, id: Option<&str>) -> Result<&'a AgentDef, ErrorShape> {
    let found = match id {
        Some(id) => state.config.agent(id),
        None => state.config.agents.first(),
    };
    found.ok_or_else(|| {
        ErrorShape::new(
            ErrorCode::NotFound,
            format!("no agent \"{}\"", id.unwrap_or("(none configured)")),
        )
    })
}

/// `{agentId?, sessionKey?}` of `skills.status` (the session changes nothing here).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentParams {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default, rename = "sessionKey")]
    _session_key: Option<String>,
}

/// `{agentId?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AgentOnly {
    #[serde(default)]
    agent_id: Option<String>,
}

/// `{sessionKey?, scope?}` of `skills.library.list`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LibraryParams {
    #[serde(default, rename = "sessionKey")]
    _session_key: Option<String>,
    #[serde(default, rename = "scope")]
    _scope: Option<String>,
}

/// `{query?, limit?}` of `skills.search`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchParams {
    #[serde(default, rename = "query")]
    _query: Option<String>,
    #[serde(default, rename = "limit")]
    _limit: Option<u32>,
}

/// `{agentId?, authProfileId?, sessionKey?}` of `chat.metadata`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MetadataParams {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default, rename = "authProfileId")]
    _auth_profile_id: Option<String>,
    #[serde(default, rename = "sessionKey")]
    _session_key: Option<String>,
}

/// `{query?, searchSource?, intent?, category?, cursor?, pageSize?}` of
/// `plugins.catalog.browse`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BrowseParams {
    #[serde(default, rename = "query")]
    _query: Option<String>,
    #[serde(default, rename = "searchSource")]
    _search_source: Option<String>,
    #[serde(default, rename = "intent")]
    _intent: Option<String>,
    #[serde(default, rename = "category")]
    _category: Option<String>,
    #[serde(default, rename = "cursor")]
    _cursor: Option<String>,
    #[serde(default, rename = "pageSize")]
    _page_size: Option<u32>,
}
