//! Per-method scope checks, as OpenClaw's gateway makes them (`src/gateway/method-scopes.ts`,
//! `src/shared/operator-scope-compat.ts` and `session-method-scopes-base.ts` of its npm package).
//!
//! Each method needs one operator scope: the one OpenClaw's method table names for it, and for
//! clawbus's own methods (`flows.*`) `operator.read` to look and `operator.write` to start or stop.
//! A scope is satisfied by itself and by `operator.admin`; `operator.write` also satisfies
//! `operator.read`, `operator.talk` and the session scopes; `operator.read` satisfies
//! `operator.sessions.read`. A client holding only a session scope may still call the session
//! methods (`chat.history`, `sessions.list`… with `operator.sessions.read`; `chat.send`,
//! `chat.abort`, `sessions.send` with `operator.sessions.write`). A refusal is OpenClaw's:
//! `FORBIDDEN`, `missing scope: <scope>`, `details {code: "MISSING_SCOPE", missingScope,
//! requiredScopes}`.

use super::frames::{ErrorCode, ErrorShape};
use super::methods::Method;
use serde_json::{Value, json};

/// `operator.admin`: every method.
pub(super) const ADMIN: &str = "operator.admin";
/// `operator.read`: looking.
pub(super) const READ: &str = "operator.read";
/// `operator.write`: starting and stopping runs.
pub(super) const WRITE: &str = "operator.write";
/// `operator.approvals`: approval requests.
pub(super) const APPROVALS: &str = "operator.approvals";
/// `operator.pairing`: devices.
pub(super) const PAIRING: &str = "operator.pairing";
/// `operator.questions`: questions agents ask people.
pub(super) const QUESTIONS: &str = "operator.questions";
const TALK: &str = "operator.talk";
const SESSIONS_READ: &str = "operator.sessions.read";
const SESSIONS_WRITE: &str = "operator.sessions.write";

/// The fields of a `sessions.delete` that an `operator.write` client may send: with
/// `archivedOnly: true` and no other field, deleting an archived session needs no admin scope
/// (OpenClaw's archive-then-delete rule).
const DELETE_WRITE_FIELDS: &[&str] = &[
    "key",
    "agentId",
    "deleteTranscript",
    "expectedSessionId",
    "archivedOnly",
];

/// The changes of a `sessions.patch` / `sessions.patchMany` that an `operator.write` client may
/// ask (OpenClaw's `SESSIONS_PATCH_WRITE_SCOPE_MUTATIONS`); any other needs `operator.admin`.
const PATCH_WRITE_MUTATIONS: &[&str] = &[
    "label",
    "autoLabel",
    "icon",
    "color",
    "category",
    "boardFace",
    "boardPresentation",
    "pinned",
    "archived",
    "unread",
    "model",
    "agentRuntime",
    "thinkingLevel",
    "fastMode",
    "permissionMode",
];

/// The fields naming the session a `sessions.patch` changes (OpenClaw's
/// `SESSIONS_PATCH_WRITE_SCOPE_ENVELOPE_FIELDS`).
const PATCH_ENVELOPE_FIELDS: &[&str] = &[
    "key",
    "agentId",
    "expectedSessionId",
    "expectedLifecycleRevision",
    "expectedPermissionMode",
    "expectedMarkedUnreadAt",
];

/// The scope a session patch `patch` needs: admin for `permissionMode: "full"`, any
/// `sandboxMode`, or a field outside the write list (and, for `sessions.patch`, the envelope);
/// else write. What is not an object needs write (it is refused as invalid after).
fn patch_scope(patch: &Value, envelope: &[&str]) -> &'static str {
    let Some(fields) = patch.as_object() else {
        return WRITE;
    };
    if patch["permissionMode"] == "full" || fields.contains_key("sandboxMode") {
        return ADMIN;
    }
    let allowed =
        |k: &String| PATCH_WRITE_MUTATIONS.contains(&k.as_str()) || envelope.contains(&k.as_str());
    if fields.keys().all(allowed) {
        WRITE
    } else {
        ADMIN
    }
}

/// The scope `method` needs with `params` (OpenClaw's table; `connect` needs none).
pub(super) fn required(method: Method, params: &Value) -> Option<&'static str> {
    use Method as M;
    Some(match method {
        M::Connect => return None,
        M::SessionsDelete => {
            let archived_only = params["archivedOnly"] == true;
            let fields_ok = params
                .as_object()
                .is_some_and(|o| o.keys().all(|k| DELETE_WRITE_FIELDS.contains(&k.as_str())));
            if archived_only && fields_ok {
                WRITE
            } else {
                ADMIN
            }
        }
        M::SessionsPatch => patch_scope(params, PATCH_ENVELOPE_FIELDS),
        M::SessionsPatchMany if params["patch"].is_object() => patch_scope(&params["patch"], &[]),
        M::Agent
        | M::AgentWait
        | M::ChatSend
        | M::ChatAbort
        | M::SessionsSend
        | M::TasksCancel
        | M::FlowsRun
        | M::FlowsCancel
        | M::SessionsPatchMany => WRITE,
        M::CronAdd
        | M::CronUpdate
        | M::CronRemove
        | M::CronRun
        | M::UpdateStatus
        | M::SessionsCompact => ADMIN,
        M::ExecApprovalList
        | M::ExecApprovalResolve
        | M::PluginApprovalList
        | M::OpenclawApprovalList
        | M::ApprovalGet
        | M::ApprovalResolve => APPROVALS,
        M::DevicePairList => PAIRING,
        M::QuestionList => QUESTIONS,
        _ => READ,
    })
}

/// The session scope that also lets a client call `method` (OpenClaw's session methods).
fn session_scope(method: Method) -> Option<&'static str> {
    use Method as M;
    match method {
        M::SessionsList
        | M::SessionsSubscribe
        | M::SessionsMessagesSubscribe
        | M::SessionsMessagesUnsubscribe
        | M::SessionsDescribe
        | M::SessionsResolve
        | M::ChatHistory
        | M::ChatStartup => Some(SESSIONS_READ),
        M::ChatSend | M::ChatAbort | M::SessionsSend | M::QuestionList => Some(SESSIONS_WRITE),
        _ => None,
    }
}

/// Whether the `granted` scopes hold `scope` (OpenClaw's `operatorScopeSatisfied`).
pub(super) fn satisfied(scope: &str, granted: &[String]) -> bool {
    let has = |s: &str| granted.iter().any(|g| g == s);
    has(scope)
        || has(ADMIN)
        || (matches!(scope, READ | TALK | SESSIONS_READ | SESSIONS_WRITE) && has(WRITE))
        || (scope == SESSIONS_READ && (has(READ) || has(SESSIONS_WRITE)))
}

/// `Ok` when `granted` lets a client call `method`; otherwise OpenClaw's `missing scope` error.
pub(super) fn check(method: Method, params: &Value, granted: &[String]) -> Result<(), ErrorShape> {
    let Some(needed) = required(method, params) else {
        return Ok(());
    };
    if satisfied(needed, granted) {
        return Ok(());
    }
    if let Some(session) = session_scope(method)
        && matches!(needed, READ | WRITE | QUESTIONS)
        && satisfied(session, granted)
    {
        return Ok(());
    }
    Err(ErrorShape {
        code: ErrorCode::Forbidden,
        message: format!("missing scope: {needed}"),
        details: Some(json!({
            "code": "MISSING_SCOPE",
            "missingScope": needed,
            "requiredScopes": [needed],
            "method": method.as_str(),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_bare(method: Method, granted: &[String]) -> Result<(), ErrorShape> {
        check(method, &json!({}), granted)
    }

    #[test]
    fn deleting_an_archived_session_needs_write_any_other_delete_admin() {
        let write = granted(&[WRITE]);
        let archived = json!({"key": "agent:a:x", "deleteTranscript": true, "archivedOnly": true});
        assert!(check(Method::SessionsDelete, &archived, &write).is_ok());
        let any = json!({"key": "agent:a:x", "deleteTranscript": true});
        let e = check(Method::SessionsDelete, &any, &write).unwrap_err();
        assert_eq!(e.message, "missing scope: operator.admin");
        let more = json!({"key": "agent:a:x", "archivedOnly": true, "emitLifecycleHooks": true});
        assert!(check(Method::SessionsDelete, &more, &write).is_err());
        assert!(check(Method::SessionsDelete, &any, &granted(&[ADMIN])).is_ok());
        assert!(check_bare(Method::SessionsPatch, &write).is_ok());
    }

    #[test]
    fn a_session_patch_needs_admin_past_the_organising_fields_as_in_openclaw() {
        let write = granted(&[WRITE]);
        let archive = json!({"key": "k", "expectedSessionId": "s", "archived": true});
        assert!(check(Method::SessionsPatch, &archive, &write).is_ok());
        for admin in [
            json!({"key": "k", "verboseLevel": "on"}),
            json!({"key": "k", "permissionMode": "full"}),
            json!({"key": "k", "sandboxMode": null}),
        ] {
            let e = check(Method::SessionsPatch, &admin, &write).unwrap_err();
            assert_eq!(e.message, "missing scope: operator.admin", "{admin}");
            assert!(check(Method::SessionsPatch, &admin, &granted(&[ADMIN])).is_ok());
        }
        let many = json!({"targets": [{"key": "k"}], "patch": {"archived": true, "pinned": true}});
        assert!(check(Method::SessionsPatchMany, &many, &write).is_ok());
        let envelope_in_patch = json!({"targets": [{"key": "k"}], "patch": {"key": "k"}});
        assert!(check(Method::SessionsPatchMany, &envelope_in_patch, &write).is_err());
        let privileged = json!({"targets": [{"key": "k"}], "patch": {"toolOverrides": {}}});
        assert!(check(Method::SessionsPatchMany, &privileged, &write).is_err());
    }

    #[test]
    fn compacting_a_session_needs_admin_as_in_openclaws_table() {
        let e = check_bare(Method::SessionsCompact, &granted(&[WRITE])).unwrap_err();
        assert_eq!(e.message, "missing scope: operator.admin");
        assert!(check_bare(Method::SessionsCompact, &granted(&[ADMIN])).is_ok());
    }

    fn granted(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn read_scope_reads_write_scope_runs_and_admin_scope_changes_cron() {
        let read = granted(&[READ]);
        assert!(check_bare(Method::SessionsList, &read).is_ok());
        assert!(check_bare(Method::ChatHistory, &read).is_ok());
        assert!(check_bare(Method::CronList, &read).is_ok());
        let e = check_bare(Method::ChatSend, &read).unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert_eq!(e.message, "missing scope: operator.write");
        assert_eq!(e.details.unwrap()["code"], "MISSING_SCOPE");

        let write = granted(&[WRITE]);
        assert!(check_bare(Method::ChatSend, &write).is_ok());
        assert!(
            check_bare(Method::Status, &write).is_ok(),
            "write implies read"
        );
        assert_eq!(
            check_bare(Method::CronAdd, &write).unwrap_err().message,
            "missing scope: operator.admin"
        );
        assert!(check_bare(Method::ExecApprovalList, &write).is_err());

        let admin = granted(&[ADMIN]);
        for m in Method::ALL {
            assert!(check_bare(*m, &admin).is_ok(), "{}", m.as_str());
        }
    }

    #[test]
    fn no_scope_reaches_only_connect_and_session_scopes_reach_the_session_methods() {
        for m in Method::ALL {
            assert_eq!(
                check_bare(*m, &[]).is_ok(),
                *m == Method::Connect,
                "{}",
                m.as_str()
            );
        }
        let sessions_read = granted(&[SESSIONS_READ]);
        assert!(check_bare(Method::ChatHistory, &sessions_read).is_ok());
        assert!(check_bare(Method::Status, &sessions_read).is_err());
        let sessions_write = granted(&[SESSIONS_WRITE]);
        assert!(check_bare(Method::ChatSend, &sessions_write).is_ok());
        assert!(check_bare(Method::Agent, &sessions_write).is_err());
        assert!(check_bare(Method::ApprovalGet, &granted(&[APPROVALS])).is_ok());
        assert!(check_bare(Method::DevicePairList, &granted(&[PAIRING])).is_ok());
    }
}
