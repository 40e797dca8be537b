//! Sessions and cancellation over HTTP: `GET /v1/sessions`, `GET /v1/sessions/{key}`,
//! `PATCH /v1/sessions/{key}` (archive), `DELETE /v1/sessions/{key}`,
//! `POST /v1/sessions/{key}/compact`, `POST /v1/tasks/{id}/cancel`.

use super::answer::TaskAnswer;
use super::api::{ApiState, Failure};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bus::TaskRecord;
use clawbus_core::ids::SessionKey;
use clawbus_runtime::session::index::SessionMeta;
use clawbus_runtime::session::view::SessionReader;
use clawbus_runtime::session::{CompactError, CompactHow, Compacted, SessionState};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The session routes (mounted under `/v1`, behind the token).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/sessions", get(list))
        .route(
            "/sessions/{key}",
            get(show).patch(patch_http).delete(delete_http),
        )
        .route("/sessions/{key}/compact", post(compact_http))
        .route("/tasks/{id}/cancel", post(cancel))
}

/// One session in a listing.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SessionRow {
    /// The session key.
    pub key: String,
    /// The agent.
    pub agent: String,
    /// The transcript id.
    pub session_id: String,
    /// `idle` or `processing`.
    pub state: String,
    /// Whether the session is live (in memory); an idle one that is not (evicted, or not used
    /// since a restart) loads from disk when work comes.
    #[serde(default)]
    pub live: bool,
    /// Runs waiting in the session lane.
    pub queued: usize,
    /// Runs finished.
    pub turns: u64,
    /// Unix ms of the last run.
    pub updated_ms: u64,
    /// Prompt tokens reported so far.
    pub tokens_in: u64,
    /// Completion tokens reported so far.
    pub tokens_out: u64,
    /// Unix ms the session was archived; absent when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_ms: Option<u64>,
}

/// Which sessions a listing shows by their archive mark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Archived {
    /// The sessions not archived (the default).
    #[default]
    #[serde(alias = "false")]
    Hide,
    /// The archived sessions only.
    #[serde(alias = "true")]
    Only,
    /// Both.
    All,
}

impl Archived {
    /// Whether a listing with this filter shows `row`.
    pub(crate) fn shows(self, row: &SessionRow) -> bool {
        match self {
            Self::Hide => row.archived_ms.is_none(),
            Self::Only => row.archived_ms.is_some(),
            Self::All => true,
        }
    }
}

/// Query of `GET /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only this agent's sessions.
    pub agent: Option<String>,
    /// `false` (default): sessions not archived; `true`: archived ones; `all`: both.
    #[serde(default)]
    pub archived: Archived,
}

/// Read access to the sessions, from the API's state.
fn reader(state: &ApiState) -> SessionReader {
    SessionReader {
        index: state.sessions.clone(),
        live: state.live.clone(),
        state_dir: state.config.state_dir.clone(),
        shared: state.transcripts.clone(),
    }
}

/// The sessions (of `agent`, else all) as `GET /v1/sessions` lists them; 404 `unknown_agent`.
pub(super) async fn rows(
    state: &ApiState,
    agent: Option<&str>,
) -> Result<Vec<SessionRow>, Failure> {
    if let Some(agent) = agent.filter(|a| state.config.agent(a).is_none()) {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            format!("no agent \"{agent}\""),
        ));
    }
    let sessions = reader(state);
    let metas = sessions.list(agent).await.map_err(index_failure)?;
    Ok(metas.into_iter().map(|m| row_of(&sessions, m)).collect())
}

/// The row of session `key` as `GET /v1/sessions` lists it; `None` when there is none. One
/// read of the index, where a listing reads every row.
pub(super) async fn row(state: &ApiState, key: &str) -> Result<Option<SessionRow>, Failure> {
    let sessions = reader(state);
    let meta = sessions.get(key).await.map_err(index_failure)?;
    Ok(meta.map(|m| row_of(&sessions, m)))
}

fn index_failure(e: clawbus_runtime::session::index::IndexError) -> Failure {
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, "store", e.to_string())
}

/// A listing's row: the index's entry and the live state.
fn row_of(sessions: &SessionReader, m: SessionMeta) -> SessionRow {
    let (st, queued) = sessions.state(&m.key);
    SessionRow {
        key: m.key,
        agent: m.agent,
        session_id: m.session_id.to_string(),
        state: st.as_str().into(),
        live: st.is_live(),
        queued,
        turns: m.turns,
        updated_ms: m.updated_ms,
        tokens_in: m.tokens_in,
        tokens_out: m.tokens_out,
        archived_ms: m.archived_ms,
    }
}

async fn list(
    State(state): State<ApiState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    super::api::listing(query, "sessions", |q: ListQuery| async move {
        let mut rows = rows(&state, q.agent.as_deref()).await?;
        rows.retain(|r| q.archived.shows(r));
        Ok(rows)
    })
    .await
}

/// The index row of session `key` (a key a client may name); 404 `unknown_session` when there
/// is none.
pub(super) async fn existing(state: &ApiState, key: &str) -> Result<SessionMeta, Failure> {
    let key = SessionKey::from_client(key)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, "invalid_session_key", e))?;
    reader(state)
        .get(key.as_str())
        .await
        .map_err(index_failure)?
        .ok_or_else(|| unknown_session(key.as_str()))
}

fn unknown_session(key: &str) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "unknown_session",
        format!("no session {key}"),
    )
}

/// Archives (`true`) or unarchives session `key`; its row after. Archiving an archived
/// session keeps its first archive time.
pub(super) async fn set_archived(
    state: &ApiState,
    key: &str,
    archived: bool,
) -> Result<SessionMeta, Failure> {
    let meta = existing(state, key).await?;
    let mark = match (archived, meta.archived_ms) {
        (true, Some(ms)) => Some(ms),
        (true, None) => Some(state.clock.now_ms()),
        (false, _) => None,
    };
    state
        .sessions
        .set_archived(&meta.key, mark)
        .await
        .map_err(index_failure)?
        .ok_or_else(|| unknown_session(&meta.key))
}

/// What a delete removed.
#[derive(Debug, Serialize)]
pub(crate) struct Deleted {
    /// The session key.
    pub key: String,
    /// The transcript id the session had.
    pub session_id: String,
    /// Whether its transcript was removed too (this node's file, and on a shared bus the
    /// cluster's log).
    pub transcript_removed: bool,
}

/// How long a delete on a shared bus waits for the session's lease, held by a run of the
/// session on another node, before it is refused as busy.
const DELETE_LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Deletes session `key`: refused (409 `session_busy`) while a run of it is running or queued
/// on this node, or, on a shared bus, while a node holds its lease (a run of it is in
/// progress there); else its index row goes and, with `transcript`, this node's transcript
/// file. On a shared bus the whole delete holds the session's lease, and the cluster's log of
/// the session goes either way (a fresh session of the key must not read it; the nodes' own
/// copies stay on their disks unless `transcript`). A live idle actor of it is stopped by its
/// agent before the next message, which starts a fresh session; on another node, the next
/// run there finds the cluster's row gone and starts afresh too.
pub(super) async fn delete(
    state: &ApiState,
    meta: &SessionMeta,
    transcript: bool,
) -> Result<Deleted, Failure> {
    if let Some(live) = state.live.get(&meta.key).map(|l| *l)
        && (live.state == SessionState::Processing || live.queued > 0)
    {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "session_busy",
            format!(
                "session {} is running ({} queued behind the current run): abort its run and try again",
                meta.key, live.queued
            ),
        ));
    }
    // Run to its end on a task of its own: a caller that goes away must not leave the lease
    // held until it lapses.
    let (state, meta) = (state.clone(), meta.clone());
    tokio::spawn(async move { delete_under_lease(&state, &meta, transcript).await })
        .await
        .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e))?
}

/// The delete itself, under the session's lease on a shared bus.
async fn delete_under_lease(
    state: &ApiState,
    meta: &SessionMeta,
    transcript: bool,
) -> Result<Deleted, Failure> {
    let lease = match &state.leases {
        Some(leases) => Some(take_lease(leases, meta).await?),
        None => None,
    };
    let done = remove(state, meta, transcript).await;
    if let Some(lease) = lease
        && let Err(e) = lease.release().await
    {
        tracing::warn!(session = %meta.key, error = %e, "Session lease not released after a delete; it expires by itself.");
    }
    done?;
    tracing::info!(session = %meta.key, transcript, "Session deleted.");
    Ok(Deleted {
        key: meta.key.clone(),
        session_id: meta.session_id.to_string(),
        transcript_removed: transcript,
    })
}

/// The lease of session `meta`, taken within [`DELETE_LEASE_WAIT`]; 409 `session_busy` when a
/// node holds it all that time.
async fn take_lease(
    leases: &clawbus_runtime::session::SessionLeases,
    meta: &SessionMeta,
) -> Result<bus::kv::Lease, Failure> {
    let key = SessionKey::from_client(&meta.key)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, "invalid_session_key", e))?;
    match leases.acquire(&key, DELETE_LEASE_WAIT).await {
        Ok(lease) => Ok(lease),
        Err(bus::kv::LeaseError::Busy { holder, .. }) => Err(Failure::new(
            StatusCode::CONFLICT,
            "session_busy",
            format!(
                "session {} is running on another node (its lease is held by {holder:?}): abort its run and try again",
                meta.key
            ),
        )),
        Err(e) => Err(Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "session_lease",
            format!("session {}: its lease could not be taken: {e}", meta.key),
        )),
    }
}

/// Removes what deleting session `meta` removes: on a shared bus the cluster's log first (a
/// failure leaves the session listed, to delete again), then the index rows, then with
/// `transcript` this node's file.
async fn remove(state: &ApiState, meta: &SessionMeta, transcript: bool) -> Result<(), Failure> {
    let gone = |e: String| {
        tracing::error!(session = %meta.key, error = %e, "Transcript not removed.");
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "transcript",
            format!(
                "session {}: its transcript could not be removed ({e})",
                meta.key
            ),
        )
    };
    if let Some(log) = &state.transcripts {
        let name = clawbus_runtime::session::lease::log_name(&meta.agent, &meta.key);
        log.delete(&name).await.map_err(|e| gone(e.to_string()))?;
    }
    state
        .sessions
        .remove(&meta.key)
        .await
        .map_err(index_failure)?;
    if transcript {
        match std::fs::remove_file(reader(state).transcript_path(meta)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(gone(e.to_string())),
        }
    }
    Ok(())
}

/// Compacts session `meta` between runs, through its agent's actor on this node: refused while
/// a run of it is running or queued. What the WebSocket's `sessions.compact` and
/// `POST /v1/sessions/{key}/compact` do.
pub(super) async fn compact(
    state: &ApiState,
    meta: &SessionMeta,
    how: CompactHow,
) -> Result<Compacted, CompactError> {
    let key = SessionKey::from_client(&meta.key).map_err(|_| CompactError::Unknown {
        key: meta.key.clone(),
    })?;
    let Some(agent) = state.agents.iter().find(|a| a.id().as_str() == meta.agent) else {
        return Err(CompactError::AgentNotHere {
            agent: meta.agent.clone(),
        });
    };
    agent.compact(key, how).await
}

/// A refused or failed compaction as the HTTP API answers it.
fn compact_failure(e: CompactError) -> Failure {
    let status = match &e {
        CompactError::Unknown { .. } => (StatusCode::NOT_FOUND, "unknown_session"),
        CompactError::Running { .. } | CompactError::Queued { .. } => {
            (StatusCode::CONFLICT, "session_busy")
        }
        CompactError::AgentNotHere { .. } => (StatusCode::SERVICE_UNAVAILABLE, "agent_not_here"),
        _ => (StatusCode::BAD_GATEWAY, "compaction_failed"),
    };
    Failure::new(status.0, status.1, e)
}

/// Body of `POST /v1/sessions/{key}/compact`: `{}` to summarise older turns, or
/// `{"max_lines": n}` to keep the last `n` messages.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactBody {
    /// Keep the last this many messages (at least 1) instead of summarising.
    #[serde(default)]
    max_lines: Option<usize>,
}

/// The compaction a number of lines to keep asks for: a summary when absent; refused below 1.
pub(super) fn compact_how(max_lines: Option<usize>) -> Result<CompactHow, &'static str> {
    match max_lines {
        None => Ok(CompactHow::Summary),
        Some(0) => Err("must be at least 1"),
        Some(n) => Ok(CompactHow::KeepLast(n)),
    }
}

async fn compact_http(
    State(state): State<ApiState>,
    Path(key): Path<String>,
    body: Result<Json<CompactBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    let how = match compact_how(body.max_lines) {
        Ok(how) => how,
        Err(e) => {
            let f = Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!("max_lines: {e}"),
            );
            return f.into_response();
        }
    };
    let meta = match existing(&state, &key).await {
        Ok(m) => m,
        Err(f) => return f.into_response(),
    };
    match compact(&state, &meta, how).await {
        Ok(done) => Json(json!({ "key": meta.key, "compaction": done })).into_response(),
        Err(e) => compact_failure(e).into_response(),
    }
}

/// Body of `PATCH /v1/sessions/{key}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    /// Archive (`true`) or unarchive (`false`) the session.
    archived: bool,
}

async fn patch_http(
    State(state): State<ApiState>,
    Path(key): Path<String>,
    body: Result<Json<PatchBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match super::api::body(&state, body) {
        Ok(b) => b,
        Err(answer) => return answer,
    };
    match set_archived(&state, &key, body.archived).await {
        Ok(meta) => Json(json!({ "session": meta })).into_response(),
        Err(f) => f.into_response(),
    }
}

async fn delete_http(State(state): State<ApiState>, Path(key): Path<String>) -> Response {
    let meta = match existing(&state, &key).await {
        Ok(m) => m,
        Err(f) => return f.into_response(),
    };
    match delete(&state, &meta, true).await {
        Ok(d) => Json(d).into_response(),
        Err(f) => f.into_response(),
    }
}

/// A session's metadata, live state and transcript entries, as `GET /v1/sessions/{key}` shows
/// them.
pub(super) async fn transcript(state: &ApiState, key: &str) -> Result<serde_json::Value, Failure> {
    let key = SessionKey::from_client(key)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, "invalid_session_key", e))?;
    let sessions = reader(state);
    let meta = match sessions.get(key.as_str()).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(Failure::new(
                StatusCode::NOT_FOUND,
                "unknown_session",
                format!("no session {key}"),
            ));
        }
        Err(e) => {
            return Err(Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store",
                e.to_string(),
            ));
        }
    };
    let entries = match sessions.raw_entries(&meta).await {
        Ok(e) => e,
        Err(e) => {
            // The path stays in the log: the client learns nothing of the host's folders.
            let source = sessions.transcript_source(&meta);
            tracing::error!(session = %key, %source, error = %e, "Transcript unreadable.");
            return Err(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "transcript",
                format!("the transcript of session {key} cannot be read"),
            ));
        }
    };
    let (st, queued) = sessions.state(key.as_str());
    Ok(
        json!({ "session": meta, "state": st, "live": st.is_live(), "queued": queued, "entries": entries }),
    )
}

async fn show(State(state): State<ApiState>, Path(key): Path<String>) -> Response {
    match transcript(&state, &key).await {
        Ok(v) => Json(v).into_response(),
        Err(f) => f.into_response(),
    }
}

/// How a cancel went.
pub(super) enum Cancelled {
    /// The task was cancelled (with the work it started).
    Now(TaskRecord),
    /// The task had already ended: nothing changed.
    AlreadyEnded(TaskRecord),
}

/// Cancels task `id` and its unfinished descendants, as `POST /v1/tasks/{id}/cancel` does.
pub(super) async fn cancel_task(state: &ApiState, id: &str) -> Result<Cancelled, Failure> {
    let record = super::api::task_by_id(state, id).await?;
    if record.state.is_terminal() {
        return Ok(Cancelled::AlreadyEnded(record));
    }
    let rec = state
        .bus
        .cancel(&record.request_id, "cancelled by request")
        .await
        .map_err(Failure::bus)?;
    // The work it started goes with it: the task coordinator cancels its descendants.
    Ok(Cancelled::Now(rec))
}

async fn cancel(State(state): State<ApiState>, Path(id): Path<String>) -> Response {
    match cancel_task(&state, &id).await {
        Ok(Cancelled::Now(rec)) => {
            (StatusCode::OK, Json(TaskAnswer::of(&rec, false))).into_response()
        }
        Ok(Cancelled::AlreadyEnded(rec)) => {
            (StatusCode::CONFLICT, Json(TaskAnswer::of(&rec, false))).into_response()
        }
        Err(f) => f.into_response(),
    }
}
