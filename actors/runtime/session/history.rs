//! The model's view of a session: the transcript's messages after the latest compaction.

use super::transcript::{Entry, EntryBody};
use crate::model::{ChatMessage, ImagePart, ToolCall};
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
    /// Rebuilds the view from transcript entries, holding no more room than its items take.
    pub(crate) fn from_entries(entries: &[Entry]) -> Self {
        let mut view = Self::default();
        for e in entries {
            view.apply(e);
        }
        view.items.shrink_to_fit();
        view
    }

    /// Applies one new entry. A message's images are left out, as the transcript leaves them
    /// out: they went to the model with the turn that made them, and a later turn sees the same
    /// history whether its view stayed in memory or was read again from disk.
    pub(crate) fn apply(&mut self, e: &Entry) {
        match &e.body {
            EntryBody::Message {
                message,
                silent: false,
                ..
            } => self.items.push((e.id, without_images(message))),
            EntryBody::Compaction {
                summary,
                first_kept,
                ..
            } => self.compacted(summary, *first_kept),
            _ => {}
        }
    }

    /// Applies one entry read from the transcript, taking its message instead of a copy.
    pub(crate) fn apply_owned(&mut self, e: Entry) {
        match e.body {
            EntryBody::Message {
                message,
                silent: false,
                ..
            } => self.items.push((e.id, message)),
            EntryBody::Compaction {
                summary,
                first_kept,
                ..
            } => self.compacted(&summary, first_kept),
            _ => {}
        }
    }

    /// Applies a compaction record: its summary replaces the messages before `first_kept`.
    fn compacted(&mut self, summary: &str, first_kept: Option<Uuid>) {
        // An empty summary: a cut asked for without one (`sessions compact --max-lines`).
        self.summary = (!summary.is_empty()).then(|| summary.to_string());
        let keep_from = first_kept
            .and_then(|id| self.items.iter().position(|(i, _)| *i == id))
            .unwrap_or(self.items.len());
        self.items.drain(..keep_from);
    }

    /// The messages to send, summary first (a copy; see [`View::into_messages`]).
    pub(crate) fn messages(&self) -> Vec<ChatMessage> {
        self.messages_with_room(0)
    }

    /// The messages to send, summary first, copied into one vector with room for `room` more
    /// (the system prompt and what the turn adds): a turn's history is one allocation the size
    /// of the conversation, not a copy of the view and then a vector of its messages.
    pub(crate) fn messages_with_room(&self, room: usize) -> Vec<ChatMessage> {
        let summary = self
            .summary
            .as_ref()
            .map(|s| format!("{SUMMARY_PREFIX}\n{s}"));
        let mut out = Vec::with_capacity(usize::from(summary.is_some()) + self.items.len() + room);
        out.extend(summary.map(ChatMessage::user));
        out.extend(self.items.iter().map(|(_, m)| m.clone()));
        out
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

    /// What the view takes in memory, about: the room its vector holds (items not yet pushed
    /// too: a vector grows by doubling) and the room of the text it holds.
    pub(crate) fn bytes(&self) -> usize {
        let item = std::mem::size_of::<(Uuid, ChatMessage)>();
        let summary = self.summary.as_ref().map_or(0, String::capacity);
        summary
            + self.items.capacity() * item
            + self
                .items
                .iter()
                .map(|(_, m)| message_bytes(m))
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

/// A copy of `m` without its images (which are never copied).
fn without_images(m: &ChatMessage) -> ChatMessage {
    ChatMessage {
        role: m.role,
        content: m.content.clone(),
        tool_calls: m.tool_calls.clone(),
        tool_call_id: m.tool_call_id.clone(),
        images: Vec::new(),
    }
}

/// The bytes one message holds outside its own struct, about: the room of its strings and
/// vectors, not only what is in them.
fn message_bytes(m: &ChatMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| c.id.capacity() + c.name.capacity() + c.arguments.capacity())
        .sum::<usize>()
        + m.tool_calls.capacity() * std::mem::size_of::<ToolCall>();
    let images: usize = m
        .images
        .iter()
        .map(|i| i.media_type.capacity() + i.data.capacity())
        .sum::<usize>()
        + m.images.capacity() * std::mem::size_of::<ImagePart>();
    m.content.as_ref().map_or(0, String::capacity)
        + m.tool_call_id.as_ref().map_or(0, String::capacity)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn view(n: usize) -> View {
        let mut view = View::default();
        for i in 0..n {
            let mut text = format!("message {i}");
            text.shrink_to_fit();
            view.items
                .push((Uuid::from_u128(i as u128), ChatMessage::user(text)));
        }
        view
    }

    #[test]
    fn a_message_applied_to_a_view_keeps_no_images_as_its_transcript_line_keeps_none() {
        let message =
            ChatMessage::tool("c1", "saved shot.png").with_images(vec![ImagePart::png(b"png")]);
        let entry = Entry::message(message, None, false);
        let mut live = View::default();
        live.apply(&entry);
        let line = serde_json::to_string(&entry).unwrap();
        let read: Entry = serde_json::from_str(&line).unwrap();
        let from_disk = View::from_entries(&[read]);
        assert_eq!(live.messages(), from_disk.messages());
        assert!(live.messages()[0].images.is_empty());
        assert_eq!(
            live.messages()[0].content.as_deref(),
            Some("saved shot.png")
        );
    }

    #[test]
    fn a_views_size_counts_the_room_its_vector_and_strings_hold_not_only_their_items() {
        let grown = view(5);
        assert!(grown.items.capacity() > grown.items.len());
        let mut fitted = grown.clone();
        fitted.items.shrink_to_fit();
        let item = std::mem::size_of::<(Uuid, ChatMessage)>();
        assert_eq!(
            grown.bytes() - fitted.bytes(),
            (grown.items.capacity() - fitted.items.capacity()) * item
        );
        let mut roomy = fitted.clone();
        if let Some(text) = roomy.items[0].1.content.as_mut() {
            text.reserve(1000);
        }
        assert!(roomy.bytes() >= fitted.bytes() + 1000);
    }
}
