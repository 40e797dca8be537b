//! The journal of a run in its session transcript, and the history its turn starts from: where
//! a redelivered task picks its journal up, or a fresh one's user message and compaction.

use super::{End, Run, Step};
use crate::model::{ChatMessage, ToolCall};
use crate::session::compaction;
use crate::session::history::View;
use crate::session::transcript::{Entry, EntryBody, Transcript};
use crate::tools::ToolContext;
use crate::turn::usage::UsageByModel;
use crate::turn::{PromptSource, Resume, TurnJournal};
use std::collections::HashSet;
use std::sync::Arc;

/// The turn's journal in the session transcript: each model reply and tool result is appended
/// as it happens, and each tool call is synced to disk before it runs.
pub(super) struct Journal<'a> {
    transcript: &'a Transcript,
    request_id: &'a str,
    written: std::sync::Mutex<Vec<Entry>>,
}

impl<'a> Journal<'a> {
    /// An empty journal of request `request_id` in `transcript`.
    pub(super) fn new(transcript: &'a Transcript, request_id: &'a str) -> Self {
        Self {
            transcript,
            request_id,
            written: std::sync::Mutex::new(Vec::new()),
        }
    }

    async fn write(&self, entry: Entry, sync: bool) -> std::io::Result<()> {
        let one = std::slice::from_ref(&entry);
        if sync {
            self.transcript.record(one).await?;
        } else {
            self.transcript.record_unsynced(one).await?;
        }
        if let Ok(mut w) = self.written.lock() {
            w.push(entry);
        }
        Ok(())
    }

    /// The entries written, in order.
    pub(super) fn into_written(self) -> Vec<Entry> {
        self.written.into_inner().unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl TurnJournal for Journal<'_> {
    async fn model_reply(
        &self,
        message: &ChatMessage,
        model: &str,
        truncated: bool,
    ) -> std::io::Result<()> {
        self.write(
            Entry::model_reply(message.clone(), self.request_id, model, truncated),
            false,
        )
        .await
    }

    async fn fell_over(&self, from: &str, to: &str, reason: &str) -> std::io::Result<()> {
        let entry = Entry::new(EntryBody::ModelFellOver {
            request_id: self.request_id.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            reason: reason.to_string(),
        });
        self.write(entry, false).await
    }

    async fn tool_started(&self, call: &ToolCall) -> std::io::Result<()> {
        let entry = Entry::new(EntryBody::ToolCallStarted {
            request_id: self.request_id.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
        });
        self.write(entry, true).await
    }

    async fn tool_result(&self, message: &ChatMessage) -> std::io::Result<()> {
        self.write(
            Entry::message(message.clone(), Some(self.request_id), false),
            false,
        )
        .await
    }
}

/// What the turn starts from: the history it sees, where an earlier attempt stood, and what
/// was written before it (the user message, a compaction, a `run_resumed` entry).
pub(super) struct Prepared {
    pub(super) history: Vec<ChatMessage>,
    pub(super) resume: Option<Resume>,
    pub(super) entries: Vec<Entry>,
    /// The tokens of a compaction's model calls, counted with the turn's.
    pub(super) usage: UsageByModel,
}

/// Room left in a turn's history vector for the system prompt, the user message and a few
/// steps of tool calls, before it grows.
const TURN_ROOM: usize = 8;

impl Run {
    /// Step 3, the history: a redelivered task that ran before picks up its journal instead of
    /// starting over; a fresh one writes its user message and compacts the session if it must.
    pub(super) async fn resume_or_compact(
        &self,
        view: Arc<View>,
        text: &str,
        prompt: &Arc<dyn PromptSource>,
        tool_context: &ToolContext,
    ) -> Result<Prepared, Step> {
        let attempt = self.delivery.envelope().attempt;
        let resumed = if attempt > 1 {
            self.resume_point(attempt)
                .await
                .map_err(|e| End::failed(Vec::new(), format!("transcript read failed: {e}")))?
        } else {
            None
        };
        match resumed {
            Some((resume, mine, entry)) => Ok(self.resumed(&view, resume, &mine, entry)),
            None => self.fresh(view, text, prompt, tool_context).await,
        }
    }

    /// The history of a resumed attempt: the view without the attempt's own entries, which
    /// come back through `resume`.
    fn resumed(
        &self,
        view: &View,
        resume: Resume,
        mine: &HashSet<uuid::Uuid>,
        entry: Entry,
    ) -> Prepared {
        let (rt, key) = (&self.rt, &self.key);
        let request_id = self.request_id.as_str();
        let attempt = self.delivery.envelope().attempt;
        tracing::info!(agent = %rt.id, session = %key, request_id, attempt, steps = resume.messages.len(), interrupted = resume.started.len(), "Run resumed from its journal.");
        let history = View {
            summary: view.summary.clone(),
            items: view
                .items
                .iter()
                .filter(|(id, _)| !mine.contains(id))
                .cloned()
                .collect(),
        }
        .into_messages();
        Prepared {
            history,
            resume: Some(resume),
            entries: vec![entry],
            usage: UsageByModel::default(),
        }
    }

    /// The history of a first attempt: its user message is written (once per task: a retry
    /// finds it in the journal and does not repeat it), then the session is compacted when the
    /// new message would not fit. A failed compaction runs on the full history.
    async fn fresh(
        &self,
        view: Arc<View>,
        text: &str,
        prompt: &Arc<dyn PromptSource>,
        tool_context: &ToolContext,
    ) -> Result<Prepared, Step> {
        let (rt, key) = (&self.rt, &self.key);
        let user = Entry::message(ChatMessage::user(text), Some(&self.request_id), false);
        if let Err(e) = self
            .transcript
            .record_unsynced(std::slice::from_ref(&user))
            .await
        {
            return Err(End::failed(
                Vec::new(),
                format!("transcript write failed: {e}"),
            ));
        }
        let mut entries = Vec::new();
        let mut usage = UsageByModel::default();
        // The text is kept for the turn's first model call: assembled once, not twice.
        let system_chars = prompt.system_prompt_len();
        let mut compacted_view = None;
        if compaction::needs_compaction(&rt.def.session, system_chars, &view, text) {
            tracing::info!(agent = %rt.id, session = %key, tokens = view.estimated_tokens(), "Compacting the session.");
            let compacted = compaction::compact(
                &rt.deps,
                &rt.def.session,
                prompt.clone(),
                tool_context.clone(),
                &view,
                &self.transcript,
                user.id,
                &mut usage,
            )
            .await;
            match compacted {
                Ok(written) => {
                    let mut after = View::clone(&view);
                    for e in &written {
                        after.apply(e);
                    }
                    compacted_view = Some(after);
                    entries.extend(written);
                }
                Err(e) => {
                    tracing::warn!(agent = %rt.id, session = %key, error = %e, "Compaction failed; running on the full history.")
                }
            }
        }
        entries.push(user);
        // Copied straight from the session's view (shared with its actor) into the vector the
        // turn sends, with room for the system prompt and the turn's first messages.
        let history = compacted_view
            .as_ref()
            .unwrap_or(&view)
            .messages_with_room(TURN_ROOM);
        Ok(Prepared {
            history,
            resume: None,
            entries,
            usage,
        })
    }

    /// Where an earlier attempt of this task left its journal: its messages (user message
    /// first), the calls that started without a result, the ids of its entries (to keep them out
    /// of the history), and the `run_resumed` entry recorded now. `None` when no attempt wrote
    /// its user message.
    pub(super) async fn resume_point(
        &self,
        attempt: u32,
    ) -> std::io::Result<Option<(Resume, HashSet<uuid::Uuid>, Entry)>> {
        let mut resume = Resume::default();
        let mut mine = HashSet::new();
        let mut results = HashSet::new();
        for e in self.transcript.read_entries().await? {
            match &e.body {
                EntryBody::Message {
                    message,
                    request_id: Some(r),
                    silent: false,
                    truncated,
                    ..
                } if *r == self.request_id => {
                    if let Some(id) = &message.tool_call_id {
                        results.insert(id.clone());
                    }
                    if *truncated {
                        resume
                            .cut
                            .extend(message.tool_calls.iter().map(|c| c.id.clone()));
                    }
                    resume.messages.push(message.clone());
                    mine.insert(e.id);
                }
                EntryBody::ToolCallStarted {
                    request_id,
                    call_id,
                    ..
                } if *request_id == self.request_id => {
                    resume.started.insert(call_id.clone());
                }
                _ => {}
            }
        }
        if resume.messages.is_empty() {
            return Ok(None);
        }
        resume.started.retain(|id| !results.contains(id));
        let mut interrupted: Vec<String> = resume.started.iter().cloned().collect();
        interrupted.sort();
        let entry = Entry::new(EntryBody::RunResumed {
            request_id: self.request_id.clone(),
            attempt,
            interrupted,
        });
        self.transcript.record(std::slice::from_ref(&entry)).await?;
        Ok(Some((resume, mine, entry)))
    }
}
