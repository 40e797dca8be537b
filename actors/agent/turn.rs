//! One turn of an agent: prompt → model → tools → model … until a final answer or a limit.

use crate::config::Limits;
use crate::model::{
    ChatMessage, ChatModel, ChatRequest, ModelError, ModelObserver, ToolCall, ToolSchema,
    Unobserved,
};
use crate::tools::{ToolContext, ToolSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many identical tool calls in a row stop the loop.
const IDENTICAL_CALL_LIMIT: usize = 3;

/// What a turn needs besides its input: the agent's model, tools and limits.
#[derive(Clone)]
pub struct TurnDeps {
    /// The model client.
    pub model: Arc<dyn ChatModel>,
    /// The model name sent in requests (the part after `provider/`).
    pub model_name: String,
    /// The tools this agent may call (already filtered by policy).
    pub tools: ToolSet,
    /// Iteration, time and size limits.
    pub limits: Limits,
}

/// Builds the system prompt; asked again before every model call of a turn, so what changed
/// during the turn (a written memory note, a changed skill) is seen by the next call.
pub trait PromptSource: Send + Sync {
    /// The system prompt for the next model call.
    fn system_prompt(&self) -> String;
}

/// A fixed system prompt.
impl PromptSource for String {
    fn system_prompt(&self) -> String {
        self.clone()
    }
}

/// The input of one turn.
#[derive(Clone)]
pub struct TurnInput {
    /// Assembles the system prompt before each model call.
    pub prompt: Arc<dyn PromptSource>,
    /// Earlier messages of this conversation.
    pub history: Vec<ChatMessage>,
    /// The new message.
    pub message: String,
    /// Where tools run.
    pub tool_context: ToolContext,
}

/// A finished turn.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    /// The final answer.
    pub text: String,
    /// Model calls made.
    pub iterations: u32,
    /// Every message the turn added (user, assistant, tool), for the transcript.
    pub added: Vec<ChatMessage>,
    /// Prompt and completion tokens the model reported, summed over the turn's calls.
    pub usage: (u64, u64),
}

/// Why a turn ended without a final answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The model call failed after its retries.
    #[error("model call failed: {0}")]
    Model(#[from] ModelError),
    /// The loop hit `max_iterations` without a final answer.
    #[error("stopped after {0} model calls without a final answer (limits.max_iterations)")]
    TooManyIterations(u32),
    /// The same tool call came back too often.
    #[error(
        "stopped: the model repeated the same call to tool \"{0}\" {IDENTICAL_CALL_LIMIT} times"
    )]
    Repeating(String),
    /// The whole turn ran past `turn_timeout`.
    #[error("turn timed out after {0:?} (limits.turn_timeout)")]
    TimedOut(Duration),
}

/// Sees a turn as it happens: model calls, streamed text, retries, tool calls.
pub trait TurnEvents: ModelObserver {
    /// Model call number `iteration` (from 1) starts.
    fn model_call(&self, iteration: u32);
    /// A tool call starts.
    fn tool_start(&self, call: &ToolCall);
    /// A tool call ended; `ok` is false when it answered an error.
    fn tool_end(&self, call: &ToolCall, ok: bool);
}

impl TurnEvents for Unobserved {
    fn model_call(&self, _: u32) {}
    fn tool_start(&self, _: &ToolCall) {}
    fn tool_end(&self, _: &ToolCall, _: bool) {}
}

/// Hands a turn's observer to the model as a [`ModelObserver`].
struct Forward<'a>(&'a dyn TurnEvents);

impl ModelObserver for Forward<'_> {
    fn text(&self, delta: &str) {
        self.0.text(delta);
    }
    fn retry(&self, attempt: u32, delay: Duration, error: &ModelError) {
        self.0.retry(attempt, delay, error);
    }
}

/// Runs one turn under the turn timeout.
pub async fn run_turn(deps: &TurnDeps, input: TurnInput) -> Result<TurnOutput, TurnError> {
    run_turn_observed(deps, input, &Unobserved).await
}

/// Runs one turn under the turn timeout, telling `events` what happens.
pub async fn run_turn_observed(
    deps: &TurnDeps,
    input: TurnInput,
    events: &dyn TurnEvents,
) -> Result<TurnOutput, TurnError> {
    let limit = deps.limits.turn_timeout;
    match tokio::time::timeout(limit, tool_loop(deps, input, events)).await {
        Ok(r) => r,
        Err(_) => Err(TurnError::TimedOut(limit)),
    }
}

async fn tool_loop(
    deps: &TurnDeps,
    input: TurnInput,
    events: &dyn TurnEvents,
) -> Result<TurnOutput, TurnError> {
    // The channel layer of the tool policy: what this run's channel may not use is not offered.
    let deps = &TurnDeps {
        tools: deps.tools.for_channel(&input.tool_context.channel),
        ..deps.clone()
    };
    let schemas: Vec<ToolSchema> = deps
        .tools
        .schemas()
        .into_iter()
        .map(|(name, description, parameters)| ToolSchema {
            name,
            description,
            parameters,
        })
        .collect();
    let mut added = vec![ChatMessage::user(input.message)];
    let mut last_call: Option<(String, String)> = None;
    let mut repeats = 0;
    let mut usage = (0, 0);
    for iteration in 1..=deps.limits.max_iterations {
        // Reassembled before every call: system, history, then what this turn added.
        let mut messages = Vec::with_capacity(1 + input.history.len() + added.len());
        messages.push(ChatMessage::system(input.prompt.system_prompt()));
        messages.extend(input.history.iter().cloned());
        messages.extend(added.iter().cloned());
        let request = ChatRequest {
            model: deps.model_name.clone(),
            messages,
            tools: schemas.clone(),
        };
        let started = Instant::now();
        events.model_call(iteration);
        let reply = deps
            .model
            .complete_observed(&request, &Forward(events))
            .await?;
        if let Some(u) = &reply.usage {
            usage = (usage.0 + u.prompt_tokens, usage.1 + u.completion_tokens);
        }
        tracing::debug!(
            iteration,
            calls = reply.tool_calls.len(),
            model_ms = started.elapsed().as_millis() as u64,
            "Model answered."
        );
        if reply.tool_calls.is_empty() {
            let text = reply.text.unwrap_or_default();
            added.push(ChatMessage::assistant(Some(text.clone()), Vec::new()));
            return Ok(TurnOutput {
                text,
                iterations: iteration,
                added,
                usage,
            });
        }
        added.push(ChatMessage::assistant(
            reply.text.clone(),
            reply.tool_calls.clone(),
        ));
        for call in &reply.tool_calls {
            let key = (call.name.clone(), call.arguments.clone());
            if last_call.as_ref() == Some(&key) {
                repeats += 1;
                if repeats + 1 >= IDENTICAL_CALL_LIMIT {
                    return Err(TurnError::Repeating(call.name.clone()));
                }
            } else {
                repeats = 0;
                last_call = Some(key);
            }
            events.tool_start(call);
            let (result, ok) = run_tool(deps, &input.tool_context, call).await;
            events.tool_end(call, ok);
            added.push(ChatMessage::tool(call.id.clone(), result));
        }
    }
    Err(TurnError::TooManyIterations(deps.limits.max_iterations))
}

/// Runs one tool call: its result text, and whether it succeeded.
async fn run_tool(deps: &TurnDeps, ctx: &ToolContext, call: &ToolCall) -> (String, bool) {
    let started = Instant::now();
    let out = deps
        .tools
        .invoke(
            ctx,
            &call.name,
            &call.arguments,
            deps.limits.tool_result_max_chars,
        )
        .await;
    tracing::info!(
        agent = %ctx.agent,
        session = %ctx.session,
        tool = %call.name,
        error = out.is_error,
        duration_ms = started.elapsed().as_millis() as u64,
        "Tool ran."
    );
    (out.text, !out.is_error)
}
