//! A history every model API accepts: each tool call answered, right after the assistant message
//! that made it, and no tool result that answers no call.
//!
//! A run cut short while a tool ran (cancelled, past its deadline, dead-lettered) leaves on disk
//! an assistant message whose call has no result; a compaction can keep a tool result whose call
//! it summarised away. OpenAI's and Anthropic's APIs refuse such a history with a 400, which no
//! retry mends: every later turn of the session would fail. So before a turn sends its history,
//! a missing result is filled in with [`UNANSWERED_CALL_RESULT`] and a result that answers
//! nothing is left out. The transcript is not changed.

use crate::model::{ChatMessage, Role};

/// The result given to a call of the history that has none.
pub(crate) const UNANSWERED_CALL_RESULT: &str = "error: this tool call has no result: the run \
that made it ended before the tool finished (cancelled, timed out or stopped); its effects are \
unknown";

/// Makes `messages` well paired (see the module docs); leaves a well-paired history as it is,
/// without copying it.
pub(crate) fn answer_every_tool_call(messages: &mut Vec<ChatMessage>) {
    if well_paired(messages) {
        return;
    }
    let old = std::mem::take(messages);
    messages.reserve(old.len() + 1);
    // The calls of the last assistant message not answered yet.
    let mut open: Vec<String> = Vec::new();
    let mut filled = 0usize;
    let mut dropped = 0usize;
    for m in old {
        if m.role == Role::Tool {
            let answers = m
                .tool_call_id
                .as_deref()
                .and_then(|id| open.iter().position(|o| o == id));
            match answers {
                Some(i) => {
                    open.remove(i);
                    messages.push(m);
                }
                None => dropped += 1,
            }
            continue;
        }
        filled += open.len();
        messages.extend(
            open.drain(..)
                .map(|id| ChatMessage::tool(id, UNANSWERED_CALL_RESULT)),
        );
        if m.role == Role::Assistant {
            open.extend(m.tool_calls.iter().map(|c| c.id.clone()));
        }
        messages.push(m);
    }
    filled += open.len();
    messages.extend(
        open.drain(..)
            .map(|id| ChatMessage::tool(id, UNANSWERED_CALL_RESULT)),
    );
    tracing::warn!(
        filled,
        dropped,
        "History sent with unanswered tool calls answered and stray tool results left out."
    );
}

/// Whether every tool call of `messages` is answered right after its assistant message and
/// every tool result answers one.
fn well_paired(messages: &[ChatMessage]) -> bool {
    let mut open: &[crate::model::ToolCall] = &[];
    let mut answered = 0usize;
    for m in messages {
        if m.role == Role::Tool {
            let Some(id) = m.tool_call_id.as_deref() else {
                return false;
            };
            if !open.iter().any(|c| c.id == id) {
                return false;
            }
            answered += 1;
            continue;
        }
        if answered != open.len() {
            return false;
        }
        open = if m.role == Role::Assistant {
            &m.tool_calls
        } else {
            &[]
        };
        answered = 0;
    }
    answered == open.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    fn calls(ids: &[&str]) -> ChatMessage {
        let calls = ids
            .iter()
            .map(|id| ToolCall {
                id: (*id).to_string(),
                name: "read".into(),
                arguments: "{}".into(),
            })
            .collect();
        ChatMessage::assistant(None, calls)
    }

    fn shape(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m.role {
                Role::Tool => format!(
                    "tool:{}{}",
                    m.tool_call_id.as_deref().unwrap_or("-"),
                    if m.content.as_deref() == Some(UNANSWERED_CALL_RESULT) {
                        "(filled)"
                    } else {
                        ""
                    }
                ),
                Role::Assistant if !m.tool_calls.is_empty() => format!(
                    "calls:{}",
                    m.tool_calls
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                _ => format!("{:?}", m.role).to_lowercase(),
            })
            .collect()
    }

    #[test]
    fn a_well_paired_history_is_left_as_it_is() {
        let mut history = vec![
            ChatMessage::user("hi"),
            calls(&["a", "b"]),
            ChatMessage::tool("b", "two"),
            ChatMessage::tool("a", "one"),
            ChatMessage::assistant(Some("done".into()), Vec::new()),
            ChatMessage::user("again"),
        ];
        let before = history.clone();
        answer_every_tool_call(&mut history);
        assert_eq!(history, before);
    }

    #[test]
    fn a_call_cut_short_is_answered_and_a_stray_result_left_out() {
        let mut history = vec![
            // A compaction kept the result of a call it summarised away.
            ChatMessage::tool("gone", "orphan"),
            ChatMessage::user("read two files"),
            calls(&["a", "b"]),
            ChatMessage::tool("a", "one"),
            // The run was cancelled while `b` ran; the next message came after.
            ChatMessage::user("are you there?"),
            ChatMessage::assistant(Some("yes".into()), Vec::new()),
            ChatMessage::tool("a", "a second answer to a call answered already"),
            ChatMessage::user("and now?"),
            // Cut short at the very end too.
            calls(&["c"]),
        ];
        answer_every_tool_call(&mut history);
        assert_eq!(
            shape(&history),
            [
                "user",
                "calls:a,b",
                "tool:a",
                "tool:b(filled)",
                "user",
                "assistant",
                "user",
                "calls:c",
                "tool:c(filled)"
            ]
        );
        assert!(well_paired(&history));
    }
}
