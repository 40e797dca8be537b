//! Compaction near the context window: a silent memory-flush turn first, then older turns are
//! summarised into a compaction record. Also on request between runs (`on_request`): a summary,
//! or a cut that keeps the last messages. The transcript is only appended to.

use super::history::{View, message_tokens};
use super::transcript::{Entry, EntryBody, Transcript};
use crate::model::{ChatMessage, ChatRequest, Role};
use crate::tools::ToolContext;
use crate::turn::usage::UsageByModel;
use crate::turn::{PromptSource, TurnDeps, TurnInput, run_turn};
use clawbus_core::config::SessionDef;
use std::sync::Arc;

/// The message of the silent turn that runs before a compaction.
pub(crate) const FLUSH_PROMPT: &str = "[memory flush] This conversation is about to be compacted: older turns will be replaced by a summary. \
If anything in it is worth keeping, write it now to memory/YYYY-MM-DD.md (today's date) with the write tool. \
If nothing needs saving, reply exactly NO_REPLY.";

/// What the summariser is told.
pub(crate) const SUMMARY_INSTRUCTIONS: &str = "Summarise the conversation below for your own later use. Keep facts, decisions, \
open questions, names, numbers and file paths; drop chit-chat. Answer with the summary only.";

/// Whether the next request (system prompt + history + message) passes the threshold.
pub(crate) fn needs_compaction(
    def: &SessionDef,
    system_chars: usize,
    view: &View,
    message: &str,
) -> bool {
    let next = system_chars as u64 / 4
        + view.estimated_tokens()
        + message_tokens(&ChatMessage::user(message));
    next as f64 > def.compaction_threshold * def.context_window as f64
}

/// Where the kept tail of the view starts: the last `keep` messages, moved back so the tail
/// starts at a user message (a tool result must not lose the call it answers).
pub(crate) fn split_point(view: &View, keep: usize) -> usize {
    let mut at = view.items.len().saturating_sub(keep);
    while at > 0
        && view
            .items
            .get(at)
            .is_some_and(|(_, m)| m.role != Role::User)
    {
        at -= 1;
    }
    at
}

/// Runs the flush turn and the summary; returns the entries written (flush messages, compaction).
/// The tokens of their model calls are added to `usage`, also when a later step fails.
///
/// `pending` is the id of the run's user message, already on disk but not yet in `view`: when
/// nothing of the view is kept, it is the first entry the compaction keeps.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn compact(
    deps: &TurnDeps,
    def: &SessionDef,
    prompt: Arc<dyn PromptSource>,
    tool_context: ToolContext,
    view: &View,
    transcript: &Transcript,
    pending: uuid::Uuid,
    usage: &mut UsageByModel,
) -> Result<Vec<Entry>, CompactionError> {
    let mut written = Vec::new();
    // 1. The silent flush turn: the agent may save notes; its reply is never delivered.
    let flush = run_turn(
        deps,
        TurnInput {
            prompt: prompt.clone(),
            history: view.messages(),
            message: FLUSH_PROMPT.to_string(),
            tool_context,
            resume: None,
        },
    )
    .await
    .map_err(CompactionError::Flush)?;
    usage.merge(&flush.usage);
    let flush_entries: Vec<Entry> = flush
        .added
        .into_iter()
        .map(|m| Entry::message(m, None, true))
        .collect();
    transcript
        .record(&flush_entries)
        .await
        .map_err(CompactionError::Transcript)?;
    written.extend(flush_entries);
    // 2. Summarise everything before the kept tail.
    let at = split_point(view, def.keep_recent_messages);
    if at == 0 {
        return Ok(written);
    }
    let entry = summarise(deps, view, at, Some(pending), usage).await?;
    transcript
        .record(std::slice::from_ref(&entry))
        .await
        .map_err(CompactionError::Transcript)?;
    written.push(entry);
    Ok(written)
}

/// The compaction record that summarises the view's items before `at` (and an earlier
/// summary); the items from `at` on stay verbatim. `pending`: the entry kept first when `at` is
/// past the last item (the run's user message, not yet in the view). The tokens of the summary
/// call are added to `usage`. Not written: the caller records it.
async fn summarise(
    deps: &TurnDeps,
    view: &View,
    at: usize,
    pending: Option<uuid::Uuid>,
    usage: &mut UsageByModel,
) -> Result<Entry, CompactionError> {
    let older: Vec<ChatMessage> = View {
        summary: view.summary.clone(),
        items: view.items[..at].to_vec(),
    }
    .into_messages();
    let request = ChatRequest {
        model: deps.model_name.clone(),
        messages: vec![
            ChatMessage::system(SUMMARY_INSTRUCTIONS),
            ChatMessage::user(render(&older)),
        ],
        tools: Default::default(),
    };
    let reply = deps
        .model
        .complete(&request)
        .await
        .map_err(CompactionError::Summary)?;
    let answered = reply.model.as_deref().unwrap_or(&deps.model_label);
    // No tools are offered: no schema characters to count.
    usage.add_call(answered, &request, 0, &reply);
    let summary = reply.text.unwrap_or_default();
    if summary.trim().is_empty() {
        return Err(CompactionError::NoSummary);
    }
    Ok(Entry::new(EntryBody::Compaction {
        summary,
        first_kept: view.items.get(at).map(|(id, _)| *id).or(pending),
        tokens_before: view.estimated_tokens(),
    }))
}

/// How a compaction asked for between runs (`sessions compact`) cuts the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactHow {
    /// Older turns are summarised by the agent's model; the last `keep_recent_messages` stay
    /// (all of them are summarised when the session is shorter than that).
    Summary,
    /// The last this many messages stay, moved back to a user message so no tool result loses
    /// its call; older ones (and an earlier summary) leave the model's view, unsummarised.
    KeepLast(usize),
}

/// What a compaction asked for between runs did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Compacted {
    /// Whether a compaction record was written.
    pub compacted: bool,
    /// Why not, when nothing was compacted and there is more to say than `kept`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Messages the model still sees verbatim.
    pub kept: usize,
    /// Estimated tokens of the history before.
    pub tokens_before: u64,
    /// Estimated tokens of the history after.
    pub tokens_after: u64,
    /// The summary written (`CompactHow::Summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The transcript entry kept first, if any is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_kept: Option<uuid::Uuid>,
}

/// A compaction asked for between runs: cuts `view` as `how` says and writes the compaction
/// record (synced) to `transcript`; gives what it did and the record, to apply to the view. A
/// history with nothing to cut is left alone (`compacted: false`, the reason OpenClaw gives).
pub(crate) async fn on_request(
    deps: &TurnDeps,
    def: &SessionDef,
    view: &View,
    transcript: &Transcript,
    how: CompactHow,
) -> Result<(Compacted, Option<Entry>), CompactionError> {
    let tokens_before = view.estimated_tokens();
    let count = view.items.len();
    let unchanged = |reason: Option<&str>| Compacted {
        compacted: false,
        reason: reason.map(str::to_string),
        kept: count,
        tokens_before,
        tokens_after: tokens_before,
        summary: None,
        first_kept: view.items.first().map(|(id, _)| *id),
    };
    let (at, entry) = match how {
        CompactHow::KeepLast(keep) => {
            let at = split_point(view, keep);
            if count <= keep || at == 0 {
                return Ok((unchanged(None), None));
            }
            let entry = Entry::new(EntryBody::Compaction {
                summary: String::new(),
                first_kept: view.items.get(at).map(|(id, _)| *id),
                tokens_before,
            });
            (at, entry)
        }
        CompactHow::Summary => {
            let at = match split_point(view, def.keep_recent_messages) {
                0 => count,
                at => at,
            };
            if at == 0 {
                let reason = if view.summary.is_some() {
                    "Already compacted"
                } else {
                    "Nothing to compact (session too small)"
                };
                return Ok((unchanged(Some(reason)), None));
            }
            let mut usage = UsageByModel::default();
            (at, summarise(deps, view, at, None, &mut usage).await?)
        }
    };
    transcript
        .record(std::slice::from_ref(&entry))
        .await
        .map_err(CompactionError::Transcript)?;
    let mut after = view.clone();
    after.apply(&entry);
    let summary = match &entry.body {
        EntryBody::Compaction { summary, .. } if !summary.is_empty() => Some(summary.clone()),
        _ => None,
    };
    let done = Compacted {
        compacted: true,
        reason: None,
        kept: count - at,
        tokens_before,
        tokens_after: after.estimated_tokens(),
        summary,
        first_kept: view.items.get(at).map(|(id, _)| *id),
    };
    Ok((done, Some(entry)))
}

/// Why a compaction did not happen (the run goes on with the full history).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CompactionError {
    /// The silent memory-flush turn failed.
    #[error("memory flush turn failed: {0}")]
    Flush(#[source] crate::turn::TurnError),
    /// The summary call failed.
    #[error("summary call failed: {0}")]
    Summary(#[source] crate::model::ModelError),
    /// The summary call answered no text.
    #[error("the summary call answered no text; older turns stay in view")]
    NoSummary,
    /// The transcript could not be written.
    #[error("transcript: {0}")]
    Transcript(#[source] std::io::Error),
}

/// The conversation as plain text for the summariser.
fn render(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        let who = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        if let Some(c) = &m.content {
            out.push_str(&format!("{who}: {c}\n"));
        }
        for call in &m.tool_calls {
            out.push_str(&format!("{who} called {}({})\n", call.name, call.arguments));
        }
    }
    out
}
