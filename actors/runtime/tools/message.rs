//! The `message` tool: send text to a channel peer through the bus.

use super::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use async_trait::async_trait;
use bus::{Bus, Envelope};
use clawbus_core::ids::outbound_topic;
use serde::Deserialize;
use serde_json::json;
use std::fmt;
use std::sync::Arc;

/// Longest message text accepted.
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// `message {channel, to, text}`: publishes an event on `channel.<channel>.out` with payload
/// `{to, text, from_agent}` for the channel adapter to deliver. Without a bus it refuses.
#[derive(Clone)]
pub struct MessageTool {
    bus: Option<Arc<dyn Bus>>,
}

impl fmt::Debug for MessageTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageTool")
            .field("bus", &self.bus.is_some())
            .finish()
    }
}

impl MessageTool {
    /// A tool publishing on `bus`.
    pub fn new(bus: Option<Arc<dyn Bus>>) -> Self {
        Self { bus }
    }
}

#[derive(Deserialize)]
struct Args {
    channel: String,
    to: String,
    text: String,
}

#[async_trait]
impl Tool for MessageTool {
    fn name(&self) -> &'static str {
        "message"
    }

    fn description(&self) -> &'static str {
        "Send a text message to someone on a channel (for example channel \"telegram\", to a chat \
         id). Delivery is asynchronous; the result only says the message was handed over."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "channel": { "type": "string", "description": "The channel name (telegram, slack, …)." },
                "to": { "type": "string", "description": "The peer or chat id on that channel." },
                "text": { "type": "string", "description": "The message text." }
            },
            "required": ["channel", "to", "text"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args("message", args) {
            Ok(args) => args,
            Err(out) => return out,
        };
        let topic = match outbound_topic(&args.channel) {
            Ok(topic) => topic,
            Err(e) => return ToolOutput::error("invalid_arguments", e),
        };
        if args.to.trim().is_empty() {
            return ToolOutput::error("invalid_arguments", "\"to\" is empty");
        }
        if args.text.len() > MAX_TEXT_BYTES {
            return ToolOutput::error(
                "invalid_arguments",
                format!(
                    "text is {} bytes; the limit is {MAX_TEXT_BYTES}",
                    args.text.len()
                ),
            );
        }
        let Some(bus) = &self.bus else {
            return ToolOutput::error("unavailable", "message: no bus in this process");
        };
        let env = Envelope::event(
            topic.clone(),
            json!({ "to": args.to, "text": args.text, "from_agent": ctx.agent }),
        )
        .from(format!("agent:{}", ctx.agent))
        .header("session", ctx.session.to_string());
        match bus.publish(env).await {
            Ok(()) => {
                tracing::info!(agent = %ctx.agent, topic = %topic, to = %args.to, bytes = args.text.len(), "Message handed to the bus.");
                ToolOutput::ok(format!(
                    "message sent to {} on channel {}",
                    args.to, args.channel
                ))
            }
            Err(e) => {
                tracing::warn!(agent = %ctx.agent, topic = %topic, error = %e, "Message not published.");
                ToolError::new("unavailable", format!("the bus refused the message: {e}"))
                    .retry_after(1000)
                    .into()
            }
        }
    }
}
