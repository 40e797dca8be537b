//! One turn of an agent: prompt → model → tools → model … until a final answer or a limit.
//!
//! - [`run_turn`] / [`run_turn_observed`]: the loop; [`TurnInput`], [`TurnDeps`], [`TurnOutput`].
//! - [`retry`]: which failed turns are tried again, and when; [`usage`]: tokens and cost by model.
//! - `prose_call`: a tool call a model wrote as prose; [`build_model`]: the agent's model client.
//! - `pairs`: the history sent with every tool call answered (a run cut short leaves one that is not).

mod pairs;
pub(crate) mod prose_call;
mod provider;
pub mod retry;
#[cfg(test)]
mod tests;
pub mod usage;

pub use crate::prompt::PromptSource;
pub use provider::{ModelBuildError, build_model, build_model_with};

use crate::model::{
    ChatMessage, ChatModel, ChatRequest, ModelError, ModelObserver, Role, ToolCall, ToolSchema,
    Unobserved,
};
use crate::tools::{ToolContext, ToolOutput, ToolSet};
use clawbus_core::config::Limits;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// How many identical tool calls in a row stop the loop.
const IDENTICAL_CALL_LIMIT: usize = 3;

/// What a turn needs besides its input: the agent's model, tools and limits.
#[derive(Clone)]
pub struct TurnDeps {
    /// The model client.
    pub model: Arc<dyn ChatModel>,
    /// The model name sent in requests (the part after `provider/`).
    pub model_name: String,
    /// The agent's own model as `provider/model`: who answered when the client does not say
    /// (only a [`crate::model::FallbackModel`] does).
    pub model_label: String,
    /// The tools this agent may call (already filtered by policy).
    pub tools: ToolSet,
    /// Iteration, time and size limits.
    pub limits: Limits,
    /// The one clock: the turn timeout runs on it, and model and tool times are measured on it.
    pub clock: Arc<dyn bus::Clock>,
}

impl TurnDeps {
    /// These deps with the tool set as it stands now (see [`ToolSet::current`]): what a run
    /// takes before it starts.
    pub async fn current(&self) -> Self {
        Self {
            tools: self.tools.current().await,
            ..self.clone()
        }
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
    /// What an interrupted attempt of this turn left on disk; `None` for a fresh turn.
    pub resume: Option<Resume>,
}

/// Where an interrupted turn stood when its process stopped: what its journal holds.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// The turn's messages so far, its user message first.
    pub messages: Vec<ChatMessage>,
    /// Tool calls that had started and recorded no result.
    pub started: HashSet<String>,
    /// Tool calls of replies cut off by the output-token limit: never run.
    pub cut: HashSet<String>,
}

/// Records each step of a turn as it happens, so a turn interrupted by a crash resumes from
/// its last durable step instead of starting over.
/// Async, as a shared transcript (a log on the bus's backend) is written over the network.
#[async_trait::async_trait]
pub trait TurnJournal: Send + Sync {
    /// The model's reply, before any of its tool calls runs, the model that answered
    /// (`provider/model`), and whether the output-token limit cut it off.
    async fn model_reply(
        &self,
        message: &ChatMessage,
        model: &str,
        truncated: bool,
    ) -> std::io::Result<()>;
    /// The call moved from model `from` to model `to` (the agent's fallbacks), for `reason`.
    async fn fell_over(&self, from: &str, to: &str, reason: &str) -> std::io::Result<()>;
    /// A tool call is about to run; durable before the call has any effect.
    async fn tool_started(&self, call: &ToolCall) -> std::io::Result<()>;
    /// A tool call's result.
    async fn tool_result(&self, message: &ChatMessage) -> std::io::Result<()>;
}

/// No journal: the turn's messages are only in its output (memory-flush turns, tests).
#[async_trait::async_trait]
impl TurnJournal for Unobserved {
    async fn model_reply(&self, _: &ChatMessage, _: &str, _: bool) -> std::io::Result<()> {
        Ok(())
    }
    async fn fell_over(&self, _: &str, _: &str, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    async fn tool_started(&self, _: &ToolCall) -> std::io::Result<()> {
        Ok(())
    }
    async fn tool_result(&self, _: &ChatMessage) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a turn tells the outside world as it runs.
#[derive(Clone, Copy)]
pub struct TurnHooks<'a> {
    /// Its events (model calls, text, tool calls).
    pub events: &'a dyn TurnEvents,
    /// Its journal.
    pub journal: &'a dyn TurnJournal,
}

impl TurnHooks<'static> {
    /// Nobody listens, nothing is journaled.
    pub fn none() -> Self {
        Self {
            events: &Unobserved,
            journal: &Unobserved,
        }
    }
}

/// The result the model gets for each call of a reply the output-token limit cut off: the
/// calls are not run (their arguments are most likely incomplete).
pub(crate) const TRUNCATED_CALL_RESULT: &str = r#"{"error":{"type":"truncated","message":"your reply was cut off by the output-token limit (max_tokens) while you wrote this tool call, so it was not run; call the tool again with shorter arguments, or answer in text"}}"#;

/// The result the model gets for a call that was running when the process stopped.
pub const INTERRUPTED_RESULT: &str = r#"{"error":{"type":"interrupted","message":"the process stopped while this call ran; its effects are unknown"}}"#;

/// A finished turn.
#[derive(Debug, Clone)]
pub struct TurnOutput {
    /// The final answer.
    pub text: String,
    /// Model calls made.
    pub iterations: u32,
    /// Every message the turn added (user, assistant, tool), for the transcript.
    pub added: Vec<ChatMessage>,
    /// Tokens of the turn's model calls, summed per model that answered (estimated where a
    /// server reported none).
    pub usage: usage::UsageByModel,
    /// The answer was cut off by the output-token limit (`finish_reason: "length"`).
    pub truncated: bool,
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
    /// The task's deadline passed during the turn.
    #[error("the task's deadline passed during the turn")]
    DeadlinePassed,
    /// A second reply of the turn was cut off by the output-token limit in a tool call.
    #[error(
        "truncated: the model's reply was cut off by the output-token limit (max_tokens) while it called tool \"{0}\", again after being told; raise max_tokens ([model_params] or [providers.<name>] max_tokens)"
    )]
    Truncated(String),
    /// A step could not be journaled; the turn stops rather than act unrecorded.
    #[error("transcript write failed: {0}")]
    Journal(#[from] std::io::Error),
}

/// Sees a turn as it happens: model calls, streamed text, retries, tool calls.
pub trait TurnEvents: ModelObserver {
    /// Model call number `iteration` (from 1) starts.
    fn model_call(&self, iteration: u32);
    /// A tool call starts.
    fn tool_start(&self, call: &ToolCall);
    /// A tool call ended; `ok` is false when it answered an error.
    fn tool_end(&self, call: &ToolCall, ok: bool);
    /// Model call number `iteration` was answered by `model` (`provider/model`), which is not
    /// the agent's own model (a fallback answered). Ignored unless overridden.
    fn answered_by(&self, iteration: u32, model: &str) {
        let _ = (iteration, model);
    }
    /// The text streamed since the last reset is not (part of) the answer: its step ended in
    /// tool calls (`reason` `tool_calls`). Ignored unless overridden.
    fn reset(&self, reason: &str) {
        let _ = reason;
    }
}

impl TurnEvents for Unobserved {
    fn model_call(&self, _: u32) {}
    fn tool_start(&self, _: &ToolCall) {}
    fn tool_end(&self, _: &ToolCall, _: bool) {}
}

/// Hands a turn's observer to the model as a [`ModelObserver`], keeping the call's moves from
/// model to model for the journal.
struct Forward<'a> {
    events: &'a dyn TurnEvents,
    /// `(from, to, reason)` of each move, in order.
    moves: std::sync::Mutex<Vec<(String, String, String)>>,
}

impl<'a> Forward<'a> {
    fn new(events: &'a dyn TurnEvents) -> Self {
        Self {
            events,
            moves: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Writes the call's moves to the journal.
    async fn journal(self, journal: &dyn TurnJournal) -> std::io::Result<()> {
        let moves = self.moves.into_inner().unwrap_or_else(|e| e.into_inner());
        for (from, to, reason) in moves {
            journal.fell_over(&from, &to, &reason).await?;
        }
        Ok(())
    }
}

impl ModelObserver for Forward<'_> {
    fn text(&self, delta: &str) {
        self.events.text(delta);
    }
    fn retry(&self, attempt: u32, delay: Duration, error: &ModelError) {
        self.events.retry(attempt, delay, error);
    }
    fn fell_over(&self, event: &crate::model::Fallover<'_>) {
        if let Ok(mut moves) = self.moves.lock() {
            let reason = event.reason.to_string();
            moves.push((event.from.to_owned(), event.to.to_owned(), reason));
        }
        self.events.fell_over(event);
    }
}

/// Runs one turn under the turn timeout.
pub async fn run_turn(deps: &TurnDeps, input: TurnInput) -> Result<TurnOutput, TurnError> {
    run_turn_observed(deps, input, TurnHooks::none()).await
}

/// Runs one turn under the turn timeout, journaling each step and telling its events.
pub async fn run_turn_observed(
    deps: &TurnDeps,
    input: TurnInput,
    hooks: TurnHooks<'_>,
) -> Result<TurnOutput, TurnError> {
    let limit = deps.limits.turn_timeout;
    let expired = deps.clock.sleep(limit);
    tokio::select! {
        biased;
        turn = tool_loop(deps, input, hooks) => turn,
        () = expired => Err(TurnError::TimedOut(limit)),
    }
}

/// Stops a turn whose model repeats the same call.
#[derive(Default)]
struct RepeatGuard {
    last: Option<(String, String)>,
    repeats: usize,
}

impl RepeatGuard {
    fn check(&mut self, call: &ToolCall) -> Result<(), TurnError> {
        let key = (call.name.clone(), call.arguments.clone());
        if self.last.as_ref() == Some(&key) {
            self.repeats += 1;
            if self.repeats + 1 >= IDENTICAL_CALL_LIMIT {
                return Err(TurnError::Repeating(call.name.clone()));
            }
        } else {
            self.repeats = 0;
            self.last = Some(key);
        }
        Ok(())
    }
}

/// The calls of the turn's last reply that have no result yet: all of them right after the
/// reply, the rest of them when an interrupted turn resumes.
fn pending_calls(added: &[ChatMessage]) -> Vec<ToolCall> {
    let Some(at) = added
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
    else {
        return Vec::new();
    };
    let answered: HashSet<&str> = added[at + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    added[at]
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .cloned()
        .collect()
}

/// The turn's deps with the channel layer of the tool policy applied, and the schemas of the
/// tools left with the characters a token estimate counts of them: what this run's channel may not use is not offered, nor what the session's
/// channel may not (a `sessions_send` into a Telegram chat's session comes from the `agent`
/// channel, but runs in Telegram's conversation).
fn for_channels(deps: &TurnDeps, ctx: &ToolContext) -> (TurnDeps, Arc<[ToolSchema]>, usize) {
    let mut tools = deps.tools.for_channel(ctx.channel.as_str());
    if let Some(channel) = ctx.session.channel().filter(|c| ctx.channel != *c) {
        tools = tools.for_channel(channel);
    }
    // Built once per tool set: a channel that removes nothing shares the agent's.
    let (schemas, schema_chars) = (tools.model_schemas(), tools.schema_chars());
    let deps = TurnDeps {
        tools,
        ..deps.clone()
    };
    (deps, schemas, schema_chars)
}

/// A reply the output-token limit cut off in a tool call, added to the turn: its calls are
/// marked `cut` (never run; each is answered with [`TRUNCATED_CALL_RESULT`]). The second such
/// reply of a turn answers its calls at once, so the session's history stays well-formed, and
/// ends the turn with [`TurnError::Truncated`].
async fn record_cut_off(
    message: ChatMessage,
    added: &mut Vec<ChatMessage>,
    cut: &mut HashSet<String>,
    cut_replies: &mut u32,
    journal: &dyn TurnJournal,
    ctx: &ToolContext,
) -> Result<(), TurnError> {
    cut.extend(message.tool_calls.iter().map(|c| c.id.clone()));
    *cut_replies += 1;
    let tool = message
        .tool_calls
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    tracing::warn!(agent = %ctx.agent, session = %ctx.session, tool = %tool, again = *cut_replies > 1, "The model's reply was cut off by the output-token limit in a tool call; the call is not run.");
    added.push(message);
    if *cut_replies < 2 {
        return Ok(());
    }
    for call in pending_calls(added) {
        let note = ChatMessage::tool(call.id, TRUNCATED_CALL_RESULT);
        journal.tool_result(&note).await?;
        added.push(note);
    }
    Err(TurnError::Truncated(tool))
}

async fn tool_loop(
    deps: &TurnDeps,
    input: TurnInput,
    hooks: TurnHooks<'_>,
) -> Result<TurnOutput, TurnError> {
    let TurnHooks { events, journal } = hooks;
    let (deps, schemas, schema_chars) = &for_channels(deps, &input.tool_context);
    let (mut added, started, mut cut) = match input.resume {
        Some(r) if !r.messages.is_empty() => (r.messages, r.started, r.cut),
        _ => (
            vec![ChatMessage::user(input.message)],
            HashSet::new(),
            HashSet::new(),
        ),
    };
    let mut iterations = added.iter().filter(|m| m.role == Role::Assistant).count() as u32;
    let mut guard = RepeatGuard::default();
    let mut usage = usage::UsageByModel::default();
    // Replies of this turn cut off in a tool call; the second one ends the turn.
    let mut cut_replies = u32::from(!cut.is_empty());
    let mut truncated = false;
    // The request's messages, kept from call to call: system, history, then what this turn
    // added. The history's vector becomes the request's (the session leaves room in it for the
    // system prompt and the turn's first messages); only the turn's own new messages are
    // copied in.
    let mut messages = input.history;
    // A run cut short before (cancelled while a tool ran) must not make this one fail.
    pairs::answer_every_tool_call(&mut messages);
    messages.reserve(1 + added.len());
    messages.insert(0, ChatMessage::system(String::new()));
    let mut sent = 0;
    loop {
        for call in pending_calls(&added) {
            let (result, images) = if cut.contains(&call.id) {
                (TRUNCATED_CALL_RESULT.to_string(), Vec::new())
            } else if let Err(e) = guard.check(&call) {
                return Err(e);
            } else if started.contains(&call.id) && !deps.tools.is_idempotent(&call.name) {
                tracing::warn!(tool = %call.name, call_id = %call.id, "Tool call interrupted by a stop; its effects are unknown, so it is not run again.");
                (INTERRUPTED_RESULT.to_string(), Vec::new())
            } else {
                journal.tool_started(&call).await?;
                events.tool_start(&call);
                let out = run_tool(deps, &input.tool_context, &call).await;
                events.tool_end(&call, !out.is_error);
                (out.text, out.images)
            };
            let message = ChatMessage::tool(call.id.clone(), result).with_images(images);
            journal.tool_result(&message).await?;
            added.push(message);
        }
        if let Some(last) = added.last() {
            if last.role == Role::Assistant && last.tool_calls.is_empty() {
                // Resumed after the final answer was journaled: that is the answer.
                return Ok(TurnOutput {
                    text: last.content.clone().unwrap_or_default(),
                    iterations,
                    added,
                    usage,
                    truncated,
                });
            }
        }
        if iterations >= deps.limits.max_iterations {
            return Err(TurnError::TooManyIterations(deps.limits.max_iterations));
        }
        iterations += 1;
        // The system prompt is reassembled before every call.
        messages[0] = ChatMessage::system(input.prompt.system_prompt());
        messages.extend(added[sent..].iter().cloned());
        sent = added.len();
        let request = ChatRequest {
            model: deps.model_name.clone(),
            messages,
            tools: schemas.clone(),
        };
        let started_at = deps.clock.now();
        events.model_call(iterations);
        let observer = Forward::new(events);
        let reply = deps.model.complete_observed(&request, &observer).await;
        // The moves are journaled whether a later model answered or every one failed.
        observer.journal(journal).await?;
        let reply = reply?;
        let answered = reply.model.as_deref().unwrap_or(&deps.model_label);
        if answered != deps.model_label {
            events.answered_by(iterations, answered);
        }
        // Tokens are counted under the model the server says answered (llama-server ignores
        // the name requested), priced as the one requested.
        let served = served_label(answered, reply.served_model.as_deref());
        usage.add_call(&served, &request, *schema_chars, &reply);
        usage.priced_as(&served, answered);
        messages = request.messages;
        tracing::debug!(
            iteration = iterations,
            calls = reply.tool_calls.len(),
            model = %served,
            finish_reason = reply.finish_reason.as_deref().unwrap_or(""),
            model_ms = deps.clock.since(started_at).as_millis() as u64,
            "Model answered."
        );
        let answered = answered.to_owned();
        let cut_off = reply.is_truncated();
        if reply.tool_calls.is_empty() {
            warn_prose_call(&input.tool_context, &answered, reply.text.as_deref());
            truncated = cut_off;
        } else {
            // The step's text is not the answer: clients that show the answer drop it.
            events.reset("tool_calls");
        }
        let message = if reply.tool_calls.is_empty() {
            ChatMessage::assistant(Some(reply.text.unwrap_or_default()), Vec::new())
        } else {
            ChatMessage::assistant(reply.text, reply.tool_calls)
        };
        journal.model_reply(&message, &answered, cut_off).await?;
        if cut_off && !message.tool_calls.is_empty() {
            let ctx = &input.tool_context;
            record_cut_off(
                message,
                &mut added,
                &mut cut,
                &mut cut_replies,
                journal,
                ctx,
            )
            .await?;
        } else {
            added.push(message);
        }
    }
}

/// The `provider/model` label tokens are counted under: the provider of `answered` with the
/// model name the server gave, when it gave another one.
fn served_label(answered: &str, served: Option<&str>) -> String {
    match (answered.split_once('/'), served) {
        (Some((provider, requested)), Some(served)) if served != requested => {
            format!("{provider}/{served}")
        }
        _ => answered.to_owned(),
    }
}

/// Logs at WARN a final answer that is a tool call written as text: the turn ends with that
/// text (see [`prose_call`]).
fn warn_prose_call(ctx: &ToolContext, model: &str, text: Option<&str>) {
    let Some(tool) = text.and_then(prose_call::prose_tool_call) else {
        return;
    };
    let (task_id, request_id) = match &ctx.run {
        Some(run) => (run.task_id.to_string(), run.request_id.as_str()),
        None => (String::new(), ""),
    };
    tracing::warn!(
        agent = %ctx.agent, session = %ctx.session, task_id = %task_id, request_id, model = %model, tool = %tool,
        "The model wrote a tool call as text instead of calling the tool; the turn ends with that text as its answer (a model or server without tool-call support?)."
    );
}

/// Runs one tool call: its result text, and whether it succeeded.
async fn run_tool(deps: &TurnDeps, ctx: &ToolContext, call: &ToolCall) -> ToolOutput {
    let started = deps.clock.now();
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
        duration_ms = deps.clock.since(started).as_millis() as u64,
        "Tool ran."
    );
    out
}
