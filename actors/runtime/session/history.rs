//! The model's view of a session: the transcript's messages after the latest compaction.

use super::transcript::{Entry, EntryBody};
use crate::model::ChatMessage;
use uuid::Uuid;

/// The conversation history a run sends to the model.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    /// The summary that replaced older turns, if a compaction happened.
    pub summary: Option<String>,
    /// Messages shown verbatim, with the id of their transcript entry.
    pub items: Vec<(Uuid, ChatMessage)>,
}

/// How a compaction summary is introduced to the model.
pub(crate) const SUMMARY_PREFIX: &str =
    "[Summary of the earlier conversation, written when it was compacted]";

impl View {
    /// Rebuilds the view from transcript entries.
    pub(crate) fn from_entries(entries: &[Entry]) -> Self {
        let mut view = Self::default();
        for e in entries {
            view.apply(e);
        }
        view
    }

    /// Applies one new entry.
    pub(crate) fn apply(&mut self, e: &Entry) {
        match &e.body {
            EntryBody::Message {
                message,
                silent: false,
                ..
            } => self.items.push((e.id, message.clone())),
            EntryBody::Compaction {
                summary,
                first_kept,
                ..
            } => {
                // An empty summary: a cut asked for without one (`sessions compact --max-lines`).
                self.summary = (!summary.is_empty()).then(|| summary.clone());
                let keep_from = first_kept
                    .and_then(|id| self.items.iter().position(|(i, _)| *i == id))
                    .unwrap_or(self.items.len());
                self.items.drain(..keep_from);
            }
            _ => {}
        }
    }

    /// The messages to send, summary first (a copy; see [`View::into_messages`]).
    pub(crate) fn messages(&self) -> Vec<ChatMessage> {
        self.clone().into_messages()
    }

    /// The messages to send, summary first, taken out of the view (no copy).
    pub(crate) fn into_messages(self) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(self.items.len() + 1);
        if let Some(s) = &self.summary {
            out.push(ChatMessage::user(format!("{SUMMARY_PREFIX}\n{s}")));
        }
        out.extend(self.items.into_iter().map(|(_, m)| m));
        out
    }

    /// What the view takes in memory, about: each item's own size and the text it holds.
    pub(crate) fn bytes(&self) -> usize {
        let item = std::mem::size_of::<(Uuid, ChatMessage)>();
        let summary = self.summary.as_ref().map_or(0, String::len);
        summary
            + self
                .items
                .iter()
                .map(|(_, m)| item + message_bytes(m))
                .sum::<usize>()
    }

    /// Rough token estimate of the view: four characters a token, plus a few per message.
    pub(crate) fn estimated_tokens(&self) -> u64 {
        let summary = self.summary.as_ref().map_or(0, |s| s.len() as u64 / 4 + 4);
        summary
            + self
                .items
                .iter()
                .map(|(_, m)| message_tokens(m))
                .sum::<u64>()
    }
}

/// The bytes one message holds outside its own struct, about.
fn message_bytes(m: &ChatMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| std::mem::size_of_val(c) + c.id.len() + c.name.len() + c.arguments.len())
        .sum();
    let images: usize = m
        .images
        .iter()
        .map(|i| i.media_type.len() + i.data.len())
        .sum();
    m.content.as_ref().map_or(0, String::len)
        + m.tool_call_id.as_ref().map_or(0, String::len)
        + calls
        + images
}

/// Rough token estimate of one message.
pub(crate) fn message_tokens(m: &ChatMessage) -> u64 {
    let text = m.content.as_ref().map_or(0, |c| c.len());
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| c.name.len() + c.arguments.len() + 8)
        .sum();
    ((text + calls) / 4 + 4) as u64
}
