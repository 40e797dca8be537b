//! Fields of OpenClaw's params that clawbus accepts and ignores.
//!
//! Each entry is a field OpenClaw's schema defines for the method (a dotted path for a nested
//! one) and that has no counterpart here; [`strip`] removes those present (one debug line each)
//! before the params are read with `deny_unknown_fields`.

use serde_json::Value;

/// `(method, fields)`: what [`strip`] drops for each method.
const IGNORED: &[(&str, &[&str])] = &[
    (
        "agent",
        &[
            "provider",
            "model",
            "sessionId",
            "expectedExistingSessionId",
            "thinking",
            "attachments",
            "accountId",
            "replyAccountId",
            "threadId",
            "groupId",
            "groupChannel",
            "groupSpace",
            "timeout",
            "cwd",
            "cleanupBundleMcpOnRunEnd",
            "modelRun",
            "promptMode",
            "extraSystemPrompt",
            "bootstrapContextMode",
            "bootstrapContextRunKind",
            "acpTurnSource",
            "internalRuntimeHandoffId",
            "internalExecutionIdentityRetry",
            "internalExecutionIdentityRecoveryAttempt",
            "execApprovalFollowupExpectedSessionId",
            "internalEvents",
            "inputProvenance",
            "suppressPromptPersistence",
            "sessionEffects",
            "sourceReplyDeliveryMode",
            "disableMessageTool",
            "swarmCollector",
            "swarmOutputSchema",
            "forceRestartSafeTools",
            "forceCodeModeTools",
            "voiceWakeTrigger",
            "label",
        ],
    ),
    (
        "chat.send",
        &[
            "sessionId",
            "mentions",
            "workContext",
            "intent",
            "thinking",
            "fastMode",
            "fastAutoOnSeconds",
            "queueMode",
            "deliver",
            "originatingChannel",
            "originatingTo",
            "originatingAccountId",
            "originatingThreadId",
            "replyToId",
            "attachments",
            "toolBindings",
            "timeoutMs",
            "systemInputProvenance",
            "systemProvenanceReceipt",
            "suppressCommandInterpretation",
            "expectedLeafEntryId",
            "expectedSessionRoutingContract",
            "expectedPermissionMode",
            "expectedToolOverrides",
        ],
    ),
    (
        "sessions.send",
        &["mentions", "thinking", "attachments", "timeoutMs"],
    ),
    (
        "chat.history",
        &[
            "cursor",
            "maxBytes",
            "offset",
            "pendingBefore",
            "messageId",
            "sessionId",
            "maxChars",
        ],
    ),
    (
        "chat.startup",
        &[
            "cursor",
            "maxBytes",
            "offset",
            "pendingBefore",
            "messageId",
            "sessionId",
            "maxChars",
            "slugHint",
        ],
    ),
    ("chat.abort", &["preserveSideRuns"]),
    (
        "sessions.list",
        &[
            "activeMinutes",
            "activeOnly",
            "requireLastInteraction",
            "sortBy",
            "includeGlobal",
            "includeUnknown",
            "excludeSubagents",
            "excludeCron",
            "excludeSystem",
            "configuredAgentsOnly",
            "includeDerivedTitles",
            "includeLastMessage",
            "includeActivitySummary",
            "label",
            "projectId",
            "workspaceDir",
            "group",
            "pinned",
            "boardFace",
            "hasBoard",
            "creatorId",
            "ownerId",
            "ownerFirst",
            "involvingMe",
            "profileRelation",
            "involvingProfileId",
            "includePeople",
            "spawnedBy",
            "search",
        ],
    ),
    (
        "sessions.patch",
        &[
            "expectedLifecycleRevision",
            "expectedPermissionMode",
            "expectedSandboxMode",
            "expectedNativeRuntimeConsent",
            "expectedToolOverrides",
            "expectedMarkedUnreadAt",
            "label",
            "autoLabel",
            "icon",
            "color",
            "category",
            "boardFace",
            "boardPresentation",
            "statusNote",
            "attention",
            "ttlMinutes",
            "pinned",
            "unread",
            "contextWindow",
            "thinkingLevel",
            "fastMode",
            "toolOverrides",
            "verboseLevel",
            "traceLevel",
            "reasoningLevel",
            "responseUsage",
            "elevatedLevel",
            "execHost",
            "execSecurity",
            "execAsk",
            "execNode",
            "permissionMode",
            "sandboxMode",
            "nativeRuntimeConsent",
            "model",
            "agentRuntime",
            "completionOwnerSessionKey",
            "inheritedToolPolicyVersion",
            "inheritedToolAllow",
            "inheritedToolDeny",
            "sendPolicy",
            "groupActivation",
        ],
    ),
    (
        "sessions.delete",
        &["expectedLifecycleRevision", "emitLifecycleHooks"],
    ),
    (
        "cron.list",
        &[
            "sessionKey",
            "sessionAgentId",
            "scheduleKind",
            "lastRunStatus",
            "trigger",
            "sortBy",
            "sortDir",
            "compact",
            "includeDeliveryPreviews",
        ],
    ),
    (
        "cron.add",
        &[
            "declarationKey",
            "displayName",
            "owner",
            "sessionKey",
            "description",
            "pacing",
            "trigger",
            "wakeMode",
            "failureAlert",
            "schedule.staggerMs",
            "payload.model",
            "payload.fallbacks",
            "payload.toolsAllow",
            "payload.toolsAllowIsDefault",
            "payload.thinking",
            "payload.timeoutSeconds",
            "payload.lightContext",
            "delivery.bestEffort",
            "delivery.accountId",
            "delivery.threadId",
            "delivery.failureDestination",
            "delivery.completionDestination",
        ],
    ),
    (
        "cron.update",
        &[
            "expectedConfigRevision",
            "patch.displayName",
            "patch.sessionKey",
            "patch.description",
            "patch.pacing",
            "patch.trigger",
            "patch.wakeMode",
            "patch.failureAlert",
            "patch.state",
            "patch.schedule.staggerMs",
            "patch.payload.model",
            "patch.payload.fallbacks",
            "patch.payload.toolsAllow",
            "patch.payload.toolsAllowIsDefault",
            "patch.payload.thinking",
            "patch.payload.timeoutSeconds",
            "patch.payload.lightContext",
            "patch.delivery.bestEffort",
            "patch.delivery.accountId",
            "patch.delivery.threadId",
            "patch.delivery.failureDestination",
            "patch.delivery.completionDestination",
        ],
    ),
    ("cron.run", &["mode", "expectedProcessInstanceId"]),
    (
        "cron.runs",
        &[
            "runId",
            "statuses",
            "status",
            "deliveryStatuses",
            "deliveryStatus",
            "query",
            "sortDir",
        ],
    ),
    ("exec.approval.resolve", &["reviewer", "grantExpiresInDays"]),
    ("approval.resolve", &["reviewer", "grantExpiresInDays"]),
    ("status", &["includeChannelSummary", "includeCliProjection"]),
    ("health", &["probe"]),
    ("logs.tail", &["maxBytes"]),
    ("tasks.list", &["cursor", "sortBy"]),
    (
        "environments.list",
        &["runtimeId", "projection", "includeDesktopSetup"],
    ),
    (
        "sessions.resolve",
        &[
            "label",
            "reference",
            "shortId",
            "slugHint",
            "spawnedBy",
            "includeGlobal",
            "includeUnknown",
            "allowMissing",
        ],
    ),
    (
        "sessions.catalog.list",
        &[
            "catalogId",
            "metadataOnly",
            "cursors",
            "agentId",
            "progressId",
            "allowPartialResults",
            "search",
            "limitPerHost",
            "hostIds",
        ],
    ),
];

/// The fields [`strip`] drops for `method`.
pub(crate) fn ignored(method: &str) -> &'static [&'static str] {
    IGNORED
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, f)| *f)
        .unwrap_or(&[])
}

/// Removes from `params` the fields of `method` that clawbus ignores (a debug line each) and
/// returns the names removed. A `null` where the schema allows it counts as absent.
pub(crate) fn strip(method: &str, params: &mut Value) -> Vec<&'static str> {
    let mut dropped = Vec::new();
    for path in ignored(method) {
        let (parent, leaf) = match path.rsplit_once('.') {
            Some((p, l)) => (lookup(params, p), l),
            None => (Some(&mut *params), *path),
        };
        if let Some(Value::Object(obj)) = parent
            && obj.remove(leaf).is_some()
        {
            tracing::debug!(
                method,
                field = *path,
                "OpenClaw field has no counterpart here; ignored."
            );
            dropped.push(*path);
        }
    }
    dropped
}

fn lookup<'a>(v: &'a mut Value, dotted: &str) -> Option<&'a mut Value> {
    dotted.split('.').try_fold(v, |v, k| v.get_mut(k))
}
