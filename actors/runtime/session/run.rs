//! One run of a session, on the tokio pool, as named steps (`Run::body` lists them): the slot,
//! the run's context, resume or compact, the turn, the retry decision, the outcome; then
//! `finish` (in `run/finish.rs`) records it. The turn's journal and its resumption are in
//! `run/journal.rs`.

mod finish;
mod journal;

use super::CompactError;
use super::compaction::{self, CompactHow, Compacted};
use super::events::RunEvents;
use super::history::View;
use super::lease::SessionLeases;
use super::runtime::AgentRuntime;
use super::transcript::{Entry, EntryBody, Transcript};
use crate::lane::{LaneError, LanePermit};
use crate::origin::Origin;
use crate::tools::ToolContext;
use crate::tools::run_context::{RunContext, RunSlot};
use crate::turn::retry;
use crate::turn::usage::UsageByModel;
use crate::turn::{
    PromptSource, TurnError, TurnEvents, TurnHooks, TurnInput, TurnOutput, run_turn_observed,
};
use bus::{Delivery, Outcome, TaskState};
use clawbus_core::ids::SessionKey;
use clawbus_core::task::{TaskInput, TaskResult};
use journal::{Journal, Prepared};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What the session actor hands a run.
pub(crate) struct RunInput {
    /// The agent's shared parts.
    pub rt: Arc<AgentRuntime>,
    /// The session.
    pub key: SessionKey,
    /// Where the message came from, and the lane the run takes a slot in.
    pub origin: Origin,
    /// The task (a clone; the session actor keeps one to cancel with).
    pub delivery: Delivery,
    /// The model's view of the conversation so far, shared with the session actor: the run
    /// copies it once it holds its lane slot (`Run::resume_or_compact`), not while it waits.
    pub view: Arc<View>,
    /// The session's transcript.
    pub transcript: Arc<Transcript>,
    /// Set while this node's index row of the session is new and not yet entered in the
    /// cluster's rows; the run that enters it clears it.
    pub new_row: Arc<AtomicBool>,
}

/// How a run left its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// The task had already ended (cancelled before it started): nothing was recorded.
    Skipped,
    /// The daemon is shutting down: the task was left, unstarted, for the next start.
    Released,
    /// The turn failed for a passing reason; the task comes back as its next attempt.
    Retrying,
    /// The task reached this terminal state.
    Ended(TaskState),
    /// The session's lease was lost mid-run: the run stopped where it was, its task unsettled
    /// (another node runs it); what it wrote is read back from the transcript.
    LeaseLost,
}

/// What a run reports back to its session actor.
pub(crate) struct RunReport {
    /// The view the run started from when it read it again from a shared transcript (another
    /// node ran the session meanwhile): it replaces the actor's before `entries` apply.
    pub base: Option<View>,
    /// Transcript entries the run wrote, in order (to update the view).
    pub entries: Vec<Entry>,
    /// How it ended.
    pub end: RunEnd,
}

/// Runs one task of the session and completes its delivery after the transcript is on disk;
/// on a shared bus, under the session's lease (`execute_leased`).
pub(crate) async fn execute(input: RunInput) -> RunReport {
    match input.rt.leases.clone() {
        None => execute_here(input).await,
        Some(leases) => execute_leased(input, &leases).await,
    }
}

/// The run under its session's lease: taken first (waiting, bounded by the task's deadline, for
/// another node's run of the session to end or its lease to expire), renewed while the run goes
/// on, recorded in the transcript and released after. A lease that cannot be taken sends the
/// task back for a later attempt; one lost mid-run (this node was cut off long enough for it to
/// expire) stops the run where it is, unsettled, so no two nodes write the session at once.
async fn execute_leased(input: RunInput, leases: &SessionLeases) -> RunReport {
    let rt = input.rt.clone();
    let key = input.key.clone();
    let transcript = input.transcript.clone();
    let delivery = input.delivery.clone();
    let request_id = delivery.envelope().request_id.to_string();
    let within = match delivery.envelope().deadline {
        Some(deadline_ms) => {
            Duration::from_millis(deadline_ms.saturating_sub(rt.clock.now_ms())).min(leases.wait())
        }
        None => leases.wait(),
    };
    let lease = match leases.acquire(&key, within).await {
        Ok(lease) => lease,
        Err(e) => {
            let delay = leases.leases().ttl();
            tracing::warn!(agent = %rt.id, session = %key, request_id, error = %e, delay_ms = delay.as_millis() as u64, "Session lease not taken; the task is tried again later.");
            return retry_later(
                &delivery,
                delay,
                &format!("session lease: {e}"),
                &request_id,
            )
            .await;
        }
    };
    tracing::debug!(agent = %rt.id, session = %key, request_id, revision = lease.revision(), "Session lease taken.");
    // Every line the run appends is stamped with the lease: the log refuses it once a newer
    // holder wrote.
    transcript.set_lease(Some(lease.first_revision())).await;
    // From its first run on, every node lists the session. One deleted on some node since this
    // node last ran it starts afresh: its transcript is read again as the log now stands.
    match rt
        .index
        .enter(
            key.as_str(),
            rt.id.as_str(),
            rt.clock.now_ms(),
            input.new_row.load(Ordering::SeqCst),
        )
        .await
    {
        Ok(renewed) => {
            input.new_row.store(false, Ordering::SeqCst);
            if renewed {
                tracing::info!(agent = %rt.id, session = %key, request_id, "Session deleted on some node since it ran here; a fresh one begins.");
                transcript.forget();
            }
        }
        Err(e) => {
            tracing::error!(agent = %rt.id, session = %key, request_id, error = %e, "Session not entered in the cluster's index.");
        }
    }
    // A run aborted here (cancelled) still lets its lease go at once.
    let mut guard = LeaseGuard(Some(lease));
    // Another node may have run the session since this one last did: start from the whole
    // shared transcript.
    let mut input = input;
    let base = match catch_up(&input.transcript, &input.key, &input.rt.id).await {
        Ok(base) => base,
        Err(e) => {
            let delay = leases.leases().ttl();
            tracing::warn!(agent = %rt.id, session = %key, request_id, error = %e, "Shared transcript unreadable; the task is tried again later.");
            return retry_later(
                &delivery,
                delay,
                &format!("shared transcript: {e}"),
                &request_id,
            )
            .await;
        }
    };
    if let Some(view) = &base {
        input.view = Arc::new(view.clone());
    }
    let ended = match guard.0.as_mut() {
        Some(lease) => {
            let run = execute_here(input);
            tokio::select! {
                biased;
                report = run => Ok(report),
                lost = lease.keep() => Err(lost),
            }
        }
        // Never: the guard was just filled.
        None => Ok(execute_here(input).await),
    };
    let mut report = match ended {
        Ok(report) => RunReport { base, ..report },
        Err(lost) => {
            // Nothing to release: it is someone else's now, or gone.
            guard.0 = None;
            transcript.set_lease(None).await;
            tracing::error!(agent = %rt.id, session = %key, request_id, error = %lost, "Session lease lost mid-run; the run stopped unsettled and another node takes the task.");
            return RunReport {
                base: None,
                entries: Vec::new(),
                end: RunEnd::LeaseLost,
            };
        }
    };
    if let Some(lease) = guard.0.as_ref() {
        let record = Entry::new(EntryBody::RunLease {
            request_id: request_id.clone(),
            holder: lease.holder().to_string(),
            first_revision: lease.first_revision(),
            last_revision: lease.revision(),
        });
        match transcript
            .record_unsynced(std::slice::from_ref(&record))
            .await
        {
            Ok(()) => report.entries.push(record),
            Err(e) => {
                tracing::error!(session = %key, request_id, error = %e, "Could not record the run's lease in the transcript.")
            }
        }
    }
    // Lines held while the log store was unreachable reach the log before the lease goes, so
    // the node that takes the session next finds them all; kept meanwhile.
    if let Some(lease) = guard.0.as_mut() {
        let sent = tokio::select! {
            biased;
            sent = transcript.send_unsent() => sent.map_err(|e| e.to_string()),
            lost = lease.keep() => Err(lost.to_string()),
        };
        if let Err(e) = sent {
            guard.0 = None;
            tracing::error!(agent = %rt.id, session = %key, request_id, error = %e, "Held transcript lines not appended before the lease went; not released, it expires by itself.");
        }
    }
    transcript.set_lease(None).await;
    if let Some(lease) = guard.0.take()
        && let Err(e) = lease.release().await
    {
        tracing::warn!(agent = %rt.id, session = %key, request_id, error = %e, "Session lease not released; it expires by itself.");
    }
    report
}

/// Sends the task back to be delivered again after `delay` (`why` recorded with it); the run
/// did nothing.
async fn retry_later(
    delivery: &Delivery,
    delay: Duration,
    why: &str,
    request_id: &str,
) -> RunReport {
    if let Err(e) = delivery.nack_because(delay, why).await {
        tracing::error!(request_id, error = %e, "Could not ask for the retry; the task will be redelivered.");
    }
    RunReport {
        base: None,
        entries: Vec::new(),
        end: RunEnd::Retrying,
    }
}

/// Reads a shared transcript again when it changed since this node last saw it; a log still
/// empty gets the session's first line. The view to start from, or `None` when the actor's is
/// current (or the transcript is a file).
async fn catch_up(
    transcript: &Transcript,
    key: &SessionKey,
    agent: &clawbus_core::ids::AgentId,
) -> std::io::Result<Option<View>> {
    let Some(entries) = transcript.load_if_changed().await? else {
        return Ok(None);
    };
    if entries.is_empty() {
        let first = Entry::new(EntryBody::Session {
            version: 1,
            key: key.to_string(),
            agent: agent.to_string(),
        });
        transcript.start_shared(&first).await?;
    }
    tracing::debug!(session = %key, entries = entries.len(), "Shared transcript read.");
    Ok(Some(View::from_entries(&entries)))
}

/// How long a compaction asked for on a shared bus waits for the session's lease, held by a run
/// on another node, before it is refused as busy (OpenClaw's rule: retry after the run).
const COMPACT_LEASE_WAIT: Duration = Duration::from_secs(2);

/// What a compaction asked for between runs did: the view it started from when it read the
/// shared transcript again (`None`: the actor's), what it did, and the record it wrote.
pub(crate) type CompactedHere = (Option<View>, Compacted, Option<Entry>);

/// A compaction asked for between runs (`view`: the actor's). On a shared bus it runs under the
/// session's lease (taken within [`COMPACT_LEASE_WAIT`], else refused as busy: a run of the
/// session holds it on another node), from the shared transcript as it stands, its record
/// stamped with the lease like a run's lines.
pub(crate) async fn compact(
    rt: &AgentRuntime,
    key: &SessionKey,
    transcript: &Transcript,
    view: View,
    how: CompactHow,
) -> Result<CompactedHere, CompactError> {
    let failed = |error: String| CompactError::Failed {
        key: key.to_string(),
        error,
    };
    let Some(leases) = rt.leases.as_ref() else {
        let (done, entry) =
            compaction::on_request(&rt.deps, &rt.def.session, &view, transcript, how)
                .await
                .map_err(|e| failed(e.to_string()))?;
        return Ok((None, done, entry));
    };
    let lease = match leases.acquire(key, COMPACT_LEASE_WAIT).await {
        Ok(lease) => lease,
        Err(bus::kv::LeaseError::Busy { .. }) => {
            return Err(CompactError::Running {
                key: key.to_string(),
            });
        }
        Err(e) => return Err(failed(format!("session lease: {e}"))),
    };
    transcript.set_lease(Some(lease.first_revision())).await;
    let mut guard = LeaseGuard(Some(lease));
    let work = async {
        let base = catch_up(transcript, key, &rt.id)
            .await
            .map_err(|e| failed(format!("shared transcript: {e}")))?;
        let from = base.as_ref().unwrap_or(&view);
        let (done, entry) =
            compaction::on_request(&rt.deps, &rt.def.session, from, transcript, how)
                .await
                .map_err(|e| failed(e.to_string()))?;
        // A record held while the log store was unreachable reaches the log before the lease
        // goes, as a run's lines do.
        transcript
            .send_unsent()
            .await
            .map_err(|e| failed(format!("held transcript lines: {e}")))?;
        Ok((base, done, entry))
    };
    // The lease is renewed while the summary is made and written, as during a run.
    let ended = match guard.0.as_mut() {
        Some(lease) => tokio::select! {
            biased;
            done = work => Ok(done),
            lost = lease.keep() => Err(lost),
        },
        None => Ok(work.await),
    };
    let done = ended.unwrap_or_else(|lost| {
        // Someone else's now, or gone: nothing to release.
        guard.0 = None;
        Err(failed(format!("session lease lost: {lost}")))
    });
    transcript.set_lease(None).await;
    if let Some(lease) = guard.0.take()
        && let Err(e) = lease.release().await
    {
        tracing::warn!(agent = %rt.id, session = %key, error = %e, "Session lease not released after a compaction; it expires by itself.");
    }
    done
}

/// Releases a lease still held when the run holding it is dropped (aborted by a cancel).
struct LeaseGuard(Option<bus::kv::Lease>);

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some(lease) = self.0.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            drop(rt.spawn(async move {
                if let Err(e) = lease.release().await {
                    tracing::debug!(error = %e, "Lease of an aborted run not released; it expires by itself.");
                }
            }));
        }
    }
}

/// The run itself, with no lease.
async fn execute_here(input: RunInput) -> RunReport {
    let RunInput {
        rt,
        key,
        origin,
        delivery,
        view,
        transcript,
        new_row: _,
    } = input;
    let run = Run {
        request_id: delivery.envelope().request_id.to_string(),
        rt,
        key,
        origin,
        delivery,
        transcript,
    };
    match run.body(view).await {
        Step::Skipped => RunReport {
            base: None,
            entries: Vec::new(),
            end: RunEnd::Skipped,
        },
        Step::Released => {
            run.delivery.release();
            RunReport {
                base: None,
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
                base: None,
                entries,
                end: RunEnd::Retrying,
            }
        }
        Step::Ended(end) => run.finish(end).await,
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

/// What a turn left, once its lines are on disk.
struct Turned {
    turn: Result<TurnOutput, TurnError>,
    /// Model calls made, also by a failed turn.
    model_calls: u32,
    entries: Vec<Entry>,
    /// The compaction's tokens.
    usage: UsageByModel,
    started: tokio::time::Instant,
}

/// What the agent's retry policy makes of a turn's result.
enum Verdict {
    /// A success, or a failure the policy does not retry: record it as it is.
    Final,
    /// A failure the policy retries, with attempts left: try again after `delay`.
    Retry {
        delay: std::time::Duration,
        reason: String,
    },
    /// A failure the policy retries, out of attempts: dead-letter the task.
    GiveUp,
}

impl Run {
    /// The run of one task, step by step: a slot in its lane, then the context of the run,
    /// then the history (resumed from an earlier attempt's journal, or compacted), the turn,
    /// the retry decision, and the outcome to record.
    async fn body(&self, view: Arc<View>) -> Step {
        let (permit, wait_ms) = match self.slot().await {
            Ok(slot) => slot,
            Err(step) => return step,
        };
        let text = match TaskInput::text_of(&self.delivery.envelope().payload) {
            Ok(text) => text,
            Err(e) => return End::failed(Vec::new(), e.to_string()),
        };
        let (tool_context, prompt) = self.context(permit, wait_ms);
        let prepared = match self
            .resume_or_compact(view, text, &prompt, &tool_context)
            .await
        {
            Ok(prepared) => prepared,
            Err(step) => return step,
        };
        let turned = match self.turn(text, prompt, tool_context, prepared).await {
            Ok(turned) => turned,
            Err(step) => return step,
        };
        match self.retry_decision(&turned) {
            Verdict::Retry { delay, reason } => Step::Retry {
                entries: turned.entries,
                delay,
                reason,
            },
            Verdict::Final => Step::Ended(self.outcome(turned, false)),
            Verdict::GiveUp => Step::Ended(self.outcome(turned, true)),
        }
    }

    /// Step 1, the slot: skips a task that has already ended, waits for a slot in the origin's
    /// lane (at most until the task's deadline), and marks the task running. Gives the slot and
    /// how long the run waited for it (ms), or how the run ends without a turn.
    async fn slot(&self) -> Result<(LanePermit, u64), Step> {
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let env = self.delivery.envelope();
        // A task cancelled before it reached this session (its notice was missed) must not
        // wait for a lane slot only to be skipped then.
        match rt.bus.lookup(&env.request_id).await {
            Ok(Some(record)) if record.state.is_terminal() => return Err(Step::Skipped),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(agent = %rt.id, session = %key, request_id, error = %e, "Could not look the task up before its lane wait.")
            }
        }
        let waited = rt.clock.now();
        let permit = match rt.run_slot(env, &self.origin.lane).await {
            Ok(p) => p,
            Err(LaneError::Closed) => return Err(Step::Released),
            Err(e) => {
                let error = e.to_string();
                let outcome = match e {
                    LaneError::DeadlineExceeded { .. } => Outcome::TimedOut { error },
                    LaneError::Cancelled { .. } => Outcome::Cancelled { reason: error },
                    _ => Outcome::Failed { error },
                };
                return Err(Step::Ended(End {
                    entries: Vec::new(),
                    outcome,
                    usage: UsageByModel::default(),
                }));
            }
        };
        if rt.drain.is_draining() {
            return Err(Step::Released);
        }
        let wait_ms = rt.clock.since(waited).as_millis() as u64;
        match self.delivery.start().await {
            Ok(true) => Ok((permit, wait_ms)),
            Ok(false) => Err(Step::Skipped),
            Err(e) => {
                tracing::error!(agent = %rt.id, session = %key, request_id, error = %e, "Could not mark the task running.");
                Err(Step::Skipped)
            }
        }
    }

    /// Step 2, the run's context: what its tools know of it (holding the lane slot until the
    /// run ends; a tool that waits on other work gives it up meanwhile), and its prompt.
    fn context(&self, permit: LanePermit, wait_ms: u64) -> (ToolContext, Arc<dyn PromptSource>) {
        let (rt, key, origin, env) = (&self.rt, &self.key, &self.origin, self.delivery.envelope());
        let request_id = self.request_id.as_str();
        tracing::info!(agent = %rt.id, session = %key, request_id, lane = %origin.lane, wait_ms, "Run started.");
        let mut call_chain = origin.call_chain.clone();
        call_chain.push(rt.id.clone());
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
            slot: RunSlot::new(rt.lanes.clone(), origin.lane.clone(), env.id, permit),
        });
        let tool_context = ToolContext {
            workspace: rt.workspace.clone(),
            agent: rt.id.clone(),
            session: key.clone(),
            channel: origin.channel.clone(),
            run: Some(run_context),
        };
        (tool_context, rt.prompt(key, origin.channel.as_str()))
    }

    /// Step 4, the turn: bounded by the task's deadline (a subagent's `timeout_s`, a call's
    /// deadline), its events on the bus before its outcome, its lines synced to disk (off the
    /// session's thread, so other sessions there keep running) before anything is recorded.
    async fn turn(
        &self,
        text: &str,
        prompt: Arc<dyn PromptSource>,
        tool_context: ToolContext,
        prepared: Prepared,
    ) -> Result<Turned, Step> {
        let rt = &self.rt;
        let Prepared {
            history,
            resume,
            mut entries,
            usage,
        } = prepared;
        let started = rt.clock.now();
        let input = TurnInput {
            prompt,
            history,
            message: text.to_string(),
            tool_context,
            resume,
        };
        let journal = Journal::new(&self.transcript, &self.request_id);
        let (events, forwarder) = RunEvents::start(rt.bus.clone(), self.delivery.clone());
        let hooks = TurnHooks {
            events: &events,
            journal: &journal,
        };
        // MCP tools may have changed since the last run (a server started, restarted or said so).
        let deps = rt.deps.current().await;
        let turn = match self.delivery.envelope().deadline {
            Some(deadline) => {
                let left = deadline.saturating_sub(rt.clock.now_ms());
                let expired = rt.clock.sleep(std::time::Duration::from_millis(left));
                tokio::select! {
                    biased;
                    turn = run_turn_observed(&deps, input, hooks) => turn,
                    () = expired => Err(TurnError::DeadlinePassed),
                }
            }
            None => run_turn_observed(&deps, input, hooks).await,
        };
        if turn.is_err() {
            // What the failed attempt streamed is not an answer.
            events.reset("failed");
        }
        let model_calls = events.iterations();
        // Every event of the turn is on the bus before its terminal one.
        forwarder.finish(events).await;
        entries.extend(journal.into_written());
        if let Err(e) = self.transcript.flush().await {
            return Err(End::failed(entries, format!("transcript sync failed: {e}")));
        }
        Ok(Turned {
            turn,
            model_calls,
            entries,
            usage,
            started,
        })
    }

    /// Step 5, the retry decision: a failure the agent's retry policy retries (by default a
    /// timeout, a rate limit or a transient error) is tried again after a backoff, resuming
    /// from the journal; past the task's (else the agent's) `max_attempts` it is dead-lettered.
    fn retry_decision(&self, turned: &Turned) -> Verdict {
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let policy = &rt.def.retry;
        let Err(e) = &turned.turn else {
            return Verdict::Final;
        };
        let class = retry::classify(e);
        if !policy.retries(class) {
            return Verdict::Final;
        }
        let env = self.delivery.envelope();
        let max_attempts = self.origin.max_attempts.unwrap_or(policy.max_attempts);
        if env.attempt >= max_attempts {
            return Verdict::GiveUp;
        }
        let delay = retry::backoff(policy, env.attempt + 1, retry::jitter());
        let class = class.map_or("error", |c| c.as_str());
        tracing::warn!(agent = %rt.id, session = %key, task_id = %env.id, request_id, attempt = env.attempt, max_attempts, iterations = turned.model_calls, class, delay_ms = delay.as_millis() as u64, error = %e, "Turn failed; trying again.");
        Verdict::Retry {
            delay,
            reason: format!("{class}: {e}"),
        }
    }

    /// Step 6, the outcome to record: the answer with its usage (marked when the output-token
    /// limit cut it off), or the failure (`dead_letter`: a retried failure out of attempts).
    fn outcome(&self, turned: Turned, dead_letter: bool) -> End {
        let (rt, key, request_id) = (&self.rt, &self.key, self.request_id.as_str());
        let env = self.delivery.envelope();
        let Turned {
            turn,
            model_calls,
            entries,
            usage: compaction_usage,
            started,
        } = turned;
        let (outcome, iterations, usage) = match turn {
            Ok(out) => {
                let mut usage = compaction_usage;
                usage.merge(&out.usage);
                let mut result = TaskResult {
                    iterations: Some(out.iterations),
                    usage: Some(usage.to_json(rt.id.as_str(), &rt.deps.model_label, &rt.prices)),
                    ..TaskResult::text(out.text)
                };
                if out.truncated {
                    // Cut off by the output-token limit: the answer is incomplete.
                    result = result.truncated();
                    tracing::warn!(agent = %rt.id, session = %key, request_id, "The answer was cut off by the output-token limit (max_tokens); recorded as truncated.");
                }
                let result = result.to_value();
                (Outcome::Succeeded { result }, out.iterations, usage)
            }
            Err(e) => (
                failure(e, dead_letter, env.attempt),
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
        End {
            entries,
            outcome,
            usage,
        }
    }
}

/// The outcome of a failed turn: dead-lettered when its retries ran out, timed out when a
/// limit or the deadline stopped it, else failed.
fn failure(e: TurnError, dead_letter: bool, attempt: u32) -> Outcome {
    match e {
        e if dead_letter => Outcome::DeadLettered {
            error: format!("{e} (after {attempt} attempts)"),
        },
        e @ (TurnError::TimedOut(_) | TurnError::DeadlinePassed) => Outcome::TimedOut {
            error: e.to_string(),
        },
        e => Outcome::Failed {
            error: e.to_string(),
        },
    }
}
