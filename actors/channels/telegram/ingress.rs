//! What one update becomes: a task for the agent the router picks, an approval answer, or
//! nothing (another chat, not text).

use super::api::Update;
use super::chat_type;
use crate::OutboundMessage;
use bus::{Bus, BusError, RequestId};
use clawbus_core::ids::Channel;
use clawbus_core::ids::chat_of_session;
use clawbus_runtime::approvals::{ApprovalError, ApprovalState, Approvals};
use clawbus_runtime::ingress::{self as pipeline, Duplicates, IngressError, Request, Target};
use clawbus_runtime::origin::Origin;
use std::sync::Arc;

/// What the poller needs to turn updates into work.
#[derive(Clone)]
pub(super) struct Ingress {
    pub bus: Arc<dyn Bus>,
    /// The ingress pipeline every message is submitted through (routed by the system's router).
    pub pipeline: pipeline::Ingress,
    /// This node's outbox: notices to a chat are published through it, so this node sends them.
    pub outbox: clawbus_runtime::outbox::Outbox,
    pub approvals: Approvals,
    pub allow_chats: Arc<Vec<i64>>,
}

/// An answer to an approval request, typed in the chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ApprovalAnswer {
    pub id: String,
    pub allow: bool,
}

/// Reads `/approve <id>` or `/deny <id>` (also `/approve@bot <id>`, as groups send them).
pub(super) fn approval_answer(text: &str) -> Option<ApprovalAnswer> {
    let mut words = text.split_whitespace();
    let command = words.next()?;
    let command = command.split('@').next().unwrap_or(command);
    let allow = match command {
        "/approve" => true,
        "/deny" => false,
        _ => return None,
    };
    let id = words.next()?.to_string();
    words
        .next()
        .is_none()
        .then_some(ApprovalAnswer { id, allow })
}

impl Ingress {
    /// Handles one update; an error means the bus could not take it, and it must be polled
    /// again (its request id makes that safe).
    pub(super) async fn handle(&self, update: &Update) -> Result<(), BusError> {
        let Some(message) = &update.message else {
            return Ok(());
        };
        let chat = message.chat.id;
        if !self.allow_chats.contains(&chat) {
            tracing::warn!(
                update_id = update.update_id,
                chat,
                "Telegram message from a chat not in [channels.telegram] allow_chats ignored."
            );
            return Ok(());
        }
        if message.from.as_ref().is_some_and(|u| u.is_bot) {
            return Ok(());
        }
        let Some(text) = message.text.as_deref().filter(|t| !t.trim().is_empty()) else {
            tracing::debug!(
                update_id = update.update_id,
                chat,
                "Non-text Telegram message skipped."
            );
            return Ok(());
        };
        if let Some(answer) = approval_answer(text) {
            self.answer(chat, answer).await;
            return Ok(());
        }
        self.submit(update.update_id, chat, &message.chat.kind, text)
            .await
    }

    async fn submit(
        &self,
        update_id: i64,
        chat: i64,
        kind: &str,
        text: &str,
    ) -> Result<(), BusError> {
        let request_id = RequestId::parse(&format!("telegram:{update_id}"))
            .map_err(|e| BusError::Invalid(e.to_string()))?;
        let origin = Origin {
            channel: Channel::Telegram,
            chat_type: chat_type(kind).into(),
            peer: chat.to_string(),
            ..Origin::api()
        };
        // An update id is one message: a redelivery is the same work wherever it runs.
        let req = Request {
            duplicates: Duplicates::SameWork,
            ..Request::new(
                Target::Routed { agent: None },
                request_id,
                text,
                Channel::Telegram.as_str(),
                origin,
            )
        };
        let submitted = match self.pipeline.submit(req).await {
            Ok(s) => s,
            Err(e @ (IngressError::Unbound(_) | IngressError::UnknownAgent(_))) => {
                tracing::warn!(update_id, chat, error = %e, "Telegram message not routed; add [channels.telegram] agent or a [[bindings]] entry.");
                return Ok(());
            }
            Err(IngressError::Bus(e @ BusError::Conflict { .. })) => {
                tracing::warn!(update_id, chat, error = %e, "Telegram update id already used for other work; skipped.");
                return Ok(());
            }
            Err(IngressError::Bus(e)) => return Err(e),
            Err(e) => return Err(BusError::Invalid(e.to_string())),
        };
        let agent = submitted.agent.as_ref().map_or("", |a| a.as_str());
        tracing::info!(update_id, chat, agent, duplicate = submitted.duplicate, task_id = %submitted.task.task_id, "Telegram message enqueued.");
        Ok(())
    }

    /// Resolves an approval asked by a run of this very chat; any other answer is ignored.
    async fn answer(&self, chat: i64, answer: ApprovalAnswer) {
        let record = match self.approvals.get(&answer.id).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                tracing::warn!(chat, approval = %answer.id, "Telegram answer to an unknown approval ignored.");
                return;
            }
            Err(e) => {
                tracing::error!(chat, approval = %answer.id, error = %e, "Approval not readable.");
                return;
            }
        };
        if chat_of_session(&record.session) != Some(chat) {
            tracing::warn!(chat, approval = %answer.id, session = %record.session, "Telegram answer from another chat than the one that asked ignored.");
            return;
        }
        let reply = match self
            .approvals
            .resolve(&answer.id, answer.allow, false)
            .await
        {
            Ok(rec) => format!("Approval {}: {}.", rec.id, rec.state),
            Err(ApprovalError::Settled { state, .. }) => {
                format!("Approval {} was already {state}.", answer.id)
            }
            Err(e) => {
                tracing::error!(chat, approval = %answer.id, error = %e, "Approval not resolved.");
                return;
            }
        };
        self.say(chat, reply).await;
    }

    /// Sends a short notice to a chat through the delivery actor.
    pub(super) async fn say(&self, chat: i64, text: String) {
        let msg = OutboundMessage {
            to: Some(chat.to_string()),
            text,
            task_id: None,
            job: None,
        };
        self.outbox
            .publish(self.bus.as_ref(), Channel::Telegram.as_str(), &msg)
            .await;
    }
}

/// The message that asks a chat for an approval.
pub(super) fn approval_prompt(agent: &str, id: &str, command: &str) -> String {
    format!(
        "Agent \"{agent}\" asks to run:\n\n{command}\n\nReply /approve {id} to allow it, or /deny {id} to refuse."
    )
}

/// Whether an approval event asks for an answer.
pub(super) fn is_request(state: ApprovalState, event: &str) -> bool {
    state == ApprovalState::Pending && event == "requested"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_answers_are_read_with_or_without_the_bot_name() {
        assert_eq!(
            approval_answer("/approve 0191-ab"),
            Some(ApprovalAnswer {
                id: "0191-ab".into(),
                allow: true
            })
        );
        assert_eq!(
            approval_answer("/deny@clawbus_bot x1").map(|a| a.allow),
            Some(false)
        );
        assert_eq!(approval_answer("/approve"), None);
        assert_eq!(approval_answer("/approve a b"), None);
        assert_eq!(approval_answer("please /approve a"), None);
    }
}
