//! The session methods that list and change sessions: `sessions.list` (filtered by archive
//! mark, paged), `sessions.patch` and `sessions.patchMany` (the archive mark; OpenClaw's other
//! preferences have no counterpart here and are dropped by
//! [`fields::strip`](super::openclaw::fields::strip)), `sessions.delete` and `sessions.compact`. Each goes through the same functions as the HTTP
//! API.

use super::frames::{ErrorCode, ErrorShape};
use super::methods::{Method, params};
use super::openclaw;
use crate::gateway::api::ApiState;
use crate::gateway::sessions;
use clawbus_runtime::session::index::SessionMeta;
use serde::Deserialize;
use serde_json::{Value, json};

/// Runs one of the session methods.
pub(super) async fn call(state: &ApiState, method: Method, p: Value) -> Result<Value, ErrorShape> {
    match method {
        Method::SessionsPatch => {
            let q: PatchParams = params(method, p)?;
            let t = Target {
                key: q.key,
                agent_id: q.agent_id,
                expected_session_id: q.expected_session_id,
            };
            let meta = target(state, &t).await?;
            let meta = match q.archived {
                Some(archived) => sessions::set_archived(state, &meta.key, archived).await?,
                None => meta,
            };
            let row = sessions::row(state, &meta.key).await?;
            Ok(openclaw::sessions::patched(&meta, row.as_ref()))
        }
        Method::SessionsPatchMany => {
            let q: PatchManyParams = params(method, p)?;
            let patch = q.mutation()?;
            let mut outcomes = Vec::with_capacity(q.targets.len());
            for t in q.targets {
                let t = t.target();
                let done = async {
                    let meta = target(state, &t).await?;
                    if let Some(archived) = patch.archived {
                        sessions::set_archived(state, &meta.key, archived).await?;
                    }
                    Ok::<_, ErrorShape>(())
                };
                outcomes.push(openclaw::sessions::patch_outcome(
                    &t.key,
                    t.agent_id.as_deref(),
                    done.await,
                ));
            }
            Ok(json!({ "outcomes": outcomes }))
        }
        Method::SessionsDelete => {
            let q: DeleteParams = params(method, p)?;
            let t = Target {
                key: q.key,
                agent_id: q.agent_id,
                expected_session_id: q.expected_session_id,
            };
            let meta = match target(state, &t).await {
                Ok(meta) => meta,
                // OpenClaw answers a session that is not there with `deleted: false`.
                Err(e) if e.code == ErrorCode::NotFound => {
                    return Ok(openclaw::sessions::deleted(&t.key, false));
                }
                Err(e) => return Err(e),
            };
            if q.expected_session_updated_at
                .is_some_and(|at| at != meta.updated_ms)
            {
                return Err(changed());
            }
            if q.archived_only && !meta.is_archived() {
                return Err(ErrorShape::invalid(format!(
                    "sessions.delete: session {} is not archived (archivedOnly)",
                    meta.key
                )));
            }
            sessions::delete(state, &meta, q.delete_transcript).await?;
            Ok(openclaw::sessions::deleted(&meta.key, true))
        }
        Method::SessionsCompact => {
            let q: CompactParams = params(method, p)?;
            let how = sessions::compact_how(q.max_lines).map_err(|e| {
                ErrorShape::invalid(format!("sessions.compact params: maxLines: {e}"))
            })?;
            let t = Target {
                key: q.key,
                agent_id: q.agent_id,
                expected_session_id: None,
            };
            let meta = match target(state, &t).await {
                Ok(meta) => meta,
                Err(e) if e.code == ErrorCode::NotFound => {
                    return Ok(openclaw::sessions::compact_unknown(&t.key));
                }
                Err(e) => return Err(e),
            };
            match sessions::compact(state, &meta, how).await {
                Ok(done) => Ok(openclaw::sessions::compacted(&meta.key, how, &done)),
                Err(e) => openclaw::sessions::compact_refused(e),
            }
        }
        _ => list(state, params(method, p)?).await,
    }
}

/// `sessions.list`: the sessions the archive filter shows, paged by `offset` and `limit`.
async fn list(state: &ApiState, q: ListParams) -> Result<Value, ErrorShape> {
    let filter = q
        .archived
        .map_or(sessions::Archived::Hide, ArchivedParam::filter);
    let mut rows = sessions::rows(state, q.agent_id.as_deref()).await?;
    rows.retain(|r| filter.shows(r));
    let count = rows.len();
    let offset = q.offset.unwrap_or(0).min(count);
    let shown: Vec<Value> = rows
        .iter()
        .skip(offset)
        .take(q.limit.unwrap_or(usize::MAX))
        .map(openclaw::sessions::row)
        .collect();
    let next = offset + shown.len();
    let mut page = json!({
        "ts": state.clock.now_ms(),
        "count": count,
        "defaults": { "model": state.config.default_model.to_string(), "contextTokens": null },
        "sessions": shown,
        "hasMore": next < count,
    });
    if next < count {
        page["nextOffset"] = json!(next);
    }
    Ok(page)
}

/// The session a patch or delete names, checked against what the client last saw: unknown,
/// of another agent than `agentId`, or with another transcript than `expectedSessionId`, it
/// is refused.
async fn target(state: &ApiState, t: &Target) -> Result<SessionMeta, ErrorShape> {
    let meta = sessions::existing(state, &t.key).await?;
    if t.agent_id.as_deref().is_some_and(|a| a != meta.agent) {
        return Err(ErrorShape::new(
            ErrorCode::NotFound,
            format!("no session {} of agent {:?}", t.key, t.agent_id),
        ));
    }
    if t.expected_session_id
        .as_deref()
        .is_some_and(|id| id != meta.session_id.to_string())
    {
        return Err(changed());
    }
    Ok(meta)
}

/// OpenClaw's refusal of a change to a session that was reset or replaced meanwhile.
fn changed() -> ErrorShape {
    ErrorShape::invalid("Session is unavailable or changed. Refresh the session list.")
}

/// `{key, agentId?, expectedSessionId?}`: the session a change names.
#[derive(Debug)]
struct Target {
    key: String,
    agent_id: Option<String>,
    expected_session_id: Option<String>,
}

/// `sessions.patch`: the target and `archived?`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PatchParams {
    key: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    expected_session_id: Option<String>,
    #[serde(default)]
    archived: Option<bool>,
}

/// The most targets one `sessions.patchMany` names (OpenClaw's schema).
const MAX_PATCH_TARGETS: usize = 100;

/// `sessions.patchMany`: `{targets: [{key, agentId?, expectedSessionId?, …}], patch}`, the patch
/// being what `sessions.patch` changes (without its target).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchManyParams {
    targets: Vec<ManyTarget>,
    patch: Value,
}

impl PatchManyParams {
    /// The change to make: OpenClaw's fields with no counterpart here dropped as
    /// `sessions.patch` drops them, anything else outside its schema refused.
    fn mutation(&self) -> Result<Mutation, ErrorShape> {
        let bad = |why: String| ErrorShape::invalid(format!("sessions.patchMany params: {why}"));
        if self.targets.is_empty() || self.targets.len() > MAX_PATCH_TARGETS {
            return Err(bad(format!(
                "targets: {} given, 1 to {MAX_PATCH_TARGETS} expected",
                self.targets.len()
            )));
        }
        let mut patch = self.patch.clone();
        if patch.as_object().is_none_or(serde_json::Map::is_empty) {
            return Err(bad(
                "patch: an object with at least one field expected".into()
            ));
        }
        super::openclaw::fields::strip("sessions.patch", &mut patch);
        serde_json::from_value(patch).map_err(|e| bad(format!("patch: {e}")))
    }
}

/// One session a `sessions.patchMany` changes. OpenClaw's lifecycle guards other than the
/// transcript id have no counterpart here: accepted and ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ManyTarget {
    key: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    expected_session_id: Option<String>,
    #[serde(default, rename = "expectedLifecycleRevision")]
    _lifecycle_revision: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "expectedSandboxMode")]
    _sandbox_mode: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "expectedPermissionMode")]
    _permission_mode: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "expectedNativeRuntimeConsent")]
    _native_runtime_consent: Option<serde::de::IgnoredAny>,
}

impl ManyTarget {
    fn target(self) -> Target {
        Target {
            key: self.key,
            agent_id: self.agent_id,
            expected_session_id: self.expected_session_id,
        }
    }
}

/// What a `sessions.patchMany` changes in each session: the archive mark.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mutation {
    #[serde(default)]
    archived: Option<bool>,
}

/// `sessions.delete`: the target, `deleteTranscript?`, `archivedOnly?`,
/// `expectedSessionUpdatedAt?`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteParams {
    key: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    expected_session_id: Option<String>,
    #[serde(default)]
    delete_transcript: bool,
    #[serde(default)]
    archived_only: bool,
    #[serde(default)]
    expected_session_updated_at: Option<u64>,
}

/// `sessions.compact`: `{key, agentId?, maxLines?}` (OpenClaw's closed schema).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactParams {
    key: String,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    max_lines: Option<usize>,
}

/// `{agentId?, limit?, offset?, archived?}` of `sessions.list`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    archived: Option<ArchivedParam>,
}

/// `archived` of `sessions.list`: `false` the sessions not archived, `true` the archived ones,
/// `"all"` both.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum ArchivedParam {
    Flag(bool),
    Word(AllWord),
}

/// The one word `archived` takes.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AllWord {
    All,
}

impl ArchivedParam {
    fn filter(self) -> sessions::Archived {
        match self {
            Self::Flag(false) => sessions::Archived::Hide,
            Self::Flag(true) => sessions::Archived::Only,
            Self::Word(AllWord::All) => sessions::Archived::All,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ws::openclaw::fields;

    fn read<T: serde::de::DeserializeOwned>(method: &str, mut p: Value) -> Result<T, String> {
        fields::strip(method, &mut p);
        serde_json::from_value(p).map_err(|e| e.to_string())
    }

    #[test]
    fn the_clis_lifecycle_params_are_read_and_what_the_schema_lacks_is_refused() {
        // What `openclaw sessions archive|delete` sends (from the CLI's source).
        let list: ListParams = read(
            "sessions.list",
            json!({"limit": 200, "archived": "all", "includeGlobal": true,
                   "includeUnknown": true, "configuredAgentsOnly": true}),
        )
        .unwrap();
        assert_eq!(list.limit, Some(200));
        assert_eq!(list.archived.unwrap().filter(), sessions::Archived::All);
        for (flag, filter) in [
            (false, sessions::Archived::Hide),
            (true, sessions::Archived::Only),
        ] {
            let q: ListParams = read("sessions.list", json!({ "archived": flag })).unwrap();
            assert_eq!(q.archived.unwrap().filter(), filter);
        }
        assert!(read::<ListParams>("sessions.list", json!({"archived": "some"})).is_err());

        let patch: PatchParams = read(
            "sessions.patch",
            json!({"key": "agent:a:x", "expectedSessionId": "s", "archived": true,
                   "pinned": true, "label": "mine", "model": null}),
        )
        .unwrap();
        assert_eq!(
            (patch.archived, patch.expected_session_id.as_deref()),
            (Some(true), Some("s"))
        );
        let e = read::<PatchParams>("sessions.patch", json!({"key": "k", "nickname": "n"}));
        assert!(e.unwrap_err().contains("nickname"), "outside the schema");

        let delete: DeleteParams = read(
            "sessions.delete",
            json!({"key": "agent:a:x", "expectedSessionId": "s", "deleteTranscript": true,
                   "archivedOnly": true, "emitLifecycleHooks": true}),
        )
        .unwrap();
        assert!(delete.delete_transcript && delete.archived_only);
        let e = read::<DeleteParams>("sessions.delete", json!({"key": "k", "force": true}));
        assert!(e.unwrap_err().contains("force"), "outside the schema");
    }

    #[test]
    fn patch_many_reads_openclaws_targets_and_drops_what_sessions_patch_drops() {
        let q: PatchManyParams = read(
            "sessions.patchMany",
            json!({"targets": [
                {"key": "agent:a:x", "expectedSessionId": "s", "expectedLifecycleRevision": "7"},
                {"key": "agent:a:y", "agentId": "a", "expectedPermissionMode": null}],
                "patch": {"archived": true, "pinned": true, "label": "old"}}),
        )
        .unwrap();
        assert_eq!(q.mutation().unwrap().archived, Some(true));
        let t: Vec<Target> = q.targets.into_iter().map(ManyTarget::target).collect();
        assert_eq!(t[0].expected_session_id.as_deref(), Some("s"));
        assert_eq!(
            (t[1].key.as_str(), t[1].agent_id.as_deref()),
            ("agent:a:y", Some("a"))
        );

        let outside: PatchManyParams = read(
            "sessions.patchMany",
            json!({"targets": [{"key": "k"}], "patch": {"nickname": "n"}}),
        )
        .unwrap();
        assert!(outside.mutation().unwrap_err().message.contains("nickname"));
        for bad in [
            json!({"targets": [], "patch": {"archived": true}}),
            json!({"targets": [{"key": "k"}], "patch": {}}),
        ] {
            let q: PatchManyParams = read("sessions.patchMany", bad).unwrap();
            assert!(q.mutation().is_err());
        }
        let e = read::<PatchManyParams>(
            "sessions.patchMany",
            json!({"targets": [{"key": "k", "force": true}], "patch": {"archived": true}}),
        );
        assert!(e.unwrap_err().contains("force"), "outside the schema");

        let ok = openclaw::sessions::patch_outcome("agent:a:x", None, Ok(()));
        assert_eq!(ok, json!({"ok": true, "key": "agent:a:x"}));
        let refused = openclaw::sessions::patch_outcome(
            "agent:a:z",
            Some("a"),
            Err(ErrorShape::new(ErrorCode::NotFound, "no session agent:a:z")),
        );
        assert_eq!(
            refused,
            json!({"ok": false, "key": "agent:a:z", "agentId": "a",
                   "error": {"code": "NOT_FOUND", "message": "no session agent:a:z"}})
        );
    }

    #[test]
    fn compact_params_are_openclaws_closed_schema_and_max_lines_is_at_least_one() {
        let q: CompactParams = read(
            "sessions.compact",
            json!({"key": "agent:a:x", "agentId": "a", "maxLines": 200}),
        )
        .unwrap();
        assert_eq!((q.agent_id.as_deref(), q.max_lines), (Some("a"), Some(200)));
        assert_eq!(
            sessions::compact_how(q.max_lines),
            Ok(clawbus_runtime::session::CompactHow::KeepLast(200))
        );
        assert_eq!(
            sessions::compact_how(None),
            Ok(clawbus_runtime::session::CompactHow::Summary)
        );
        assert!(sessions::compact_how(Some(0)).is_err());
        let e = read::<CompactParams>("sessions.compact", json!({"key": "k", "keep": 3}));
        assert!(e.unwrap_err().contains("keep"), "outside the schema");
        assert!(read::<CompactParams>("sessions.compact", json!({"maxLines": 3})).is_err());
    }

    #[test]
    fn a_compaction_answers_in_openclaws_shape_both_when_done_and_when_not() {
        use clawbus_runtime::session::{CompactError, CompactHow, Compacted};
        let first = uuid::Uuid::nil();
        let done = Compacted {
            compacted: true,
            reason: None,
            kept: 2,
            tokens_before: 900,
            tokens_after: 40,
            summary: Some("s".into()),
            first_kept: Some(first),
        };
        let key = "agent:a:x";
        assert_eq!(
            openclaw::sessions::compacted(key, CompactHow::KeepLast(2), &done),
            json!({"ok": true, "key": key, "compacted": true, "kept": 2})
        );
        assert_eq!(
            openclaw::sessions::compacted(key, CompactHow::Summary, &done),
            json!({"ok": true, "key": key, "compacted": true, "result": {
                "summary": "s", "firstKeptEntryId": first.to_string(),
                "tokensBefore": 900, "tokensAfter": 40}})
        );
        let noop = Compacted {
            compacted: false,
            reason: Some("Already compacted".into()),
            summary: None,
            ..done
        };
        assert_eq!(
            openclaw::sessions::compacted(key, CompactHow::Summary, &noop),
            json!({"ok": false, "key": key, "compacted": false, "reason": "Already compacted"}),
            "OpenClaw's no-op verdict"
        );
        assert_eq!(
            openclaw::sessions::compact_unknown(key),
            json!({"ok": true, "key": key, "compacted": false, "reason": "no sessionId"})
        );
        let busy = openclaw::sessions::compact_refused(CompactError::Running { key: key.into() })
            .unwrap_err();
        assert_eq!(busy.code, ErrorCode::InvalidRequest);
        assert_eq!(
            busy.message,
            "Session agent:a:x has an active run; retry after it finishes."
        );
        let queued = openclaw::sessions::compact_refused(CompactError::Queued { key: key.into() });
        assert!(queued.unwrap_err().message.contains("has queued work"));
        let failed = openclaw::sessions::compact_refused(CompactError::Failed {
            key: key.into(),
            error: "summary call failed: 500".into(),
        });
        assert_eq!(
            failed.unwrap(),
            json!({"ok": false, "key": key, "compacted": false,
                   "reason": "summary call failed: 500"})
        );
        let away =
            openclaw::sessions::compact_refused(CompactError::AgentNotHere { agent: "a".into() });
        assert_eq!(away.unwrap_err().code, ErrorCode::Unavailable);
    }

    #[test]
    fn a_patched_or_listed_archived_session_carries_archived_at_in_openclaws_shape() {
        let mut meta = SessionMeta::new("agent:a:x", "a", 5);
        let plain = openclaw::sessions::patched(&meta, None);
        assert_eq!(plain["entry"]["archived"], false);
        assert!(plain["entry"].get("archivedAt").is_none(), "{plain}");
        meta.archived_ms = Some(9);
        let v = openclaw::sessions::patched(&meta, None);
        assert_eq!(v["ok"], true);
        assert_eq!(v["key"], "agent:a:x");
        assert_eq!(
            v["entry"]["archivedAt"], 9,
            "the CLI checks entry.archivedAt: {v}"
        );
        assert_eq!(v["entry"]["sessionId"], meta.session_id.to_string());
        let gone = openclaw::sessions::deleted("agent:a:x", true);
        assert_eq!(
            gone,
            json!({"ok": true, "key": "agent:a:x", "deleted": true, "archived": []})
        );
    }
}
