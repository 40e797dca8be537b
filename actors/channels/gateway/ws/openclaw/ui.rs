//! What the Control UI reads, in OpenClaw's shapes (its `AgentsListResult`,
//! `AgentIdentityResult`, `SessionsResolveResult`, `TalkCatalogResult`, `UpdateStatusResult`,
//! the `models.authStatus` and `device.pair.list` answers). Where clawbus has the concept the
//! answer carries its data (agents, their models, sessions); where it has none the answer is
//! OpenClaw's empty-but-valid one, so the screen shows "nothing" rather than an error.

use clawbus_core::config::AgentDef;
use serde_json::{Value, json};

/// An agent as a row of `agents.list`: `{id, name, identity: {name}, model: {primary,
/// fallbacks}}`, plus clawbus's `description`.
pub(crate) fn agent_row(a: &AgentDef) -> Value {
    let mut row = json!({
        "id": a.id.as_str(),
        "name": a.id.as_str(),
        "identity": { "name": a.id.as_str() },
        "model": {
            "primary": a.model.to_string(),
            "fallbacks": a.fallbacks.iter().map(ToString::to_string).collect::<Vec<_>>(),
        },
    });
    if let Some(d) = &a.description {
        row["description"] = json!(d);
    }
    row
}

/// The `agents.list` answer: the default agent first.
pub(crate) fn agents_list(agents: &[AgentDef]) -> Value {
    json!({
        "defaultId": agents.first().map(|a| a.id.as_str()).unwrap_or("main"),
        "mainKey": "main",
        "scope": "per-sender",
        "agents": agents.iter().map(agent_row).collect::<Vec<_>>(),
    })
}

/// The `agent.identity.get` answer: the agent's id as its name (from the config).
pub(crate) fn identity(agent: &str) -> Value {
    json!({ "agentId": agent, "name": agent, "nameSource": "config", "avatarStatus": "none" })
}

/// The `sessions.resolve` answer: the session when `found` names it (`{ok: true, key, agentId}`),
/// else `{ok: false}`.
pub(crate) fn resolved(found: Option<(&str, &str)>) -> Value {
    match found {
        Some((key, agent)) => json!({ "ok": true, "key": key, "agentId": agent }),
        None => json!({ "ok": false }),
    }
}

/// `models.authStatus`: no model-provider credentials are managed here (keys come from the
/// environment), so no provider is listed.
pub(crate) fn models_auth_status(now_ms: u64) -> Value {
    json!({ "ts": now_ms, "providers": [] })
}

/// `update.status`: clawbus does not update itself; no update is known.
pub(crate) fn update_status() -> Value {
    json!({ "sentinel": null, "updateAvailable": null })
}

/// `talk.catalog`: no voice providers.
pub(crate) fn talk_catalog() -> Value {
    json!({
        "modes": [],
        "transports": [],
        "brains": [],
        "speech": { "providers": [] },
        "transcription": { "providers": [] },
        "realtime": { "providers": [] },
    })
}

/// `sessions.catalog.list`: no external session catalogs.
pub(crate) fn sessions_catalog() -> Value {
    json!({ "catalogs": [] })
}

/// `device.pair.list`: no pairing (the gateway token is the credential).
pub(crate) fn device_pairs() -> Value {
    json!({ "pending": [], "paired": [] })
}

/// `progressCard.get`: no progress cards.
pub(crate) fn progress_card() -> Value {
    json!({ "card": null })
}

/// `sessions.branches.list`: a clawbus transcript does not branch.
pub(crate) fn branches() -> Value {
    json!({ "branches": [] })
}

/// `sessions.companion.state`: no companion exchanges.
pub(crate) fn companion() -> Value {
    json!({ "exchanges": [] })
}

/// `sessions.observer.visibility`: accepted (nothing is observed).
pub(crate) fn observer_visibility() -> Value {
    json!({ "ok": true })
}

/// `environments.list`: no worker environments.
pub(crate) fn environments() -> Value {
    json!({ "environments": [] })
}

/// `node.list`: no paired nodes.
pub(crate) fn nodes(now_ms: u64) -> Value {
    json!({ "ts": now_ms, "nodes": [] })
}

/// `plugins.list`: no plugins, and none can be installed from the UI.
pub(crate) fn plugins() -> Value {
    json!({ "plugins": [], "diagnostics": [], "mutationAllowed": false })
}

/// `channels.status`: OpenClaw's messaging-channel accounts (none here: clawbus's channels are
/// configured in its own files and shown by `clawbus status`).
pub(crate) fn channels_status(now_ms: u64) -> Value {
    json!({
        "ts": now_ms,
        "channelOrder": [],
        "channelLabels": {},
        "channels": {},
        "channelAccounts": {},
        "channelDefaultAccountId": {},
    })
}

/// What `system.info` reports of the machine clawbus runs on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Machine {
    /// The host name.
    pub(crate) hostname: String,
    /// The kernel release.
    pub(crate) release: String,
    /// CPUs available.
    pub(crate) cpus: usize,
    /// `MemTotal` and `MemAvailable`, bytes.
    pub(crate) memory: (u64, u64),
    /// The daemon's uptime, ms.
    pub(crate) uptime_ms: u64,
    /// The gateway's port.
    pub(crate) port: u16,
}

/// The `system.info` answer (`nodeVersion` is empty: clawbus does not run on Node).
pub(crate) fn system_info(m: &Machine) -> Value {
    let os = std::env::consts::OS;
    json!({
        "machineName": m.hostname,
        "hostname": m.hostname,
        "platform": os,
        "release": m.release,
        "arch": std::env::consts::ARCH,
        "osLabel": format!("{os} {}", m.release).trim().to_string(),
        "port": m.port,
        "nodeVersion": "",
        "pid": std::process::id(),
        "uptimeMs": m.uptime_ms,
        "cpuCount": m.cpus,
        "memoryTotalBytes": m.memory.0,
        "memoryFreeBytes": m.memory.1,
    })
}

/// `MemTotal` and `MemAvailable` (bytes) from the text of `/proc/meminfo`.
pub(crate) fn meminfo(text: &str) -> (u64, u64) {
    let kib = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .map_or(0, |n| n.saturating_mul(1024))
    };
    (kib("MemTotal"), kib("MemAvailable"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_answers_have_every_field_openclaws_schema_requires() {
        let talk = talk_catalog();
        for k in ["modes", "transports", "brains"] {
            assert_eq!(talk[k], json!([]), "{k}");
        }
        for k in ["speech", "transcription", "realtime"] {
            assert_eq!(talk[k]["providers"], json!([]), "{k}");
        }
        let update = update_status();
        assert!(update["updateAvailable"].is_null() && update.get("sentinel").is_some());
        assert_eq!(models_auth_status(7), json!({ "ts": 7, "providers": [] }));
        assert_eq!(device_pairs(), json!({ "pending": [], "paired": [] }));
        assert_eq!(sessions_catalog(), json!({ "catalogs": [] }));
        let channels = channels_status(5);
        for k in [
            "ts",
            "channelOrder",
            "channelLabels",
            "channels",
            "channelAccounts",
            "channelDefaultAccountId",
        ] {
            assert!(channels.get(k).is_some(), "{k}");
        }
        assert_eq!(plugins()["mutationAllowed"], false);
        assert_eq!(progress_card(), json!({ "card": null }));
    }

    #[test]
    fn system_info_reports_the_machine_with_every_required_field() {
        let text = "MemTotal:       16384 kB\nMemFree: 1 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(meminfo(text), (16384 * 1024, 8192 * 1024));
        assert_eq!(meminfo("garbage"), (0, 0));
        let m = Machine {
            hostname: "box".into(),
            release: "6.1".into(),
            cpus: 2,
            memory: (10, 5),
            uptime_ms: 7,
            port: 18789,
        };
        let info = system_info(&m);
        for k in [
            "machineName",
            "hostname",
            "platform",
            "release",
            "arch",
            "osLabel",
            "nodeVersion",
            "pid",
            "uptimeMs",
            "cpuCount",
            "memoryTotalBytes",
            "memoryFreeBytes",
        ] {
            assert!(info.get(k).is_some(), "{k}");
        }
        assert_eq!(info["hostname"], "box");
        assert_eq!(info["memoryFreeBytes"], 5);
    }

    #[test]
    fn sessions_resolve_and_identity_carry_clawbus_names() {
        assert_eq!(
            resolved(Some(("agent:echo:main", "echo"))),
            json!({ "ok": true, "key": "agent:echo:main", "agentId": "echo" })
        );
        assert_eq!(resolved(None), json!({ "ok": false }));
        let id = identity("echo");
        assert_eq!(id["agentId"], "echo");
        assert_eq!(id["name"], "echo");
        assert_eq!(id["nameSource"], "config");
    }
}
