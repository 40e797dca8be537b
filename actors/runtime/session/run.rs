//! One run of a session, on the tokio pool: slot, transcript, compaction, the turn, the outcome.

use super::compaction;
use super::events::RunEvents;
use super::history::View;
use super::runtime::AgentRuntime;
use super::transcript::{Entry, EntryBody, Transcript};
use crate::ids::SessionKey;
use crate::lane::LaneError;
use crate::model::ChatMessage;
use crate::model::ToolCall;
use crate::origin::Origin;
use crate::outbox::ReplyTo as _;
use crate::tools::ToolContext;
use crate::tools::run_context::{RunContext, RunSlot};
use crate::turn::retry;
use crate::turn::usage::UsageByModel;
use crate::turn::{
    Resume, TurnError, TurnEvents, TurnHooks, TurnInput, TurnJournal, run_turn_observed,
};
use bus::{Delivery, Outcome, TaskState};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

/// What the session actor hands a run.
pub struct RunInput {
    /// The agent's shared parts.
    pub rt: Arc<AgentRuntime>,
    /// The session.
    pub key: SessionKey,
    /// Where the message came from, and the lane the run takes a slot in.
    pub origin: Origin,
    /// The task (a clone; the session actor keeps one to cancel with).
    pub delivery: Delivery,
    /// The model's view of the conversation so far.
    pub view: View,
    /// The session's transcript.
    pub transcript: Arc<Transcript>,
}

/// How a run left its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The task had already ended (cancelled before it started): nothing was recorded.
    Skipped,
    /// The daemon is shutting down: the task was left, unstarted, for the next start.
    Released,
    /// The turn failed for a passing reason; the task comes back as its next attempt.
    Retrying,
    /// The task reached this terminal state.
    Ended(TaskState),
}

/// What a run reports back to its session actor.
pub struct RunReport {
    /// Transcript entries the run wrote, in order (to update the view).
    pub entries: Vec<Entry>,
    /// How it ended.
    pub end: RunEnd,
}

/// Runs one task of the session and completes its delivery after the transcript is on disk.
pub async fn execute(input: RunInput) -> RunReport {
    let RunInput {
        rt,
        key,
        origin,
        delivery,
        view,
        transcript,
    } = input;
    let run = Run {
        request_id: delivery.envelope().request_id.to_string(),
        rt,
        key,
        origin,
        delivery,
        transcript,
    };
    match run.body(&run.origin, view).await {
        Step::Skipped => RunReport {
            entries: Vec::new(),
            end: RunEnd::Skipped,
        },
        Step::Released => {
            run.delivery.release();
            RunReport {
                entries: Vec::new(),
                end: RunEnd::Released,
            }
        }
        Step::Retry {
            entries,
            delay,
            reason,
        } => {
            if let Err(e) = run.delivery.nack_because(delay, &reason).await {
                tracing::error!(request_id = %run.request_id, error = %e, "Could not ask for the retry; the task will be redelivered.");
            }
            RunReport {
                entries,
                end: RunEnd::Retrying,
            }
        }
        Step::Ended(end) => run.finish(end).await,
    }
}

/// The turn's journal in the session transcript: each model reply and tool result is appended
/// as it happens, and each tool call is synced to disk before it runs.
struct Journal<'a> {
    transcript: &'a Transcript,
    request_id: &'a str,
    written: std::sync::Mutex<Vec<Entry>>,
}

impl Journal<'_> {
    fn write(&self, entry: Entry, sync: bool) -> std::io::Result<()> {
        let one = std::slice::from_ref(&entry);
        if sync {
            self.transcript.append(one)?;
        } else {
            self.transcript.append_unsynced(one)?;
        }
        if let Ok(mut w) = self.written.lock() {
            w.push(entry);
        }
        Ok(())
    }

    fn into_written(self) -> Vec<Entry> {
        self.written.into_inner().unwrap_or_default()
    }
}

impl TurnJournal for Journal<'_> {
    fn model_reply(
        &self,
        message: &ChatMessage,
        model: &str,
        truncated: bool,
    ) -> std::io::Result<()> {
        self.write(
            Entry::model_reply(message.clone(), self.request_id, model, truncated),
            false,
        )
    }

    fn fell_over(&self, from: &str, to: &str, reason: &str) -> std::io::Result<()> {
        let entry = Entry::new(EntryBody::ModelFellOver {
            request_id: self.request_id.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            reason: reason.to_string(),
        });
        self.write(entry, false)
    }

    fn tool_started(&self, call: &ToolCall) -> std::io::Result<()> {
        let entry = Entry::new(EntryBody::ToolCallStarted {
            request_id: self.request_id.to_string(),
            call_id: call.id.clone(),
            name: call.name.clone(),
        });
        self.write(entry, true)
    }

    fn tool_result(&self, message: &ChatMessage) -> std::io::Result<()> {
        self.write(
            Entry::message(message.clone(), Some(self.request_id), false),
            false,
        )
    }
}

/// One run in progress.
struct Run {
    rt: Arc<AgentRuntime>,
    key: SessionKey,
    request_id: String,
    /// The task's origin, read once from its envelope.
    origin: Origin,
    delivery: Delivery,
    transcript: Arc<Transcript>,
}

/// How the body of a run ended.
enum Step {
    /// The task had already ended (cancelled before it started): nothing to record.
    Skipped,
    /// The daemon is draining: leave the task unstarted for the next start.
    Released,
    /// The turn failed for a passing reason: deliver the task again after `delay`.
    Retry {
        /// What the attempt wrote.
        entries: Vec<Entry>,
        /// How long to wait.
        delay: std::time::Duration,
        /// Why the attempt failed (its error class and error), for the `retry` event.
        reason: String,
    },
    /// The run reached an outcome to record.
    Ended(End),
}

/// What a run leaves to record: the entries it wrote, its outcome, the tokens it used.
struct End {
    entries: Vec<Entry>,
    outcome: Outcome,
    usage: UsageByModel,
}

impl End {
    fn failed(entries: Vec<Entry>, error: String) -> Step {
        Step::Ended(Self {
            entries,
            outcome: Outcome::Failed { error },
            usage: UsageByModel::default(),
        })
    }
}

impl Run {
    /// Where an earlier attempt of this task left its journal: its messages (user message
    /// first), the calls that started without a result, the ids of its entries (to keep them out
    /// of the history), and the `run_resumed` entry recorded now. `None` when no attempt wrote
    /// its user message.
    fn resume_point(
        &self,
        attempt: u32,
    ) -> std::io::Result<Option<(Resume, HashSet<uuid::Uuid>, Entry)>> {
        let mut resume = Resume::default();
        let mut mine = HashSet::new();
        let mut results = HashSet::new();
        for e in self.transcript.entries()? {
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
        self.transcript.append(std::slice::from_ref(&entry))?;
        Ok(Some((resume, mine, entry)))
    }

    async fn body(&self, origin: &Origin, mut view: View) -> Step {
        let channel = origin.channel.as_str();
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let env = self.delivery.envelope();
        // A task cancelled before it reached this session (its notice was missed) must not
        // wait for a lane slot only to be skipped then.
        match rt.bus.lookup(&env.request_id).await {
            Ok(Some(record)) if record.state.is_terminal() => return Step::Skipped,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(agent = %rt.id, session = %key, request_id, error = %e, "Could not look the task up before its lane wait.")
            }
        }
        let waited = rt.clock.now();
        let slot = match rt.run_slot(env, &origin.lane).await {
            Ok(s) => s,
            Err(LaneError::Closed) => return Step::Released,
            Err(e) => {
                let error = e.to_string();
                let outcome = match e {
                    LaneError::DeadlineExceeded { .. } => Outcome::TimedOut { error },
                    LaneError::Cancelled { .. } => Outcome::Cancelled { reason: error },
                    _ => Outcome::Failed { error },
                };
                return Step::Ended(End {
                    entries: Vec::new(),
                    outcome,
                    usage: UsageByModel::default(),
                });
            }
        };
        if rt.drain.is_draining() {
            return Step::Released;
        }
        let wait_ms = rt.clock.since(waited).as_millis() as u64;
        match self.delivery.start().await {
            Ok(true) => {}
            Ok(false) => return Step::Skipped,
            Err(e) => {
                tracing::error!(agent = %rt.id, session = %key, request_id, error = %e, "Could not mark the task running.");
                return Step::Skipped;
            }
        }
        let Some(text) = env.payload.get("text").and_then(|t| t.as_str()) else {
            return End::failed(Vec::new(), "task payload has no \"text\" string".into());
        };
        tracing::info!(agent = %rt.id, session = %key, request_id, lane = %origin.lane, wait_ms, "Run started.");
        let mut call_chain = origin.call_chain.clone();
        call_chain.push(rt.id.to_string());
        // Held until the run ends; a tool that waits on other work gives the slot up meanwhile.
        let run_context = Arc::new(RunContext {
            task_id: env.id,
            request_id: request_id.to_string(),
            session: key.clone(),
            call_chain,
            deadline_ms: env.deadline,
            clock: rt.clock.clone(),
            depth: origin.depth,
            spawned: std::sync::atomic::AtomicU32::new(0),
            sent: std::sync::atomic::AtomicU32::new(0),
            slot: RunSlot::new(rt.lanes.clone(), origin.lane.clone(), env.id, slot),
        });
        let tool_context = ToolContext {
            workspace: rt.workspace.clone(),
            agent: rt.id.to_string(),
            session: key.to_string(),
            channel: channel.to_string(),
            run: Some(run_context.clone()),
        };
        let prompt = rt.prompt(key, channel);
        let mut entries = Vec::new();
        // The tokens of a compaction's model calls, counted with the turn's.
        let mut compaction_usage = UsageByModel::default();

        // A redelivered task may have run before: pick up its journal instead of starting over.
        let resumed = if env.attempt > 1 {
            match self.resume_point(env.attempt) {
                Ok(r) => r,
                Err(e) => return End::failed(entries, format!("transcript read failed: {e}")),
            }
        } else {
            None
        };
        let (history, resume) = match resumed {
            Some((resume, mine, entry)) => {
                tracing::info!(agent = %rt.id, session = %key, request_id, attempt = env.attempt, steps = resume.messages.len(), interrupted = resume.started.len(), "Run resumed from its journal.");
                entries.push(entry);
                let history: Vec<ChatMessage> = View {
                    summary: view.summary.clone(),
                    items: view
                        .items
                        .iter()
                        .filter(|(id, _)| !mine.contains(id))
                        .cloned()
                        .collect(),
                }
                .messages();
                (history, Some(resume))
            }
            None => {
                // Written once per task: a retry finds it in the journal and does not repeat it.
                let user = Entry::message(ChatMessage::user(text), Some(request_id), false);
                if let Err(e) = self.transcript.append_unsynced(std::slice::from_ref(&user)) {
                    return End::failed(entries, format!("transcript write failed: {e}"));
                }
                let system_chars = prompt.system_prompt().len();
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
                        &mut compaction_usage,
                    )
                    .await;
                    match compacted {
                        Ok(written) => {
                            for e in &written {
                                view.apply(e);
                            }
                            entries.extend(written);
                        }
                        Err(e) => {
                            tracing::warn!(agent = %rt.id, session = %key, error = %e, "Compaction failed; running on the full history.")
                        }
                    }
                }
                entries.push(user);
                (view.messages(), None)
            }
        };

        let started = rt.clock.now();
        let input = TurnInput {
            prompt,
            history,
            message: text.to_string(),
            tool_context,
            resume,
        };
        let journal = Journal {
            transcript: &self.transcript,
            request_id,
            written: std::sync::Mutex::new(Vec::new()),
        };
        let (events, forwarder) = RunEvents::start(rt.bus.clone(), self.delivery.clone());
        let hooks = TurnHooks {
            events: &events,
            journal: &journal,
        };
        // A task's deadline bounds its turn too (a subagent's `timeout_s`, a call's deadline).
        let turn = match env.deadline {
            Some(deadline) => {
                let left = deadline.saturating_sub(rt.clock.now_ms());
                let expired = rt.clock.sleep(std::time::Duration::from_millis(left));
                tokio::select! {
                    biased;
                    turn = run_turn_observed(&rt.deps, input, hooks) => turn,
                    () = expired => Err(TurnError::DeadlinePassed),
                }
            }
            None => run_turn_observed(&rt.deps, input, hooks).await,
        };
        if turn.is_err() {
            // What the failed attempt streamed is not an answer.
            events.reset("failed");
        }
        let model_calls = events.iterations();
        // Every event of the turn is on the bus before its terminal one.
        forwarder.finish(events).await;
        entries.extend(journal.into_written());
        // The turn's lines are durable before its outcome is recorded and answered. The sync
        // waits on the disk off the session's thread, so other sessions there keep running.
        let transcript = self.transcript.clone();
        let synced = tokio::task::spawn_blocking(move || transcript.sync())
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        if let Err(e) = synced {
            return End::failed(entries, format!("transcript sync failed: {e}"));
        }
        // A failure the agent's retry policy retries (by default a timeout, a rate limit or a
        // transient error) is tried again after a backoff, resuming from the journal; past the
        // task's (else the agent's) `max_attempts` the task is dead-lettered.
        let policy = &rt.def.retry;
        let retried = turn
            .as_ref()
            .err()
            .is_some_and(|e| policy.retries(retry::classify(e)));
        if let (true, Err(e)) = (retried, &turn) {
            let max_attempts = origin.max_attempts.unwrap_or(policy.max_attempts);
            if env.attempt < max_attempts {
                let delay = retry::backoff(policy, env.attempt + 1, retry::jitter());
                let class = retry::classify(e).map_or("error", |c| c.as_str());
                tracing::warn!(agent = %rt.id, session = %key, task_id = %env.id, request_id, attempt = env.attempt, max_attempts, iterations = model_calls, class, delay_ms = delay.as_millis() as u64, error = %e, "Turn failed; trying again.");
                return Step::Retry {
                    entries,
                    delay,
                    reason: format!("{class}: {e}"),
                };
            }
        }
        let (outcome, iterations, usage) = match turn {
            Ok(out) => {
                let mut usage = compaction_usage;
                usage.merge(&out.usage);
                let mut result = json!({
                    "text": out.text,
                    "iterations": out.iterations,
                    "usage": usage.to_json(rt.id.as_str(), &rt.deps.model_label, &rt.prices),
                });
                if out.truncated {
                    // Cut off by the output-token limit: the answer is incomplete.
                    result["truncated"] = json!(true);
                    result["finish_reason"] = json!("length");
                    tracing::warn!(agent = %rt.id, session = %key, request_id, "The answer was cut off by the output-token limit (max_tokens); recorded as truncated.");
                }
                (Outcome::Succeeded { result }, out.iterations, usage)
            }
            Err(e) if retried => (
                Outcome::DeadLettered {
                    error: format!("{e} (after {} attempts)", env.attempt),
                },
                model_calls,
                UsageByModel::default(),
            ),
            Err(e @ (TurnError::TimedOut(_) | TurnError::DeadlinePassed)) => (
                Outcome::TimedOut {
                    error: e.to_string(),
                },
                model_calls,
                UsageByModel::default(),
            ),
            Err(e) => (
                Outcome::Failed {
                    error: e.to_string(),
                },
                model_calls,
                UsageByModel::default(),
            ),
        };
        if let Outcome::Failed { error }
        | Outcome::TimedOut { error }
        | Outcome::DeadLettered { error } = &outcome
        {
            tracing::warn!(agent = %rt.id, session = %key, task_id = %env.id, request_id, iterations, error = %error, "Turn failed.");
        }
        let duration_ms = rt.clock.since(started).as_millis() as u64;
        let state = outcome.state().as_str();
        tracing::info!(agent = %rt.id, session = %key, request_id, iterations, duration_ms, state, "Turn finished.");
        Step::Ended(End {
            entries,
            outcome,
            usage,
        })
    }

    /// Tells the session that asked for this task without waiting (an `agent_call` with
    /// `wait: false`) how it ended, as a message that wakes that session. Sent before the
    /// outcome is recorded, under a request id of its own, so it arrives exactly once even if
    /// the process stops in between.
    async fn notify(&self, outcome: &Outcome) {
        let env = self.delivery.envelope();
        let Some(to) = &self.origin.notify_session else {
            return;
        };
        let Some(notice) =
            crate::coordinator::outcome_notice(self.rt.id.as_str(), env.id, to, outcome)
        else {
            return;
        };
        if let Err(e) = self.rt.bus.submit(notice).await {
            tracing::error!(session = %to, task_id = %env.id, error = %e, "Could not tell the calling session of the outcome.");
        }
    }

    /// Adds a run's usage to `clawbus_tokens_total` and, for a model with a price,
    /// `clawbus_cost_usd_micros_total` (micro-dollars: the counters hold integers), each under
    /// the model that answered.
    fn count_usage(&self, usage_by_model: &UsageByModel) {
        let rt = &self.rt;
        for (model, usage) in usage_by_model.iter() {
            let kinds = [
                ("input", usage.uncached_input_tokens()),
                ("output", usage.completion_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
            ];
            for (kind, n) in kinds {
                rt.metrics
                    .counter(
                        "clawbus_tokens_total",
                        "Model tokens used, by agent, model and kind (input counts uncached prompt tokens).",
                        &[("agent", rt.id.as_str()), ("model", model), ("kind", kind)],
                    )
                    .inc_by(n);
            }
            if let Some(price) = usage_by_model.price(model, &rt.prices) {
                let micros = (usage.cost_usd(price) * 1_000_000.0).round();
                rt.metrics
                    .counter(
                        "clawbus_cost_usd_micros_total",
                        "What model tokens cost at the configured prices, in micro-dollars (USD / 1e6).",
                        &[("agent", rt.id.as_str()), ("model", model)],
                    )
                    .inc_by(micros as u64);
            }
        }
    }

    /// Records a failed run in the transcript, counts it, updates the index, and acknowledges the
    /// outcome: last, so the transcript is on disk before anyone is answered.
    async fn finish(&self, end: End) -> RunReport {
        let End {
            mut entries,
            outcome,
            usage,
        } = end;
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let state = outcome.state();
        rt.metrics
            .counter(
                "clawbus_turns_total",
                "Agent runs finished, by outcome.",
                &[("agent", rt.id.as_str()), ("outcome", state.as_str())],
            )
            .inc();
        if let Outcome::Failed { error }
        | Outcome::TimedOut { error }
        | Outcome::DeadLettered { error } = &outcome
        {
            let ended = Entry::new(EntryBody::RunEnded {
                request_id: request_id.to_string(),
                outcome: state,
                reason: error.clone(),
            });
            match self.transcript.append(std::slice::from_ref(&ended)) {
                Ok(()) => entries.push(ended),
                Err(e) => {
                    tracing::error!(session = %key, error = %e, "Could not record the failed run in the transcript.")
                }
            }
        }
        let total = usage.total();
        if let Err(e) = rt.index.record_run(
            key.as_str(),
            rt.clock.now_ms(),
            total.prompt_tokens,
            total.completion_tokens,
        ) {
            tracing::error!(session = %key, error = %e, "Session index not updated.");
        }
        self.count_usage(&usage);
        self.notify(&outcome).await;
        // The reply is staged in the outbox before the outcome is recorded: the outcome's
        // durable write covers it, so a task never ends with its reply neither sent nor pending.
        let reply = rt
            .outbox
            .routes()
            .reply(&self.origin, self.delivery.envelope().id, &outcome);
        if let Some((channel, msg)) = &reply
            && let Err(e) = rt.outbox.stage(channel, msg)
        {
            tracing::error!(session = %key, request_id, channel, error = %e, "The reply was not staged in the outbox.");
        }
        match self.delivery.complete(outcome).await {
            Ok(()) => {
                if let Some((channel, msg)) = reply {
                    crate::outbox::publish(rt.bus.as_ref(), channel, &msg).await;
                }
            }
            Err(e) => {
                tracing::error!(session = %key, request_id, error = %e, "Could not record the outcome; the task will be redelivered.")
            }
        }
        RunReport {
            entries,
            end: RunEnd::Ended(state),
        }
    }
}
